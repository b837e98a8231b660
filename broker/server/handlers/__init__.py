"""Request handlers, one module per area; each registers itself with `dispatch.handles`.

    api_versions.py  ApiVersions; SaslHandshake, SaslAuthenticate where no login is due
                     (a SASL connection logging in is answered by the connection)
    metadata.py      Metadata
    produce.py       Produce (acks 0/1/all, DelayedProduce)
    fetch.py         Fetch (long poll via DelayedFetch, sendfile slices)
    offsets.py       ListOffsets, OffsetForLeaderEpoch
    admin.py         CreateTopics, DeleteTopics, DescribeConfigs
    groups.py        consumer-group APIs on the group coordinator (broker/groups)
    producer_id.py   InitProducerId (idempotent producers)
    scram_users.py   Describe/AlterUserScramCredentials and the SCRAM credential store

See `broker.server.dispatch` for the handler contract and the setup/teardown hooks.
"""

"""Request handlers, one module per area; each registers itself with `dispatch.handles`.

    api_versions.py   ApiVersions (v3+: the feature levels, broker/features.py);
                      SaslHandshake, SaslAuthenticate where no login is due (a SASL
                      connection logging in is answered by the connection)
    metadata.py       Metadata
    describe_topic_partitions.py
                      DescribeTopicPartitions (KIP-966: Metadata's partitions, paged by a
                      cursor; shares metadata.py's partition fields)
    produce.py        Produce (acks 0/1/all, KIP-890 verification of transactional batches,
                      v12: the partition added to a transactions v2 transaction)
    fetch.py          Fetch (long poll via DelayedFetch, sendfile slices, follower fetches)
    offsets.py        ListOffsets, OffsetForLeaderEpoch
    admin.py          CreateTopics, DeleteTopics, CreatePartitions, DeleteRecords
    configs.py        DescribeConfigs, AlterConfigs, IncrementalAlterConfigs (topics,
                      brokers, client-metrics subscriptions, groups: broker/groups/
                      group_config.py)
    cluster_admin.py  DescribeCluster, DescribeLogDirs, ElectLeaders
    reassignments.py  Alter/ListPartitionReassignments (the controller's; the moves:
                      broker/cluster/reassignment.py)
    acls.py           DescribeAcls, CreateAcls, DeleteAcls
    scram_users.py    Describe/AlterUserScramCredentials
    client_quotas.py  Describe/AlterClientQuotas (the quotas: broker/quotas)
    telemetry.py      KIP-714: GetTelemetrySubscriptions, PushTelemetry,
                      ListClientMetricsResources (broker/telemetry); the subscriptions
                      themselves are config resources of configs.py
    groups.py         consumer-group APIs on the group coordinator (broker/groups)
    consumer_groups.py ConsumerGroupHeartbeat, ConsumerGroupDescribe: the consumer group
                      protocol (KIP-848, broker/groups/consumer)
    producer_id.py    InitProducerId (idempotent producers; transactional ones go to
                      transactions.py)
    transactions.py   the transaction coordinator's APIs (broker/transactions),
                      DescribeProducers
    txn_markers.py    WriteTxnMarkers, TxnOffsetCommit
    share_groups.py   ShareGroupHeartbeat, ShareGroupDescribe, ShareFetch,
                      ShareAcknowledge (share groups, KIP-932: broker/share)
    share_offsets.py  DescribeShareGroupOffsets, AlterShareGroupOffsets,
                      DeleteShareGroupOffsets (the share-partition start offsets of a
                      share group, broker/share/admin.py)
    share_state.py    Read/Write/Initialize/DeleteShareGroupState (broker to broker:
                      the share coordinator, broker/share/state_store.py)

Handler modules keep no state: the services they use are typed attributes of
`ctx.core` (broker/server/core.py, the composition root). See `broker.server.dispatch`
for the handler contract.
"""

"""Share groups (KIP-932, "queues for Kafka").

    partition_state.py  one share-partition's in-flight records: acquisition, locks,
                        delivery counts, acknowledgements, the start offset (pure)
    membership.py       a share group's members, epochs and the simple assignor (pure)
    sessions.py         share sessions of ShareFetch/ShareAcknowledge (pure)
    manager.py          the broker's service: groups coordinated here, share-partitions
                        of the data partitions led here, reads of their logs, timers
    state_store.py      the share coordinator: durable state on __share_group_state
    persister.py        the way to it, here or on another broker
    admin.py            the share-group offsets admin: describe, alter, delete
    records.py          the share groups' records in __consumer_offsets (Kafka's)

The group side (ShareGroupHeartbeat, ShareGroupDescribe) lives on the group's
coordinator (the leader of its `__consumer_offsets` partition, as classic groups);
the share-partition of a data partition lives on that partition's leader, which
serves ShareFetch and ShareAcknowledge for it.
"""

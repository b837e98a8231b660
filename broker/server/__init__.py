"""broker/server: the asyncio shell around the sans-I/O codec and the log.

    server.py      BrokerServer: listener, idle sweep, SIGTERM/SIGINT graceful shutdown;
                   run(config) is what `logflume broker` calls
    connection.py  Connection (asyncio.Protocol): framing, size limit, in-order
                   responses, sendfile of FetchSlice parts, backpressure
    dispatch.py    handler table keyed by ApiKey (@handles), RequestContext,
                   handler-module setup/teardown hooks
    core.py        BrokerCore: metadata store, LogManager, ReplicaManager,
                   purgatories, background duties (retention, cleaner, flush,
                   recovery-point checkpoint)
    purgatory.py   DelayedOperation / Purgatory (acks=all produce, long-poll fetch)
    handlers/      one module per API area

Partition state and topic lifecycle live in broker/cluster (partition.py,
replica_manager.py, metadata_store.py); broker configuration in broker/config.py.
"""

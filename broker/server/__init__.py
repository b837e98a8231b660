"""broker/server: the asyncio shell around the sans-I/O codec and the log.

    server.py      BrokerServer: listeners, idle sweep, SIGTERM/SIGINT graceful shutdown;
                   run(config) is what `logflume broker` calls
    connection.py  Connection (asyncio.Protocol): the thin shell that reads, frames,
                   gates, dispatches, orders and writes; backpressure
    framing.py     RequestFramer (size prefix, request size limits), response
                   segments; sans-I/O
    ordering.py    ResponseOrder: answers in request order, the in-flight limit;
                   sans-I/O
    sasl_gate.py   SaslGate: what a SASL connection may do before authentication;
                   sans-I/O
    response_writer.py  ResponseWriter: responses to the transport, FetchSlice
                   parts by sendfile (read in on TLS)
    tls.py         SSLContext from Kafka's ssl.* settings (PEM material), pure
    tls_accept.py  TlsAccept: the TLS handshake before a Connection, failures counted
    principal.py   User:<DN> of a client certificate, ssl.principal.mapping.rules
    dispatch.py    handler table keyed by ApiKey (@handles), RequestContext,
                   handler-module setup/teardown hooks
    core.py        BrokerCore: metadata store, LogManager, ReplicaManager,
                   purgatories, background duties (retention, cleaner, flush,
                   recovery-point checkpoint)
    purgatory.py   DelayedOperation / Purgatory (acks=all produce, long-poll fetch)
    handlers/      one module per API area

Partition state and topic lifecycle live in broker/cluster (partition.py,
replica_manager.py, metadata_store.py); broker configuration in broker/config.py,
listeners and their security protocols in broker/listeners.py.
"""

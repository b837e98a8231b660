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
    dispatch.py    handler table keyed by ApiKey (@handles), RequestContext
    core.py        BrokerCore, the composition root: metadata store, LogManager,
                   ReplicaManager, cluster view, coordinators, authorizer, purgatories
                   and background duties, built in one visible order
    coordinators.py  wiring of the group and transaction coordinators, local
                   transaction markers, the KIP-890 verifier
    purgatory.py   DelayedOperation / Purgatory (acks=all produce, long-poll fetch)
    txn_verification.py  KIP-890 guards of a transactional produce
    authz.py, api_acls.py  authorization checks of each request
    handlers/      one module per API area

Partition state, topic lifecycle, replication and the cluster view live in
broker/cluster (partition.py, replica_manager.py, delayed_produce.py, view.py);
broker configuration in broker/config.py, listeners and their security protocols in
broker/listeners.py.
"""

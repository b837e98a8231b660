"""The transaction coordinator (KIP-98): transactional ids, their producer ids and
epochs, and the two-phase commit of transactions over `__transaction_state`.

    state.py        TxnState, the table of valid transitions, TxnMetadata
    log_format.py   `__transaction_state` records (Kafka's TransactionLogKey/Value)
    coordinator.py  TransactionCoordinator: the requests and the timers
    markers.py      MarkerWriter: end-transaction markers to every partition
    channel.py      BrokerChannels: inter-broker requests (WriteTxnMarkers, verify)
"""

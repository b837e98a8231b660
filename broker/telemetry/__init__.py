"""Client telemetry (KIP-714): client-metrics subscriptions, the client instances
that ask for them and push metrics, and the export of those metrics on /metrics.

    subscriptions.py  the client-metrics config resources (type 16): keys, checks,
                      matching a client to them (pure)
    store.py          where subscriptions live: a file on a single node, znodes
                      /config/client-metrics/<name> in a cluster
    manager.py        GetTelemetrySubscriptions and PushTelemetry: client instances,
                      push intervals, limits (ClientMetricsManager)
    export.py         decoding a pushed OTLP payload and the Prometheus series it
                      becomes, expired when the client stops pushing
"""

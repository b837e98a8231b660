"""Where client-metrics subscriptions live, as the dynamic broker configs do
(broker.dynamic_config's stores, of another entity type):

- a single node: `<data dir>/meta/client-metrics.json`, written atomically;
- a cluster: the znodes `/config/client-metrics/<name>` (the name URL-encoded, as
  the client quota store encodes its entity names), `{"version":1,"config":{...}}`,
  each write followed by the change notification
  `{"version":2,"entity_path":"client-metrics/<name>"}` that every broker follows
  (broker.quotas.store.ZkQuotaStore's watcher). Kafka keeps them in its KRaft
  metadata log; its ZooKeeper mode has none.

Each store calls `on_change(name, configs)` for every subscription it learns of
(configs empty: removed); `load()` hands over those stored before.
"""

from __future__ import annotations

from broker.dynamic_config import LocalNamedEntityStore, ZkNamedEntityStore

ENTITY_TYPE = "client-metrics"


class LocalClientMetricsStore(LocalNamedEntityStore):
    """A single node's subscriptions, in one file."""

    FILE = "client-metrics.json"
    ENTITY_TYPE = ENTITY_TYPE


class ZkClientMetricsStore(ZkNamedEntityStore):
    """A cluster's subscriptions in ZooKeeper."""

    ENTITY_TYPE = ENTITY_TYPE


ClientMetricsStore = LocalClientMetricsStore | ZkClientMetricsStore

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

import urllib.parse

from broker.dynamic_config import LocalBrokerConfigStore, ZkBrokerConfigStore

ENTITY_TYPE = "client-metrics"


class LocalClientMetricsStore(LocalBrokerConfigStore):
    """A single node's subscriptions, in one file."""

    FILE = "client-metrics.json"
    ENTITY_TYPE = ENTITY_TYPE

    async def load(self) -> None:
        if self.on_change is not None:
            for name, props in self._all().items():
                self.on_change(name, props)


class ZkClientMetricsStore(ZkBrokerConfigStore):
    """A cluster's subscriptions in ZooKeeper; read at start by the notices' loaders."""

    ENTITY_TYPE = ENTITY_TYPE

    def _child(self, name: str) -> str:
        return urllib.parse.quote_plus(name, safe="")

    def _name(self, child: str) -> str:
        return urllib.parse.unquote_plus(child)

    async def load(self) -> None:
        """Nothing to do: the cluster's start reads every subscription (the client
        quota store's `entity_loaders`) and tells `on_change`."""


ClientMetricsStore = LocalClientMetricsStore | ZkClientMetricsStore

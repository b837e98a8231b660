"""Where dynamic group configs (broker.groups.group_config) live, as the dynamic
broker configs do (broker.dynamic_config's stores, of another entity type):

- a single node: `<data dir>/meta/group-configs.json`, written atomically;
- a cluster: the znodes `/config/groups/<group id>` (the id URL-encoded, as the
  client-metrics store encodes its names), `{"version":1,"config":{...}}`, each write
  followed by the change notification `{"version":2,"entity_path":"groups/<id>"}`
  that every broker follows (broker.quotas.store.ZkQuotaStore's watcher). Kafka 4
  keeps them in its KRaft metadata log; its ZooKeeper mode had none.

Each store calls `on_change(group id, configs)` for every group it learns of
(configs empty: none left); `load()` hands over those stored before.
"""

from __future__ import annotations

import urllib.parse

from broker.dynamic_config import LocalBrokerConfigStore, ZkBrokerConfigStore

ENTITY_TYPE = "groups"


class LocalGroupConfigStore(LocalBrokerConfigStore):
    """A single node's group configs, in one file."""

    FILE = "group-configs.json"
    ENTITY_TYPE = ENTITY_TYPE

    async def load(self) -> None:
        if self.on_change is not None:
            for name, props in self._all().items():
                self.on_change(name, props)


class ZkGroupConfigStore(ZkBrokerConfigStore):
    """A cluster's group configs in ZooKeeper; read at start by the notices' loaders."""

    ENTITY_TYPE = ENTITY_TYPE

    def _child(self, name: str) -> str:
        return urllib.parse.quote_plus(name, safe="")

    def _name(self, child: str) -> str:
        return urllib.parse.unquote_plus(child)

    async def load(self) -> None:
        """Nothing to do: the cluster's start reads every group's configs (the client
        quota store's `entity_loaders`) and tells `on_change`."""


GroupConfigStore = LocalGroupConfigStore | ZkGroupConfigStore

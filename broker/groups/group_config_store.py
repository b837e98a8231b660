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

from broker.dynamic_config import LocalNamedEntityStore, ZkNamedEntityStore

ENTITY_TYPE = "groups"


class LocalGroupConfigStore(LocalNamedEntityStore):
    """A single node's group configs, in one file."""

    FILE = "group-configs.json"
    ENTITY_TYPE = ENTITY_TYPE


class ZkGroupConfigStore(ZkNamedEntityStore):
    """A cluster's group configs in ZooKeeper."""

    ENTITY_TYPE = ENTITY_TYPE


GroupConfigStore = LocalGroupConfigStore | ZkGroupConfigStore

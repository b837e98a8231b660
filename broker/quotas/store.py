"""Where client quotas live: {Entity: {key: value}}.

- `LocalQuotaStore` (single node): one file, `<data dir>/meta/client-quotas.json`,
  written atomically; survives restarts.
- `ZkQuotaStore` (cluster): Kafka's znodes, `/config/users/<user>`,
  `/config/clients/<client-id>`, `/config/users/<user>/clients/<client-id>`, with
  `<default>` for a default entity and names URL-encoded as the SCRAM store encodes
  them (broker.sasl.credentials), each `{"version":1,"config":{key: "value"}}`. A
  user's znode holds its SCRAM credentials too: a write keeps the keys it does not
  own. After each write a change notification,
  `/config/changes/config_change_<seq>` = `{"version":2,"entity_path":"users/<user>"}`,
  as Kafka writes it; every broker watches `/config/changes` and re-reads the
  entities named by notifications it has not seen yet (all of them once at start),
  then deletes the notifications older than 15 minutes, as Kafka. The same
  watcher serves the other entity types Kafka notifies of: a notification for
  `<type>/<name>` goes to `entity_handlers[<type>]` (dynamic broker configs register
  `brokers`: broker/dynamic_config.py), the full load at start calls
  `entity_loaders` too (a change notified before it is not lost), and they write
  their own notifications through `notify`.

`quotas` is the in-memory view the quota manager reads; `version` grows with every
change it sees, so that readers can cache what they derived from it. `apply(changes)`
writes {entity: its full new configs (empty: none left)}, async for ZooKeeper. Both
are owned by the broker's event loop.
"""

from __future__ import annotations

import asyncio
import logging
import urllib.parse
from collections.abc import Awaitable, Callable
from pathlib import Path

import orjson
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.cluster.zk import (
    CHANGE_EXPIRATION_MS,
    CONFIG_CHANGES,
    CONFIG_CLIENTS,
    CONFIG_USERS,
    ZkSession,
    purge_expired_notifications,
)
from broker.quotas.entity import DEFAULT, KEY_TYPES, Configs, Entity
from common.fsutil import atomic_write

log = logging.getLogger(__name__)

Changes = dict[Entity, Configs]
CHANGE_PREFIX = "config_change_"


def to_kafka(configs: Configs) -> dict[str, str]:
    """Values as Kafka's properties hold them: longs without a fraction."""
    return {
        k: str(int(v)) if KEY_TYPES[k] == "LONG" else repr(v) for k, v in sorted(configs.items())
    }


def from_kafka(config: dict) -> Configs:
    """The quota keys of a znode's config (SCRAM credentials and unreadable values
    left out)."""
    out: Configs = {}
    for k, v in config.items():
        if k in KEY_TYPES:
            try:
                out[k] = float(v)
            except (TypeError, ValueError):
                log.error("client quota %s=%r is not a number; ignored", k, v)
    return out


class _Store:
    def __init__(self) -> None:
        self.quotas: dict[Entity, Configs] = {}
        self.version = 0

    def _set(self, entity: Entity, configs: Configs) -> None:
        if configs:
            self.quotas[entity] = configs
        else:
            self.quotas.pop(entity, None)
        self.version += 1


class LocalQuotaStore(_Store):
    """A single node's client quotas, in one file."""

    def __init__(self, data_dir: Path):
        super().__init__()
        self.path = Path(data_dir) / "meta" / "client-quotas.json"
        if self.path.exists():
            try:
                for e in orjson.loads(self.path.read_bytes())["entities"]:
                    self._set(Entity(e.get("user"), e.get("client-id")), from_kafka(e["config"]))
            except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as exc:
                log.error("client quotas %s are unreadable (%s); none applied", self.path, exc)

    def apply(self, changes: Changes) -> None:
        for entity, configs in changes.items():
            self._set(entity, configs)
        entities = [
            {"user": e.user, "client-id": e.client_id, "config": to_kafka(c)}
            for e, c in self.quotas.items()
        ]
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, orjson.dumps({"version": 1, "entities": entities}))


def _encode(name: str) -> str:
    return name if name == DEFAULT else urllib.parse.quote_plus(name, safe="")


def _decode(name: str) -> str:
    return name if name == DEFAULT else urllib.parse.unquote_plus(name)


def entity_path(entity: Entity) -> str:
    """The znode path under /config, as in Kafka's change notifications."""
    if entity.user is not None and entity.client_id is not None:
        return f"users/{_encode(entity.user)}/clients/{_encode(entity.client_id)}"
    if entity.user is not None:
        return f"users/{_encode(entity.user)}"
    assert entity.client_id is not None  # parse_entity refuses an empty entity
    return f"clients/{_encode(entity.client_id)}"


def parse_entity_path(path: str) -> Entity | None:
    parts = path.strip("/").split("/")
    if len(parts) == 4 and parts[0] == "users" and parts[2] == "clients":
        return Entity(_decode(parts[1]), _decode(parts[3]))
    if len(parts) == 2 and parts[0] == "users":
        return Entity(_decode(parts[1]), None)
    if len(parts) == 2 and parts[0] == "clients":
        return Entity(None, _decode(parts[1]))
    return None


class ZkQuotaStore(_Store):
    """A cluster's client quotas in ZooKeeper; `watch(zk)` (the node's ZkSession)
    starts following them."""

    def __init__(self, change_expiration_ms: int = CHANGE_EXPIRATION_MS) -> None:
        super().__init__()
        self.change_expiration_ms = change_expiration_ms
        self._zk: ZkSession | None = None  # set by watch()
        self._seen = -1  # highest change notification applied
        self._loaded = False
        self._pending: list[str] | None = None
        self._task: asyncio.Task | None = None
        # entity type -> async fn(entity name): notified changes of other entity types;
        # and what re-reads all of theirs when this store (re)loads everything
        self.entity_handlers: dict[str, Callable[[str], Awaitable[None]]] = {}
        self.entity_loaders: list[Callable[[], Awaitable[None]]] = []

    def watch(self, zk) -> list:
        self._zk = zk
        return [zk.watch_children(CONFIG_CHANGES, self._changes), self._stop]

    def _session(self) -> ZkSession:
        if self._zk is None:
            raise RuntimeError("the client quota store is not watching ZooKeeper yet")
        return self._zk

    def _stop(self) -> None:
        if self._task is not None:
            self._task.cancel()

    def _changes(self, names: list[str]) -> None:
        self._pending = names
        if self._task is None or self._task.done():
            self._task = asyncio.get_running_loop().create_task(self._work())

    async def _work(self) -> None:
        while self._pending is not None:
            names, self._pending = self._pending, None
            try:
                await self._process(names)
            except Exception:
                log.exception("reading client quota changes from ZooKeeper failed; retrying")
                self._pending = self._pending or names
                await asyncio.sleep(1)

    async def _process(self, names: list[str]) -> None:
        seqs = sorted(
            (int(n[len(CHANGE_PREFIX) :]), n)
            for n in names
            if n.startswith(CHANGE_PREFIX) and n[len(CHANGE_PREFIX) :].isdigit()
        )
        if not self._loaded:
            await self._load_all()
            self._loaded = True
            self._seen = seqs[-1][0] if seqs else -1
        await self._apply_new(seqs)
        await purge_expired_notifications(
            self._session(), CONFIG_CHANGES, [n for _, n in seqs], self.change_expiration_ms
        )

    async def _apply_new(self, seqs: list[tuple[int, str]]) -> None:
        for seq, name in seqs:
            if seq <= self._seen:
                continue
            try:
                data, _ = await self._session().call("get", f"{CONFIG_CHANGES}/{name}")
                path = str(orjson.loads(data)["entity_path"])
            except NoNodeError:
                path = ""
            except (orjson.JSONDecodeError, KeyError, TypeError):
                log.error("unreadable config change notification %s; skipped", name)
                path = ""
            kind, _, rest = path.partition("/")
            handler = self.entity_handlers.get(kind)
            entity = parse_entity_path(path)
            if handler is not None:
                await handler(rest)
            elif entity is not None:
                await self._read(entity)
            self._seen = seq

    async def _children(self, path: str) -> list[str]:
        try:
            return list(await self._session().call("get_children", path))
        except NoNodeError:
            return []

    async def _load_all(self) -> None:
        for user in await self._children(CONFIG_USERS):
            await self._read(Entity(_decode(user), None))
            for client in await self._children(f"{CONFIG_USERS}/{user}/clients"):
                await self._read(Entity(_decode(user), _decode(client)))
        for client in await self._children(CONFIG_CLIENTS):
            await self._read(Entity(None, _decode(client)))
        for load in self.entity_loaders:
            await load()

    async def _read(self, entity: Entity) -> None:
        try:
            data, _ = await self._session().call("get", "/config/" + entity_path(entity))
            config = orjson.loads(data).get("config", {}) if data else {}
        except NoNodeError:
            config = {}
        except (orjson.JSONDecodeError, AttributeError):
            log.error("client quotas of %s in ZooKeeper are unreadable; ignored", entity)
            config = {}
        self._set(entity, from_kafka(config))

    async def apply(self, changes: Changes) -> None:
        """Read-modify-write each entity's znode with compare-and-set (another broker,
        or the SCRAM store, may write the same znode), then notify every broker."""
        zk = self._session()
        for entity, configs in changes.items():
            path = "/config/" + entity_path(entity)
            while True:
                try:
                    data, stat = await zk.call("get", path)
                    version = stat.version
                except NoNodeError:
                    data, version = b"", None
                doc = orjson.loads(data) if data else {}
                config = {k: v for k, v in doc.get("config", {}).items() if k not in KEY_TYPES}
                config.update(to_kafka(configs))
                payload = orjson.dumps({"version": 1, "config": config})
                try:
                    if version is None:
                        await zk.call("create", path, payload, makepath=True)
                    else:
                        await zk.call("set", path, payload, version=version)
                    break
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue  # raced with another writer: read again
            await self.notify(entity_path(entity))
            self._set(entity, configs)  # this broker's view follows at once

    async def notify(self, path: str) -> None:
        """Tell every broker that the entity at /config/`path` changed, as Kafka does."""
        notice = orjson.dumps({"version": 2, "entity_path": path})
        await self._session().call(
            "create", f"{CONFIG_CHANGES}/{CHANGE_PREFIX}", notice, sequence=True, makepath=True
        )

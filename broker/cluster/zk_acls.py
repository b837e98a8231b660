"""ACL bindings in ZooKeeper, as Kafka's ZooKeeper mode keeps them.

    /kafka-acl/<Type>/<name>                          literal patterns
    /kafka-acl-extended/prefixed/<Type>/<name>        prefixed patterns
    /kafka-acl-changes/acl_changes_<seq>              "Topic:name" of a changed literal
    /kafka-acl-extended-changes/acl_changes_<seq>     {"version":1,"resourceType",...}

Each resource znode holds Kafka's JSON (`{"version":1,"acls":[...]}`, see
broker.security.acl). A change is a read-modify-write of the resource znode guarded
by its version (compare-and-set, retried on a conflict, so two brokers adding ACLs
to one resource at once lose nothing), then a sequential change notification. Every
broker watches the notification directories and re-reads the resources named by
notifications it has not seen yet, so a change made through any broker is applied
everywhere within a watch round trip. As Kafka's brokers do, each broker removes
the notifications older than 15 minutes (ZooKeeper's creation time) whenever it
processes new ones, so the directories hold only recent changes.

`ZkAclStore` is owned by the broker's authorizer; event-loop only, like ZkSession.
"""

from __future__ import annotations

import asyncio
import functools
import logging
from collections.abc import Callable

import orjson
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError

from broker.cluster.zk import CHANGE_EXPIRATION_MS, ZkSession, purge_expired_notifications
from broker.security.acl import (
    Entries,
    PatternType,
    Resource,
    entries_from_json,
    entries_to_json,
    zk_type,
    zk_type_name,
)

log = logging.getLogger(__name__)

LITERAL_ROOT = "/kafka-acl"
PREFIXED_ROOT = "/kafka-acl-extended/prefixed"
LITERAL_CHANGES = "/kafka-acl-changes"
EXTENDED_CHANGES = "/kafka-acl-extended-changes"
CHANGE_PREFIX = "acl_changes_"


def acl_path(r: Resource) -> str:
    root = PREFIXED_ROOT if r.pattern == PatternType.PREFIXED else LITERAL_ROOT
    return f"{root}/{zk_type_name(r.type)}/{r.name}"


def encode_change(r: Resource) -> tuple[str, bytes]:
    """(notification directory, value) announcing a change of `r`."""
    if r.pattern == PatternType.LITERAL:
        return LITERAL_CHANGES, f"{zk_type_name(r.type)}:{r.name}".encode()
    doc = {
        "version": 1,
        "resourceType": zk_type_name(r.type),
        "name": r.name,
        "patternType": "Prefixed",
    }
    return EXTENDED_CHANGES, orjson.dumps(doc)


def decode_change(directory: str, data: bytes) -> Resource:
    if directory == LITERAL_CHANGES:
        type_name, _, name = data.decode().partition(":")
        return Resource(zk_type(type_name), name)
    doc = orjson.loads(data)
    return Resource(zk_type(doc["resourceType"]), doc["name"], PatternType.PREFIXED)


class ZkAclStore:
    """The ACL store of a cluster broker (see the module docstring)."""

    def __init__(self, session: ZkSession, change_expiration_ms: int = CHANGE_EXPIRATION_MS):
        self.zk = session
        self.change_expiration_ms = change_expiration_ms
        self.on_change: Callable[[Resource, Entries], None] | None = None
        self._seen: dict[str, set[str]] = {LITERAL_CHANGES: set(), EXTENDED_CHANGES: set()}
        self._lock = asyncio.Lock()
        self._tasks: set[asyncio.Task] = set()
        self._stops: list[Callable[[], None]] = []

    async def load(self) -> dict[Resource, Entries]:
        """Every binding now; from here on, changes arrive through `on_change`."""
        for path in (LITERAL_ROOT, PREFIXED_ROOT, LITERAL_CHANGES, EXTENDED_CHANGES):
            await self.zk.call("ensure_path", path)
        for directory, seen in self._seen.items():
            seen.update(await self.zk.call("get_children", directory))
        acls: dict[Resource, Entries] = {}
        for root, pattern in (
            (LITERAL_ROOT, PatternType.LITERAL),
            (PREFIXED_ROOT, PatternType.PREFIXED),
        ):
            for type_name in await self.zk.call("get_children", root):
                for name in await self.zk.call("get_children", f"{root}/{type_name}"):
                    r = Resource(zk_type(type_name), name, pattern)
                    acls[r] = await self._read(r)
        for directory in self._seen:
            self._stops.append(
                self.zk.watch_children(directory, functools.partial(self._notified, directory))
            )
        return acls

    async def close(self) -> None:
        for stop in self._stops:
            stop()
        for task in list(self._tasks):
            task.cancel()
        await asyncio.gather(*self._tasks, return_exceptions=True)

    async def _read(self, r: Resource) -> Entries:
        try:
            data, _ = await self.zk.call("get", acl_path(r))
        except NoNodeError:
            return frozenset()
        return entries_from_json(orjson.loads(data)) if data else frozenset()

    def _notified(self, directory: str, children: list[str]) -> None:
        new = sorted(c for c in children if c not in self._seen[directory])
        if not new:
            return
        self._seen[directory].update(new)
        task = asyncio.create_task(self._apply(directory, new))
        self._tasks.add(task)
        task.add_done_callback(self._tasks.discard)

    async def _apply(self, directory: str, names: list[str]) -> None:
        async with self._lock:  # one re-read at a time: the last read wins
            for name in names:
                try:
                    data, _ = await self.zk.call("get", f"{directory}/{name}")
                    r = decode_change(directory, data)
                    entries = await self._read(r)
                except NoNodeError:
                    continue
                except (ValueError, KeyError):
                    log.warning("unreadable ACL change notification %s/%s", directory, name)
                    continue
                if self.on_change is not None:
                    self.on_change(r, entries)
            await self._purge(directory)

    async def _purge(self, directory: str) -> None:
        self._seen[directory] -= await purge_expired_notifications(
            self.zk, directory, list(self._seen[directory]), self.change_expiration_ms
        )

    async def update(
        self, resource: Resource, fn: Callable[[Entries], Entries]
    ) -> tuple[Entries, Entries]:
        """Compare-and-set fn(old) into the resource's znode -> (old, new), then
        announce the change."""
        path = acl_path(resource)
        while True:
            try:
                data, stat = await self.zk.call("get", path)
                old, version = entries_from_json(orjson.loads(data)), stat.version
            except NoNodeError:
                old, version = frozenset(), None
            new = frozenset(fn(old))
            if new == old:
                return old, new
            value = orjson.dumps(entries_to_json(new))
            try:
                if version is None:
                    await self.zk.call("create", path, value, makepath=True)
                elif new:
                    await self.zk.call("set", path, value, version=version)
                else:
                    await self.zk.call("delete", path, version=version)
            except (NodeExistsError, BadVersionError, NoNodeError):
                continue  # another broker changed it first: read again
            directory, note = encode_change(resource)
            await self.zk.call("create", f"{directory}/{CHANGE_PREFIX}", note, sequence=True)
            return old, new

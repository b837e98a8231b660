"""Where ACL bindings live on a single node: `<data dir>/meta/acls.json`, one file
written atomically, in Kafka's per-resource JSON (the same documents a cluster keeps
under /kafka-acl in ZooKeeper, broker.cluster.zk_acls).

A store offers `load()` -> {Resource: entries} (the ZooKeeper store's is async),
`update(resource, fn)` (applies fn(old entries) -> new entries, persists the result
and returns (old, new); async because the ZooKeeper store does I/O) and an
`on_change(resource, entries)` callback attribute, called for changes made elsewhere
(never by this single-node store); `close()` releases what it holds.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from pathlib import Path

import orjson

from broker.security.acl import (
    Entries,
    PatternType,
    Resource,
    entries_from_json,
    entries_to_json,
    zk_type,
    zk_type_name,
)
from common.fsutil import atomic_write

log = logging.getLogger(__name__)


def resource_key(r: Resource) -> str:
    """`Topic:name` for a literal pattern, `prefixed/Topic:name` for a prefixed one."""
    prefix = "prefixed/" if r.pattern == PatternType.PREFIXED else ""
    return f"{prefix}{zk_type_name(r.type)}:{r.name}"


def resource_of_key(key: str) -> Resource:
    pattern = PatternType.LITERAL
    if key.startswith("prefixed/"):
        pattern, key = PatternType.PREFIXED, key.removeprefix("prefixed/")
    type_name, _, name = key.partition(":")
    return Resource(zk_type(type_name), name, pattern)


class LocalAclStore:
    """Owned by the authorizer of a single-node broker; event-loop only."""

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / "meta" / "acls.json"
        self.on_change: Callable[[Resource, Entries], None] | None = None
        self._acls: dict[Resource, Entries] = {}

    def load(self) -> dict[Resource, Entries]:
        try:
            raw = orjson.loads(self.path.read_bytes())
        except FileNotFoundError:
            raw = {}
        self._acls = {resource_of_key(k): entries_from_json(v) for k, v in raw.items()}
        return dict(self._acls)

    async def close(self) -> None:
        """Nothing to release: every update is already on disk."""

    async def update(
        self, resource: Resource, fn: Callable[[Entries], Entries]
    ) -> tuple[Entries, Entries]:
        old = self._acls.get(resource, frozenset())
        new = frozenset(fn(old))
        if new:
            self._acls[resource] = new
        else:
            self._acls.pop(resource, None)
        doc = {resource_key(r): entries_to_json(e) for r, e in self._acls.items()}
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, orjson.dumps(doc, option=orjson.OPT_INDENT_2))
        return old, new

"""Where SCRAM credentials live: user -> {mechanism: ScramCredential}.

Both stores keep Kafka's JSON per user, as Kafka writes `/config/users/<user>`:

    {"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,server_key=...,iterations=4096"}}

- `LocalCredentialStore` (single node): one file per user under
  `<data dir>/meta/users/`, written atomically; survives restarts.
- `ZkCredentialStore` (cluster): the znodes `/config/users/<user>` (user name
  URL-encoded, as Kafka's Sanitizer does). Every broker watches the children of
  `/config/users` and the data of each user znode, so a credential added, changed or
  deleted through any broker reaches all of them as soon as ZooKeeper delivers the
  watch (well under a second on a healthy ensemble); Kafka's change notifications
  under /config/changes are not needed for that and are not written.

`users` is the in-memory view SCRAM authentication reads (`get`); `apply(changes)`
writes {user: {mechanism: credential, or None to delete}} (async for ZooKeeper).
Both are owned by the broker's event loop; not safe across threads.
"""

from __future__ import annotations

import functools
import logging
import urllib.parse
from collections.abc import Callable
from pathlib import Path

import orjson
from kazoo.exceptions import BadVersionError, NodeExistsError, NoNodeError, NotEmptyError

from broker.cluster.zk import CONFIG_USERS, ZkSession
from broker.sasl.scram import ScramCredential
from common.fsutil import atomic_write

log = logging.getLogger(__name__)

Changes = dict[str, dict[str, ScramCredential | None]]


def to_json(creds: dict[str, ScramCredential]) -> bytes:
    return orjson.dumps({"version": 1, "config": {m: c.to_kafka() for m, c in creds.items()}})


def from_json(data: bytes) -> dict[str, ScramCredential]:
    """The SCRAM credentials in a user's config (other user configs, such as
    quotas, are left alone); ValueError when unreadable."""
    try:
        config = orjson.loads(data).get("config", {})
        return {
            m: ScramCredential.from_kafka(v) for m, v in config.items() if m.startswith("SCRAM-")
        }
    except (AttributeError, orjson.JSONDecodeError) as e:
        raise ValueError(str(e)) from None


def _merge(old: dict[str, ScramCredential], change: dict) -> dict[str, ScramCredential]:
    out = dict(old)
    for mechanism, cred in change.items():
        if cred is None:
            out.pop(mechanism, None)
        else:
            out[mechanism] = cred
    return out


class _Store:
    def __init__(self):
        self.users: dict[str, dict[str, ScramCredential]] = {}

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)


class LocalCredentialStore(_Store):
    """A single node's credentials, one file per user."""

    def __init__(self, data_dir: Path):
        super().__init__()
        self.dir = Path(data_dir) / "meta" / "users"
        self.dir.mkdir(parents=True, exist_ok=True)
        for path in sorted(self.dir.glob("*.json")):
            try:
                self.users[urllib.parse.unquote(path.stem)] = from_json(path.read_bytes())
            except ValueError as e:
                log.error("SCRAM credentials %s are unreadable (%s); user skipped", path, e)

    def apply(self, changes: Changes) -> None:
        for user, change in changes.items():
            creds = _merge(self.users.get(user, {}), change)
            path = self.dir / f"{urllib.parse.quote(user, safe='')}.json"
            if creds:
                atomic_write(path, to_json(creds))
                self.users[user] = creds
            else:
                path.unlink(missing_ok=True)
                self.users.pop(user, None)


def user_path(user: str) -> str:
    return f"{CONFIG_USERS}/{urllib.parse.quote_plus(user, safe='')}"


class ZkCredentialStore(_Store):
    """A cluster's credentials in ZooKeeper; `watch(zk)` (the node's ZkSession)
    starts following them."""

    def __init__(self):
        super().__init__()
        self._zk: ZkSession | None = None  # set by watch()
        self._watches: dict[str, Callable[[], None]] = {}  # znode name -> stopper of its data watch

    def watch(self, zk) -> list:
        self._zk = zk
        return [zk.watch_children(CONFIG_USERS, self._children), self._stop_all]

    def _session(self) -> ZkSession:
        if self._zk is None:
            raise RuntimeError("the credential store is not watching ZooKeeper yet")
        return self._zk

    def _stop_all(self) -> None:
        for stop in self._watches.values():
            stop()
        self._watches.clear()

    def _children(self, names: list[str]) -> None:
        for name in set(self._watches) - set(names):
            self._watches.pop(name)()
            self.users.pop(urllib.parse.unquote_plus(name), None)
        zk = self._session()
        for name in set(names) - set(self._watches):
            path = f"{CONFIG_USERS}/{name}"
            self._watches[name] = zk.watch_data(path, functools.partial(self._data, name))

    def _data(self, name: str, data: bytes | None, stat) -> None:
        user = urllib.parse.unquote_plus(name)
        try:
            creds = from_json(data) if data else {}
        except ValueError as e:
            log.error("SCRAM credentials of %r in ZooKeeper are unreadable: %s", user, e)
            creds = {}
        if creds:
            self.users[user] = creds
        else:
            self.users.pop(user, None)

    async def apply(self, changes: Changes) -> None:
        """Read-modify-write each user's znode with compare-and-set (another broker
        may write the same user)."""
        zk = self._session()
        for user, change in changes.items():
            path = user_path(user)
            while True:
                try:
                    data, stat = await zk.call("get", path)
                    version = stat.version
                except NoNodeError:
                    data, version = b"", None
                doc = orjson.loads(data) if data else {}
                config = {
                    k: v for k, v in doc.get("config", {}).items() if not k.startswith("SCRAM-")
                }
                creds = _merge(from_json(data) if data else {}, change)
                config.update({m: c.to_kafka() for m, c in creds.items()})
                payload = orjson.dumps({"version": 1, "config": config})
                try:
                    if version is None:
                        if config:
                            await zk.call("create", path, payload, makepath=True)
                    elif config:
                        await zk.call("set", path, payload, version=version)
                    else:
                        await self._delete(zk, path, version)
                    break
                except (BadVersionError, NodeExistsError, NoNodeError):
                    continue  # raced with another writer: read again
            # this broker's view follows at once; the watch confirms it
            if creds:
                self.users[user] = creds
            else:
                self.users.pop(user, None)

    @staticmethod
    async def _delete(zk, path: str, version: int) -> None:
        """Remove a user's znode left without configs, or empty its config when it
        still has children (client quotas of the user's client ids,
        /config/users/<user>/clients/...)."""
        try:
            await zk.call("delete", path, version=version)
        except NotEmptyError:
            payload = orjson.dumps({"version": 1, "config": {}})
            await zk.call("set", path, payload, version=version)

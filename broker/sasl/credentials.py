"""SCRAM credentials of a single-node broker, persisted under `<data dir>/meta/users/`
in Kafka's ZooKeeper JSON (`/config/users/<user>`):

    {"version":1,"config":{"SCRAM-SHA-512":"salt=...,stored_key=...,server_key=...,iterations=4096"}}

One file per user (name percent-encoded), written atomically. Owned by the
broker's event loop; not safe across threads. Small synchronous file I/O on admin
paths only (AlterUserScramCredentials), never per request.
"""

from __future__ import annotations

import logging
import urllib.parse
from pathlib import Path

import orjson

from broker.sasl.scram import ScramCredential
from common.fsutil import atomic_write

log = logging.getLogger(__name__)


def to_json(creds: dict[str, ScramCredential]) -> bytes:
    return orjson.dumps({"version": 1, "config": {m: c.to_kafka() for m, c in creds.items()}})


def from_json(data: bytes) -> dict[str, ScramCredential]:
    config = orjson.loads(data).get("config", {})
    return {m: ScramCredential.from_kafka(v) for m, v in config.items() if m.startswith("SCRAM-")}


class LocalCredentialStore:
    """user -> {mechanism: ScramCredential}, on disk."""

    def __init__(self, data_dir: Path):
        self.dir = Path(data_dir) / "meta" / "users"
        self.dir.mkdir(parents=True, exist_ok=True)
        self.users: dict[str, dict[str, ScramCredential]] = {}
        for path in sorted(self.dir.glob("*.json")):
            try:
                self.users[urllib.parse.unquote(path.stem)] = from_json(path.read_bytes())
            except (ValueError, AttributeError) as e:
                log.error("SCRAM credentials %s are unreadable (%s); user skipped", path, e)

    def get(self, user: str, mechanism: str) -> ScramCredential | None:
        return self.users.get(user, {}).get(mechanism)

    def _path(self, user: str) -> Path:
        return self.dir / f"{urllib.parse.quote(user, safe='')}.json"

    def put(self, user: str, mechanism: str, cred: ScramCredential) -> None:
        creds = {**self.users.get(user, {}), mechanism: cred}
        atomic_write(self._path(user), to_json(creds))
        self.users[user] = creds

    def delete(self, user: str, mechanism: str) -> bool:
        """False when the user has no credential for `mechanism`."""
        creds = dict(self.users.get(user, {}))
        if creds.pop(mechanism, None) is None:
            return False
        if creds:
            atomic_write(self._path(user), to_json(creds))
            self.users[user] = creds
        else:
            self._path(user).unlink(missing_ok=True)
            del self.users[user]
        return True

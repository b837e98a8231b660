"""Single-node metadata: cluster id and topics, persisted in the data directory.

Layout under `<data dir>/meta/`:

    cluster.json           {"cluster_id": "...", "version": 1}
    topics/<name>.json     one file per topic: partitions, replica assignment,
                           config overrides, topic id

Every file is written atomically (temp file in the same directory, fsync, rename,
fsync of the directory), so after a SIGKILL or power cut each topic file is either
the old or the new version, never torn. The topic file is the commit point of
CreateTopics: logs are created first, then the file; partition directories whose
topic has no file are orphans of an interrupted create or delete and are removed at
start-up by the broker. Topic names are validated (`names.validate_topic_name`)
before they ever reach a path.
"""

from __future__ import annotations

import base64
import dataclasses
import logging
import os
import uuid
from pathlib import Path

import orjson

from broker.cluster.names import validate_topic_name
from common.fsutil import atomic_write, fsync_dir

log = logging.getLogger(__name__)


@dataclasses.dataclass
class TopicMeta:
    """What the broker knows about one topic; replaced (not mutated) on change."""

    name: str
    partitions: int
    replication_factor: int
    configs: dict[str, str]  # overrides only; defaults come from the broker config
    assignments: list[list[int]]  # replica broker ids per partition, leader first
    topic_id: str = dataclasses.field(default_factory=lambda: uuid.uuid4().hex)

    def to_json(self) -> bytes:
        return orjson.dumps(dataclasses.asdict(self), option=orjson.OPT_INDENT_2)

    @classmethod
    def from_json(cls, data: bytes) -> TopicMeta:
        raw = orjson.loads(data)
        meta = cls(
            name=validate_topic_name(raw["name"]),
            partitions=int(raw["partitions"]),
            replication_factor=int(raw["replication_factor"]),
            configs={str(k): str(v) for k, v in raw["configs"].items()},
            assignments=[[int(b) for b in r] for r in raw["assignments"]],
            topic_id=str(raw["topic_id"]),
        )
        if meta.partitions != len(meta.assignments) or meta.partitions < 1:
            raise ValueError("partition count does not match the assignment")
        return meta


def new_cluster_id() -> str:
    """Kafka-style cluster id: a random UUID in URL-safe base64 without padding."""
    return base64.urlsafe_b64encode(uuid.uuid4().bytes).rstrip(b"=").decode()


class LocalMetadataStore:
    """The topic registry of a single-node broker.

    Owned by the broker's event loop (one thread); not safe across threads. Methods
    do small synchronous file I/O (a few hundred bytes plus fsync) and are only
    called on admin paths (create/delete topic), never per produced batch.
    """

    def __init__(self, data_dir: Path):
        self.root = Path(data_dir) / "meta"
        self.topics_dir = self.root / "topics"
        self.topics_dir.mkdir(parents=True, exist_ok=True)
        self.cluster_id = self._load_cluster_id()
        self._topics: dict[str, TopicMeta] = {}
        self._names: dict[str, str] = {}  # topic id (hex) -> name
        self._load_topics()

    def _load_cluster_id(self) -> str:
        path = self.root / "cluster.json"
        try:
            return str(orjson.loads(path.read_bytes())["cluster_id"])
        except FileNotFoundError:
            pass
        except (ValueError, KeyError, TypeError) as e:
            log.error("%s is unreadable (%s); keeping it aside and starting a new one", path, e)
            os.replace(path, path.with_name("cluster.json.corrupt"))
        cluster_id = new_cluster_id()
        atomic_write(path, orjson.dumps({"cluster_id": cluster_id, "version": 1}))
        return cluster_id

    def _load_topics(self) -> None:
        for path in sorted(self.topics_dir.iterdir()):
            if path.name.endswith(".tmp"):
                path.unlink()
                continue
            if not path.name.endswith(".json"):
                continue
            try:
                meta = TopicMeta.from_json(path.read_bytes())
            except (ValueError, KeyError, TypeError) as e:
                log.error("topic metadata %s is unreadable (%s); topic skipped", path, e)
                continue
            if path.name != f"{meta.name}.json":
                log.error("topic metadata %s names topic %r; skipped", path, meta.name)
                continue
            self._index(meta)

    def _index(self, meta: TopicMeta) -> None:
        old = self._topics.get(meta.name)
        if old is not None:
            self._names.pop(old.topic_id, None)
        self._topics[meta.name] = meta
        self._names[meta.topic_id] = meta.name

    def name_of(self, topic_id: uuid.UUID) -> str | None:
        """The name of the topic with id `topic_id` (requests that name topics by id)."""
        return self._names.get(topic_id.hex)

    def topics(self) -> dict[str, TopicMeta]:
        return dict(self._topics)

    def get(self, name: str) -> TopicMeta | None:
        return self._topics.get(name)

    def __contains__(self, name: str) -> bool:
        return name in self._topics

    def put(self, meta: TopicMeta) -> None:
        """Create or replace a topic's record durably."""
        validate_topic_name(meta.name)
        atomic_write(self.topics_dir / f"{meta.name}.json", meta.to_json())
        self._index(meta)

    def delete(self, name: str) -> None:
        validate_topic_name(name)
        old = self._topics.pop(name, None)
        if old is not None:
            self._names.pop(old.topic_id, None)
        try:
            (self.topics_dir / f"{name}.json").unlink()
        except FileNotFoundError:
            return
        fsync_dir(self.topics_dir)

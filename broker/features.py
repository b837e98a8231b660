"""Feature levels (KIP-584): the features this broker supports, the level the cluster
finalized for each, and how ApiVersions v3+ reports them.

A client reads the finalized levels to decide which protocol it speaks: a producer
that sees `transaction.version` 2 finalized runs transactions v2 (KIP-890 part 2:
Produce v12 without AddPartitionsToTxn, EndTxn v5 answering the epoch bumped at
every transaction end), as Kafka 4.x finalizes it by default.

`SUPPORTED` is the table: one row per feature, its supported range and, optionally,
the broker config key that pins its finalized level (Kafka sets it with
`kafka-features.sh upgrade`/`downgrade`; logflume takes it from the key, whose
default is the highest level); a feature without a key is finalized at its highest
level. A new feature is one row here (and its key, if any, in broker/config.py,
whose range the config checks against the row).

Where the finalized levels live: on a single node, the config. In a cluster every
broker must agree, so they live in ZooKeeper's `/feature` znode, Kafka's ZK-mode
FeatureZNode version 2 (`{"version":2,"status":1,"features":{name:
{"max_version_level":n}}}`; version 1's `min_version_level` is read and ignored).
The first broker to start creates it from its config; the others read it (a broker
whose config asks for another level logs it and follows the znode); the znode's
version is the FinalizedFeaturesEpoch. Changing a level in a cluster: rewrite the
znode, then restart the brokers (`logflume cluster restart --rolling`); they read
it at start.

What the level changes: what ApiVersions reports (clients choose transactions v2 from
it, as Kafka's do) and the `__transaction_state` value version written (1 from level
1). The broker serves both protocols whatever the level, per request version, as
Kafka does: EndTxn v5 and Produce v12 get v2 semantics, older versions v1's.
"""

from __future__ import annotations

import dataclasses
import logging

import orjson
from kazoo.exceptions import NodeExistsError

log = logging.getLogger(__name__)

FEATURE_ZNODE = "/feature"
TRANSACTION_VERSION = "transaction.version"


@dataclasses.dataclass(frozen=True)
class Feature:
    name: str
    min_level: int
    max_level: int
    config_key: str | None = None  # the broker key pinning the finalized level


GROUP_VERSION = "group.version"
SHARE_VERSION = "share.version"

SUPPORTED: tuple[Feature, ...] = (
    # 1: the consumer group protocol (KIP-848, broker/groups/consumer/) is served
    Feature(GROUP_VERSION, 0, 1),
    # 1: share groups (KIP-932, broker/share/) are served
    Feature(SHARE_VERSION, 0, 1),
    Feature(TRANSACTION_VERSION, 0, 2, "transaction.version"),
)


class FinalizedFeatures:
    """The finalized level of every supported feature (0: off) and their epoch (0
    from the config, the znode's version in a cluster). Owned by BrokerCore;
    event-loop only."""

    def __init__(self, levels: dict[str, int], epoch: int = -1):
        self.levels = dict(levels)
        self.epoch = epoch

    @classmethod
    def from_config(cls, config) -> FinalizedFeatures:
        """The levels the broker config pins (checked against SUPPORTED by it), the
        highest supported for a feature without a key."""
        levels = {
            f.name: f.max_level if f.config_key is None else config[f.config_key] for f in SUPPORTED
        }
        return cls(levels, epoch=0)

    def level(self, name: str) -> int:
        return self.levels.get(name, 0)

    @property
    def transaction_version(self) -> int:
        return self.level(TRANSACTION_VERSION)

    def api_versions_fields(self, version: int) -> dict:
        """The tagged fields of an ApiVersions response at `version` (v3+). Before v4
        a supported range starting at 0 is left out (older clients fail to read it,
        KAFKA-17492); a feature finalized at 0 is never listed."""
        if version < 3:
            return {}
        finalized = [
            {"name": name, "max_version_level": level, "min_version_level": level}
            for name, level in sorted(self.levels.items())
            if level != 0
        ]
        return {
            "supported_features": [
                {"name": f.name, "min_version": f.min_level, "max_version": f.max_level}
                for f in sorted(SUPPORTED, key=lambda f: f.name)
                if version >= 4 or f.min_level != 0
            ],
            "finalized_features_epoch": self.epoch,
            "finalized_features": finalized,
        }

    # -- ZooKeeper's /feature ---------------------------------------------------------

    def znode(self) -> bytes:
        features = {
            name: {"max_version_level": level}
            for name, level in sorted(self.levels.items())
            if level != 0
        }
        return orjson.dumps({"version": 2, "status": 1, "features": features})

    def adopt_znode(self, data: bytes, version: int) -> None:
        """Take the levels of an existing `/feature` znode (its version the epoch);
        a feature it does not list is finalized at 0, one this broker does not
        support is ignored."""
        try:
            listed = orjson.loads(data).get("features") or {}
            found = {name: int(v["max_version_level"]) for name, v in listed.items()}
        except (orjson.JSONDecodeError, AttributeError, KeyError, TypeError, ValueError) as e:
            log.error("%s is unreadable (%s): keeping the configured levels", FEATURE_ZNODE, e)
            return
        for feature in SUPPORTED:
            level = found.get(feature.name, 0)
            if not feature.min_level <= level <= feature.max_level:
                log.error("%s: %s=%d is not supported here", FEATURE_ZNODE, feature.name, level)
                continue
            mine = self.levels.get(feature.name, 0)
            if level != mine:
                asks = f"{feature.config_key} asks" if feature.config_key else "default is"
                log.warning(
                    "%s is finalized at %d in %s; this broker's %s %d: following %s",
                    feature.name,
                    level,
                    FEATURE_ZNODE,
                    asks,
                    mine,
                    FEATURE_ZNODE,
                )
            self.levels[feature.name] = level
        self.epoch = version


async def agree_in_zookeeper(zk, features: FinalizedFeatures) -> None:
    """Create `/feature` from `features`, or take the levels it holds (a cluster)."""
    try:
        await zk.call("create", FEATURE_ZNODE, features.znode())
    except NodeExistsError:
        pass
    data, stat = await zk.call("get", FEATURE_ZNODE)
    features.adopt_znode(data, stat.version)

"""Dynamic broker configs (KIP-226): broker settings changed without a restart.

`DynamicBrokerConfig` (built by broker/server/core.py) holds two layers of dynamic
configs over the static ones, Kafka's precedence: this broker's own (the broker
resource "<id>"), then the cluster-wide default (the resource ""), then
server.properties/--set, then the defaults. Which keys may change, and Kafka's
checks and messages, are in broker/dynamic_keys.py.

Where they live, as in Kafka:
- a cluster: the znodes `/config/brokers/<id>` and `/config/brokers/<default>`,
  `{"version":1,"config":{key: value}}`, each write followed by a change notification
  `/config/changes/config_change_<seq>` = `{"version":2,"entity_path":"brokers/<id>"}`.
  The notifications are followed by the client quota store's watcher
  (broker.quotas.store.ZkQuotaStore, `entity_handlers`), which hands `brokers/...`
  ones to `ZkBrokerConfigStore`;
- a single node: `<data dir>/meta/broker-configs.json`, written atomically.
Password-type values (broker.dynamic_keys.PASSWORDS, listener-prefixed too) are
stored encrypted by Kafka's PasswordEncoder (broker.password_encoder) with
`password.encoder.secret`: refused without it, and only per broker.

A layer read from the store is checked key by key (what Kafka cannot take is dropped
with an error in the log), its passwords decoded, then merged with the static values
into a new BrokerConfig (checked as a start would check it) that the shared config
`adopt`s; then every reconfigurable is told: the log defaults of every partition
without its own override (ReplicaManager.defaults_changed), a TLS listener's context
(broker/server/server.py: new connections get the new certificate), the replication
throttles' rates, `leader.replication.throttled.rate` and
`follower.replication.throttled.rate` (broker/quotas/replication.py). Keys Kafka
accepts that mean nothing here (num.io.threads ...) are stored and reported with a
log line saying so.

Event-loop only.
"""

from __future__ import annotations

import logging
import urllib.parse
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import TYPE_CHECKING, Protocol

import orjson

from broker.config import KEYS, BrokerConfig, ConfigError
from broker.dynamic_keys import (
    APPLIED,
    BROKER_QUOTAS,
    DynamicConfigError,
    base_name,
    check_change,
    is_password,
    overlay,
)
from broker.password_encoder import PasswordEncoder, PasswordEncoderError
from common.fsutil import atomic_write

if TYPE_CHECKING:
    from broker.cluster.zk import ZkSession
    from broker.quotas.store import ZkQuotaStore

log = logging.getLogger(__name__)

DEFAULT_ENTITY = "<default>"  # Kafka's ZooKeeperInternals.DEFAULT_STRING
Props = dict[str, str]
OnChange = Callable[[str, Props], None]


class Reconfigurable(Protocol):
    """A part of the broker that follows dynamic configs: `validate` a merged config
    before it is accepted (raise ConfigError or DynamicConfigError), `reconfigure`
    once the shared config holds it; `reload` (before this broker's own configs are
    stored) re-reads files an alter names again unchanged (ConfigError if they no
    longer do)."""

    def validate(self, new: BrokerConfig) -> None: ...

    def reconfigure(self) -> None: ...

    def reload(self, new: BrokerConfig) -> None: ...


class LocalBrokerConfigStore:
    """A single node's dynamic broker configs, in one file. The entity configs of
    another type (client-metrics subscriptions, broker.telemetry.store) are kept the
    same way in a file of their own: a subclass names it and its key."""

    FILE = "broker-configs.json"
    ENTITY_TYPE = "brokers"

    def __init__(self, data_dir: Path):
        self.path = Path(data_dir) / "meta" / self.FILE
        self.on_change: OnChange | None = None

    def _all(self) -> dict[str, Props]:
        if not self.path.exists():
            return {}
        try:
            brokers = orjson.loads(self.path.read_bytes())[self.ENTITY_TYPE]
            return {str(k): {str(n): str(v) for n, v in c.items()} for k, c in brokers.items()}
        except (orjson.JSONDecodeError, KeyError, TypeError, AttributeError) as e:
            log.error(
                "%s configs %s are unreadable (%s); none applied", self.ENTITY_TYPE, self.path, e
            )
            return {}

    async def read(self, name: str) -> Props:
        return self._all().get(name, {})

    async def write(self, name: str, props: Props) -> None:
        brokers = self._all()
        if props:
            brokers[name] = dict(props)
        else:
            brokers.pop(name, None)
        self.path.parent.mkdir(parents=True, exist_ok=True)
        atomic_write(self.path, orjson.dumps({"version": 1, self.ENTITY_TYPE: brokers}))
        if self.on_change is not None:
            self.on_change(name, props)


class ZkBrokerConfigStore:
    """A cluster's dynamic broker configs in ZooKeeper; `notices` is the client quota
    store, whose change-notification watcher tells this store of `brokers/<name>`.
    Another entity type's configs (`/config/<ENTITY_TYPE>/<name>`) are kept the same
    way by a subclass, which may also encode names into znode names (`_child`)."""

    ENTITY_TYPE = "brokers"

    def __init__(self, zk: ZkSession, notices: ZkQuotaStore):
        self.zk = zk
        self.notices = notices
        self.on_change: OnChange | None = None
        self.root = f"/config/{self.ENTITY_TYPE}"
        notices.entity_handlers[self.ENTITY_TYPE] = self._notified
        notices.entity_loaders.append(self._load_all)

    def _child(self, name: str) -> str:
        """The znode name of the entity `name`."""
        return name

    def _name(self, child: str) -> str:
        """The entity name of the znode `child` (`_child` undone)."""
        return child

    async def read(self, name: str) -> Props:
        from kazoo.exceptions import NoNodeError

        try:
            data, _ = await self.zk.call("get", f"{self.root}/{self._child(name)}")
            config = orjson.loads(data).get("config", {}) if data else {}
        except NoNodeError:
            return {}
        except (orjson.JSONDecodeError, AttributeError):
            log.error(
                "%s configs of %s in ZooKeeper are unreadable; ignored", self.ENTITY_TYPE, name
            )
            return {}
        return {str(k): str(v) for k, v in config.items()}

    async def write(self, name: str, props: Props) -> None:
        """The entity's whole config (Kafka's changeBrokerConfig), then a notification;
        this broker applies it at once, the others when notified."""
        from kazoo.exceptions import NodeExistsError

        path = f"{self.root}/{self._child(name)}"
        payload = orjson.dumps({"version": 1, "config": dict(sorted(props.items()))})
        try:
            await self.zk.call("create", path, payload, makepath=True)
        except NodeExistsError:
            await self.zk.call("set", path, payload)
        await self.notices.notify(f"{self.ENTITY_TYPE}/{self._child(name)}")
        if self.on_change is not None:
            self.on_change(name, props)

    async def _notified(self, child: str) -> None:
        name = self._name(child)
        props = await self.read(name)
        if self.on_change is not None:
            self.on_change(name, props)

    async def _load_all(self) -> None:
        from kazoo.exceptions import NoNodeError

        try:
            children = await self.zk.call("get_children", self.root)
        except NoNodeError:
            return
        for child in children:
            await self._notified(child)


Store = LocalBrokerConfigStore | ZkBrokerConfigStore


class LocalNamedEntityStore(LocalBrokerConfigStore):
    """A single node's configs of named entities other than brokers (client-metrics
    subscriptions, groups), in a file of their own named by the subclass with the
    entity type; `load` tells `on_change` of every entity stored."""

    async def load(self) -> None:
        if self.on_change is not None:
            for name, props in self._all().items():
                self.on_change(name, props)


class ZkNamedEntityStore(ZkBrokerConfigStore):
    """A cluster's configs of named entities other than brokers in ZooKeeper, under
    `/config/<ENTITY_TYPE>/<URL-encoded name>` (names may hold any character)."""

    def _child(self, name: str) -> str:
        return urllib.parse.quote_plus(name, safe="")

    def _name(self, child: str) -> str:
        return urllib.parse.unquote_plus(child)

    async def load(self) -> None:
        """Nothing to do: the cluster's start reads every entity's configs (the client
        quota store's `entity_loaders`) and tells `on_change`."""


class DynamicBrokerConfig:
    """The dynamic layers of one broker's config and what follows them."""

    def __init__(self, config: BrokerConfig, store: Store, reconfigurables: list[Reconfigurable]):
        self.config = config
        self.store = store
        self.reconfigurables = reconfigurables
        self.own = str(config.broker_id)
        self.encoder = _encoder(config, "password.encoder.secret")
        store.on_change = self._stored

    async def start(self) -> None:
        """Read both layers and apply them (before the listeners are bound)."""
        self._stored(DEFAULT_ENTITY, await self.store.read(DEFAULT_ENTITY))
        stored = await self.store.read(self.own)
        old = _encoder(self.config, "password.encoder.old.secret")
        if old is not None and self.encoder is not None and any(map(is_password, stored)):
            stored = await self._reencode(stored, old)
        self._stored(self.own, stored)

    async def _reencode(self, stored: Props, old: PasswordEncoder) -> Props:
        """Kafka's maybeReEncodePasswords: passwords the old secret encrypted, encrypted
        again with the current one (and stored so)."""
        assert self.encoder is not None
        out = dict(stored)
        for name, value in stored.items():
            if is_password(name):
                try:
                    out[name] = self.encoder.encode(old.decode(value))
                except PasswordEncoderError:
                    continue  # already under the new secret
        await self.store.write(self.own, out)
        return out

    def layer(self, resource_name: str) -> Props:
        """The dynamic configs of the broker resource `resource_name` ("" the
        default), passwords in clear."""
        return dict(
            self.config.dynamic_default if resource_name == "" else self.config.dynamic_broker
        )

    # -- changes from the store ---------------------------------------------------------

    def _stored(self, entity: str, persisted: Props) -> None:
        if entity not in (DEFAULT_ENTITY, self.own):
            return
        props = self._from_persistent(persisted, entity)
        per_broker = props if entity == self.own else self.config.dynamic_broker
        default = props if entity == DEFAULT_ENTITY else self.config.dynamic_default
        try:
            merged = self.merged(per_broker, default)
            for r in self.reconfigurables:
                r.validate(merged)
        except (ConfigError, DynamicConfigError) as e:
            log.error("dynamic configs of broker %s could not be applied: %s", entity, e)
            return
        before = (dict(self.config.dynamic_broker), dict(self.config.dynamic_default))
        self.config.adopt(merged, per_broker, default)
        if before == (self.config.dynamic_broker, self.config.dynamic_default):
            return
        for r in self.reconfigurables:
            try:
                r.reconfigure()
            except Exception:
                log.exception("applying dynamic broker configs failed")
        shown = {k: "[hidden]" if is_password(k) else v for k, v in sorted(props.items())}
        what = "cluster-wide default" if entity == DEFAULT_ENTITY else f"broker {entity}"
        log.info("dynamic configs of %s now: %s", what, shown or "none")
        idle = sorted(k for k in props if base_name(k) not in APPLIED)
        if idle:
            log.info("dynamic configs stored that have no effect on this broker: %s", idle)

    def _from_persistent(self, persisted: Props, entity: str) -> Props:
        """Kafka's fromPersistentProps: keys it cannot take dropped with an error,
        passwords decoded (one that does not decode is dropped)."""
        per_broker = entity != DEFAULT_ENTITY
        out: Props = {}
        for name, value in persisted.items():
            try:
                check_change({name: value}, per_broker)
            except DynamicConfigError as e:
                log.error("dynamic config of broker %s ignored: %s", entity, e)
                continue
            if is_password(name):
                if self.encoder is None:
                    log.error(
                        "dynamic password config %s ignored: no password.encoder.secret", name
                    )
                    continue
                try:
                    value = self.encoder.decode(value)
                except PasswordEncoderError as e:
                    log.error(
                        "dynamic password config %s could not be decoded, ignored: %s", name, e
                    )
                    continue
            out[name] = value
        return out

    def merged(self, per_broker: Mapping[str, str], default: Mapping[str, str]) -> BrokerConfig:
        """The static values with the dynamic layers over them, as a new config
        checked as at start (ConfigError names the key). Broker quotas are no key of
        BrokerConfig: they stay in the layers only."""
        props = dict(self.config.static_values)
        overlay(props, {k: v for k, v in default.items() if k not in BROKER_QUOTAS})
        overlay(props, {k: v for k, v in per_broker.items() if k not in BROKER_QUOTAS})
        return BrokerConfig(props)

    # -- changes from AlterConfigs ------------------------------------------------------

    async def alter(self, resource_name: str, props: Props, validate_only: bool) -> None:
        """Make `props` the whole dynamic config of the broker resource
        `resource_name` (this broker's id, or "" for the default), after Kafka's
        checks: DynamicConfigError (INVALID_CONFIG) says why not."""
        per_broker = resource_name != ""
        check_change(props, per_broker)
        if per_broker:
            merged_args = (props, self.config.dynamic_default)
        else:
            merged_args = (self.config.dynamic_broker, props)
        try:
            merged = self.merged(*merged_args)
            for r in self.reconfigurables:
                r.validate(merged)
        except ConfigError as e:
            raise DynamicConfigError(f"Invalid dynamic configuration: {e}") from None
        if validate_only:
            return
        persisted = self._to_persistent(props, per_broker)
        if per_broker:
            try:
                for r in self.reconfigurables:
                    r.reload(merged)
            except ConfigError as e:
                raise DynamicConfigError(f"Invalid dynamic configuration: {e}") from None
        await self.store.write(self.own if per_broker else DEFAULT_ENTITY, persisted)

    def _to_persistent(self, props: Props, per_broker: bool) -> Props:
        out = dict(props)
        for name, value in props.items():
            if not is_password(name):
                continue
            if not per_broker:
                raise DynamicConfigError("Password config can be defined only at broker level")
            if self.encoder is None:
                raise DynamicConfigError("Password encoder secret not configured")
            out[name] = self.encoder.encode(value)
        return out


def _encoder(config: BrokerConfig, secret_key: str) -> PasswordEncoder | None:
    """The encoder of `secret_key`'s secret (its settings checked by BrokerConfig)."""
    secret = config[secret_key]
    if not secret:
        return None
    return PasswordEncoder(
        str(secret),
        config["password.encoder.keyfactory.algorithm"],
        config["password.encoder.cipher.algorithm"],
        config["password.encoder.key.length"],
        config["password.encoder.iterations"],
    )


def key_type(name: str) -> str:
    """The type a dynamic key is described with (its base key's, for a listener
    override; a broker quota is a long)."""
    key = KEYS.get(base_name(name))
    if key is not None:
        return key.type
    if is_password(name):
        return "password"
    return "long" if base_name(name) in BROKER_QUOTAS else "string"

"""Dynamic group configs (KIP-848, KIP-932): Kafka's config resource type GROUP (32),
one per group id, with Kafka 4.1's keys (its GroupConfig):

    consumer.session.timeout.ms     int, >= 1, within group.consumer.{min,max}.session.timeout.ms
    consumer.heartbeat.interval.ms  int, >= 1, within group.consumer.{min,max}.heartbeat.interval.ms
    share.session.timeout.ms        int, >= 1, within group.share.{min,max}.session.timeout.ms
    share.heartbeat.interval.ms     int, >= 1, within group.share.{min,max}.heartbeat.interval.ms
    share.record.lock.duration.ms   int, >= 1000, within group.share.{min,max}.record.lock.duration.ms
    share.auto.offset.reset         earliest, latest (the default) or by_duration:<ISO-8601
                                    duration>, where a new share-partition starts
    share.isolation.level           read_uncommitted (the only level share groups are served
                                    with here: read_committed is refused)

A session timeout must also be greater than the heartbeat interval of the same
protocol. A key the group does not set takes the broker's `group.<key>` (none for the
last two: their defaults). The checks, their order and their messages are Kafka's
(GroupConfig.validate, ConfigDef's parse): every error is INVALID_CONFIG, but for the
empty group name (INVALID_REQUEST).

`GroupConfigs` is the service: the overrides of every group (kept by
broker.groups.group_config_store), the effective `GroupConfig` of a group that the
consumer-protocol and share-group coordinators read, and the checks of an alter.
Event-loop only.
"""

from __future__ import annotations

import dataclasses
import logging
import re
from collections.abc import Iterable, Mapping
from typing import TYPE_CHECKING

from broker.config import KEYS as BROKER_KEYS
from broker.config import BrokerConfig
from broker.config_ops import APPEND, DELETE, SET, SUBTRACT
from broker.protocol import ErrorCode

if TYPE_CHECKING:
    from broker.groups.group_config_store import GroupConfigStore

log = logging.getLogger(__name__)

CONSUMER_SESSION_TIMEOUT_MS = "consumer.session.timeout.ms"
CONSUMER_HEARTBEAT_INTERVAL_MS = "consumer.heartbeat.interval.ms"
SHARE_SESSION_TIMEOUT_MS = "share.session.timeout.ms"
SHARE_HEARTBEAT_INTERVAL_MS = "share.heartbeat.interval.ms"
SHARE_RECORD_LOCK_DURATION_MS = "share.record.lock.duration.ms"
SHARE_AUTO_OFFSET_RESET = "share.auto.offset.reset"
SHARE_ISOLATION_LEVEL = "share.isolation.level"

EARLIEST, LATEST, BY_DURATION = "earliest", "latest", "by_duration"
READ_UNCOMMITTED, READ_COMMITTED = "read_uncommitted", "read_committed"
EARLIEST_TIMESTAMP, LATEST_TIMESTAMP = -2, -1  # ListOffsets' special timestamps
BROKER_PREFIX = "group."  # a key's broker-wide default: group.<key>
# Kafka's IncrementalAlterConfigs operations
_OP_NAMES = {APPEND: "APPEND", SUBTRACT: "SUBTRACT"}

Props = dict[str, str]


@dataclasses.dataclass(frozen=True, slots=True)
class Key:
    name: str
    type: str  # "int" or "string"
    default: int | str  # without a broker key
    at_least: int | None
    doc: str


KEYS: dict[str, Key] = {
    k.name: k
    for k in (
        Key(
            CONSUMER_SESSION_TIMEOUT_MS,
            "int",
            45000,
            1,
            "How long a member of this consumer group may go without a heartbeat "
            "before it is removed.",
        ),
        Key(
            CONSUMER_HEARTBEAT_INTERVAL_MS,
            "int",
            5000,
            1,
            "The heartbeat interval given to the members of this consumer group.",
        ),
        Key(
            SHARE_SESSION_TIMEOUT_MS,
            "int",
            45000,
            1,
            "How long a member of this share group may go without a heartbeat "
            "before it is removed.",
        ),
        Key(
            SHARE_HEARTBEAT_INTERVAL_MS,
            "int",
            5000,
            1,
            "The heartbeat interval given to the members of this share group.",
        ),
        Key(
            SHARE_RECORD_LOCK_DURATION_MS,
            "int",
            30000,
            1000,
            "How long a member of this share group holds the records it acquired.",
        ),
        Key(
            SHARE_AUTO_OFFSET_RESET,
            "string",
            LATEST,
            None,
            "Where a share-partition of this group starts when it is first used: "
            "earliest, latest or by_duration:<ISO-8601 duration> (the first record "
            "at most that old).",
        ),
        Key(
            SHARE_ISOLATION_LEVEL,
            "string",
            READ_UNCOMMITTED,
            None,
            "Which records the members of this share group read: read_uncommitted.",
        ),
    )
}

# the keys held to the broker's bounds, in Kafka's order of checks; the bounds of
# <protocol>.<rest> are group.<protocol>.min.<rest> and group.<protocol>.max.<rest>
_BOUNDED = (
    CONSUMER_HEARTBEAT_INTERVAL_MS,
    CONSUMER_SESSION_TIMEOUT_MS,
    SHARE_HEARTBEAT_INTERVAL_MS,
    SHARE_SESSION_TIMEOUT_MS,
    SHARE_RECORD_LOCK_DURATION_MS,
)


def _bounds(name: str) -> tuple[str, str]:
    protocol, _, rest = name.partition(".")
    return f"group.{protocol}.min.{rest}", f"group.{protocol}.max.{rest}"


class GroupConfigError(ValueError):
    """A group config Kafka would refuse; `code` is the error it answers."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True, slots=True)
class GroupConfig:
    """A group's effective settings (its overrides over the broker's)."""

    consumer_session_timeout_ms: int = 45000
    consumer_heartbeat_interval_ms: int = 5000
    share_session_timeout_ms: int = 45000
    share_heartbeat_interval_ms: int = 5000
    share_record_lock_duration_ms: int = 30000
    share_auto_offset_reset: str = LATEST

    def reset_timestamp(self, now_ms: int) -> int:
        """Where a new share-partition starts, as a ListOffsets timestamp:
        EARLIEST_TIMESTAMP the log start, LATEST_TIMESTAMP the high watermark, else the
        first record at or after it."""
        return reset_timestamp(self.share_auto_offset_reset, now_ms)


_DURATION = re.compile(
    r"([-+]?)P(?:([-+]?[0-9]+)D)?"
    r"(T(?:([-+]?[0-9]+)H)?(?:([-+]?[0-9]+)M)?(?:([-+]?[0-9]+)(?:[.,]([0-9]{0,9}))?S)?)?",
    re.IGNORECASE,
)


def parse_duration_ms(text: str) -> int:
    """An ISO-8601 duration as Java's Duration.parse reads it (PnDTnHnMn.nS), in
    milliseconds; ValueError if it is not one."""
    m = _DURATION.fullmatch(text)
    if m is None or m.group(3) == "T" or not any(m.group(i) for i in (2, 4, 5, 6)):
        raise ValueError(text)
    days, hours, minutes, seconds = (int(m.group(i) or 0) for i in (2, 4, 5, 6))
    fraction = (m.group(7) or "").ljust(9, "0")
    nanos = int(fraction) * (-1 if m.group(6) and m.group(6).startswith("-") else 1)
    total_ns = (((days * 24 + hours) * 60 + minutes) * 60 + seconds) * 10**9 + nanos
    if m.group(1) == "-":
        total_ns = -total_ns
    return total_ns // 10**6


def parse_reset(value: str) -> tuple[str, int]:
    """(strategy, duration in ms: 0 but for by_duration) of a share.auto.offset.reset
    value; ValueError if Kafka would refuse it."""
    if value in (EARLIEST, LATEST):
        return value, 0
    prefix = BY_DURATION + ":"
    if value.startswith(prefix):
        duration = parse_duration_ms(value[len(prefix) :])
        if duration < 0:
            raise ValueError(value)
        return BY_DURATION, duration
    raise ValueError(value)


def reset_timestamp(value: str, now_ms: int) -> int:
    """`GroupConfig.reset_timestamp` of a share.auto.offset.reset value."""
    strategy, duration = parse_reset(value)
    if strategy == EARLIEST:
        return EARLIEST_TIMESTAMP
    if strategy == LATEST:
        return LATEST_TIMESTAMP
    return now_ms - duration


def _invalid(name: str, value: str, why: str) -> GroupConfigError:
    return GroupConfigError(
        ErrorCode.INVALID_CONFIG, f"Invalid value {value} for configuration {name}: {why}"
    )


def _parse_value(key: Key, value: str) -> int | str:
    if key.type == "int":
        try:
            number = int(value.strip())
        except ValueError:
            raise _invalid(key.name, value, "Not a number of type INT") from None
        if not -(2**31) <= number < 2**31:
            raise _invalid(key.name, value, "Not a number of type INT")
        if key.at_least is not None and number < key.at_least:
            raise _invalid(key.name, value, f"Value must be at least {key.at_least}")
        return number
    value = value.strip()
    if key.name == SHARE_AUTO_OFFSET_RESET:
        try:
            parse_reset(value)
        except ValueError:
            raise _invalid(
                key.name,
                value,
                f"Invalid value `{value}` for configuration {key.name}. The value must be "
                "either 'earliest', 'latest' or of the format 'by_duration:<PnDTnHnMn.nS.>'.",
            ) from None
    elif key.name == SHARE_ISOLATION_LEVEL:
        if value not in (READ_COMMITTED, READ_UNCOMMITTED):
            raise _invalid(
                key.name, value, f"String must be one of: {READ_COMMITTED}, {READ_UNCOMMITTED}"
            )
        if value == READ_COMMITTED:
            raise _invalid(
                key.name, value, "share groups are served read_uncommitted only by this broker"
            )
    return value


def broker_defaults(config: BrokerConfig) -> dict[str, int | str]:
    """Every key's value for a group without overrides: the broker's group.<key>,
    else the key's default."""
    out: dict[str, int | str] = {}
    for name, key in KEYS.items():
        broker_key = BROKER_PREFIX + name
        out[name] = config.get(broker_key) if broker_key in BROKER_KEYS else key.default
    return out


def values_of(props: Mapping[str, str], config: BrokerConfig) -> dict[str, int | str]:
    """Every key's value for a group with the overrides `props` (already checked)."""
    values = broker_defaults(config)
    for name, value in props.items():
        values[name] = _parse_value(KEYS[name], value)
    return values


def check(props: Mapping[str, str], config: BrokerConfig) -> dict[str, int | str]:
    """The values of a group whose overrides would be `props`, checked as Kafka
    checks them (GroupConfigError). Kafka holds every value to the bounds; here only
    the group's own are, as the broker's defaults are not held to them at start."""
    for name in props:
        if name not in KEYS:
            raise GroupConfigError(ErrorCode.INVALID_CONFIG, f"Unknown group config name: {name}")
    values = broker_defaults(config)
    for name, key in KEYS.items():
        if name in props:
            values[name] = _parse_value(key, props[name])
    for name in _BOUNDED:
        if name not in props:
            continue
        low, high = _bounds(name)
        value = int(values[name])
        if value < config.get(low):
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG, f"{name} must be greater than or equal to {low}"
            )
        if value > config.get(high):
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG, f"{name} must be less than or equal to {high}"
            )
    for session, heartbeat in (
        (CONSUMER_SESSION_TIMEOUT_MS, CONSUMER_HEARTBEAT_INTERVAL_MS),
        (SHARE_SESSION_TIMEOUT_MS, SHARE_HEARTBEAT_INTERVAL_MS),
    ):
        if int(values[session]) <= int(values[heartbeat]):
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG, f"{session} must be greater than {heartbeat}"
            )
    return values


def apply_changes(current: Props, changes: Iterable[Mapping], incremental: bool) -> Props:
    """The overrides after an (Incremental)AlterConfigs resource's `changes`: SET and
    DELETE a key (APPEND and SUBTRACT are refused: no group config is a list); the
    legacy AlterConfigs replaces them all."""
    out: Props = dict(current) if incremental else {}
    for change in changes:
        name, value = change["name"], change["value"]
        op = change["config_operation"] if incremental else SET
        if op == DELETE:
            out.pop(name, None)
            continue
        if op in _OP_NAMES:
            raise GroupConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Can't {_OP_NAMES[op]} to key {name} because its type is not LIST.",
            )
        if op != SET:
            raise GroupConfigError(
                ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {name}"
            )
        if value is None:
            raise GroupConfigError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for : {name}"
            )
        out[name] = value
    return out


class GroupConfigs:
    """Every group's overrides, as stored; the effective config of a group."""

    def __init__(self, config: BrokerConfig, store: GroupConfigStore):
        self.config = config
        self.store = store
        self.overrides: dict[str, Props] = {}  # group id -> its overrides, as stored
        self._effective: dict[str, GroupConfig] = {}  # of the groups with overrides
        self._default = self._build({})  # of every other group
        store.on_change = self._changed

    async def start(self) -> None:
        await self.store.load()

    def _changed(self, group_id: str, props: Props) -> None:
        self._effective.pop(group_id, None)
        if not props:
            self.overrides.pop(group_id, None)
            return
        try:
            check(props, self.config)
        except GroupConfigError as e:
            log.error("configs of group %r are invalid (%s); ignored", group_id, e)
            return
        self.overrides[group_id] = dict(props)

    def of(self, group_id: str) -> GroupConfig:
        """The effective config of `group_id`."""
        overrides = self.overrides.get(group_id)
        if overrides is None:
            return self._default
        found = self._effective.get(group_id)
        if found is None:
            found = self._effective[group_id] = self._build(overrides)
        return found

    def _build(self, overrides: Props) -> GroupConfig:
        values = values_of(overrides, self.config)
        return GroupConfig(
            consumer_session_timeout_ms=int(values[CONSUMER_SESSION_TIMEOUT_MS]),
            consumer_heartbeat_interval_ms=int(values[CONSUMER_HEARTBEAT_INTERVAL_MS]),
            share_session_timeout_ms=int(values[SHARE_SESSION_TIMEOUT_MS]),
            share_heartbeat_interval_ms=int(values[SHARE_HEARTBEAT_INTERVAL_MS]),
            share_record_lock_duration_ms=int(values[SHARE_RECORD_LOCK_DURATION_MS]),
            share_auto_offset_reset=str(values[SHARE_AUTO_OFFSET_RESET]),
        )

    def describe(self, group_id: str) -> tuple[Props, dict[str, str]]:
        """(the group's overrides, every key's effective value as text)."""
        if not group_id:
            raise GroupConfigError(ErrorCode.INVALID_REQUEST, "Group name must not be empty")
        overrides = self.overrides.get(group_id, {})
        values = values_of(overrides, self.config)
        return dict(overrides), {n: str(v) for n, v in values.items()}

    async def alter(
        self, group_id: str, changes: list[Mapping], incremental: bool, validate_only: bool
    ) -> None:
        """Apply an (Incremental)AlterConfigs resource of type GROUP."""
        if not group_id:
            raise GroupConfigError(
                ErrorCode.INVALID_REQUEST, "Default group resources are not allowed."
            )
        props = apply_changes(self.overrides.get(group_id, {}), changes, incremental)
        check(props, self.config)
        if not validate_only:
            await self.store.write(group_id, props)

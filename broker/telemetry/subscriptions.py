"""Client-metrics subscriptions (KIP-714): Kafka's config resource type 16
(CLIENT_METRICS), one per subscription name, with three keys:

    metrics      comma-separated metric name prefixes the matching clients push
                 ("*": all of them; empty: none)
    interval.ms  how often they push, 100 to 3600000 (default 300000)
    match        comma-separated `selector=regex` pairs, all of which a client must
                 match (a full match, as Java's Matcher.matches); none: every client.
                 Selectors: client_instance_id, client_id, client_software_name,
                 client_software_version, client_source_address, client_source_port

The checks and their errors are Kafka's (ClientMetricsConfigs.validate): an empty
name, an unknown key or an interval out of range is INVALID_REQUEST; a value that is
not a number or a bad match pattern is INVALID_CONFIG.

A client gets the union of the metrics of every subscription it matches and the
smallest of their intervals; its subscription id is a CRC32C of that set and
interval mixed with its instance id, so every broker computes the same id for the
same client and subscriptions. Pure functions; no I/O.
"""

from __future__ import annotations

import dataclasses
import re
import uuid
from collections.abc import Iterable, Mapping

import crc32c

from broker.config_ops import (
    APPEND,
    DELETE,
    SET,
    SUBTRACT,
    apply_list_op,
    list_op_refused,
    split_list,
)
from broker.protocol import ErrorCode

METRICS = "metrics"
INTERVAL_MS = "interval.ms"
MATCH = "match"
KEYS = (METRICS, INTERVAL_MS, MATCH)
LIST_KEYS = (METRICS, MATCH)
ALL_METRICS = "*"
DEFAULT_INTERVAL_MS = 5 * 60 * 1000
MIN_INTERVAL_MS = 100
MAX_INTERVAL_MS = 3_600_000
SELECTORS = (
    "client_instance_id",
    "client_id",
    "client_software_name",
    "client_software_version",
    "client_source_address",
    "client_source_port",
)
# Kafka's IncrementalAlterConfigs operations

Props = dict[str, str]


class ClientMetricsConfigError(ValueError):
    """A subscription Kafka would refuse; `code` is the error it answers."""

    def __init__(self, code: ErrorCode, message: str):
        super().__init__(message)
        self.code = code


@dataclasses.dataclass(frozen=True)
class Subscription:
    """One client-metrics resource, parsed."""

    name: str
    metrics: tuple[str, ...]
    interval_ms: int
    match: tuple[tuple[str, re.Pattern[str]], ...]

    def matches(self, client: Mapping[str, str | None]) -> bool:
        """Whether a client with these attributes (`SELECTORS` -> value or None)
        matches every pattern; an attribute the client has not is no match."""
        for selector, pattern in self.match:
            value = client.get(selector)
            if value is None or pattern.fullmatch(value) is None:
                return False
        return True


def parse_match(patterns: Iterable[str]) -> tuple[tuple[str, re.Pattern[str]], ...]:
    """`selector=regex` pairs; INVALID_CONFIG for anything else."""
    out: dict[str, re.Pattern[str]] = {}
    for item in patterns:
        parts = item.split("=")
        selector = parts[0].strip()
        if len(parts) != 2 or not parts[1] or selector not in SELECTORS:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {item}"
            )
        try:
            out[selector] = re.compile(parts[1].strip())
        except re.error:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_CONFIG, f"Illegal client matching pattern: {item}"
            ) from None
    return tuple(out.items())


def parse(name: str, props: Mapping[str, str]) -> Subscription:
    """The subscription `name` with configs `props`, checked as Kafka checks them."""
    if not name:
        raise ClientMetricsConfigError(
            ErrorCode.INVALID_REQUEST, "Subscription name can't be empty"
        )
    for key in props:
        if key not in KEYS:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, f"Unknown client metrics configuration: {key}"
            )
    interval = DEFAULT_INTERVAL_MS
    if INTERVAL_MS in props:
        raw = props[INTERVAL_MS].strip()
        try:
            interval = int(raw)
        except ValueError:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_CONFIG,
                f"Invalid value {props[INTERVAL_MS]} for configuration {INTERVAL_MS}: "
                "Not a number of type INT",
            ) from None
        if not MIN_INTERVAL_MS <= interval <= MAX_INTERVAL_MS:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST,
                f"Invalid value {interval} for {INTERVAL_MS}, interval must be between "
                f"{MIN_INTERVAL_MS} and {MAX_INTERVAL_MS} (1 hour)",
            )
    metrics = tuple(split_list(props.get(METRICS, "")))
    match = parse_match(split_list(props.get(MATCH, "")))
    return Subscription(name, metrics, interval, match)


def apply_changes(current: Props, changes: Iterable[Mapping], incremental: bool) -> Props:
    """The configs after an (Incremental)AlterConfigs resource's `changes` (dicts
    with name, value and, incremental, config_operation): SET and DELETE a key,
    APPEND to or SUBTRACT from a list key; the legacy AlterConfigs replaces them all.
    INVALID_REQUEST for an unknown operation or a null value to set, INVALID_CONFIG
    for APPEND/SUBTRACT on interval.ms."""
    out: Props = {} if not incremental else dict(current)
    for change in changes:
        key, value = change["name"], change["value"]
        op = change["config_operation"] if incremental else SET
        if op == DELETE:
            out.pop(key, None)
            continue
        if op not in (SET, APPEND, SUBTRACT):
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, f"Unknown config operation {op} for {key}"
            )
        if value is None:
            raise ClientMetricsConfigError(
                ErrorCode.INVALID_REQUEST, f"Null value not supported for : {key}"
            )
        if op == SET:
            out[key] = value
            continue
        if key not in LIST_KEYS:
            raise ClientMetricsConfigError(ErrorCode.INVALID_CONFIG, list_op_refused(op, key))
        out[key] = apply_list_op(op, out.get(key, ""), value)
    return out


@dataclasses.dataclass(frozen=True)
class Selection:
    """What one client instance is asked for: `metrics` empty means push nothing."""

    metrics: tuple[str, ...]
    interval_ms: int
    subscription_id: int


def select(
    subscriptions: Iterable[Subscription], client: Mapping[str, str | None], instance: uuid.UUID
) -> Selection:
    """The union of the metrics of the subscriptions `client` matches (just "*" if
    one asks for all), the smallest of their intervals (the default without any), and
    the subscription id of that set for `instance`."""
    metrics: set[str] = set()
    interval = DEFAULT_INTERVAL_MS
    for sub in subscriptions:
        if sub.matches(client):
            metrics.update(sub.metrics)
            interval = min(interval, sub.interval_ms)
    if ALL_METRICS in metrics:
        metrics = {ALL_METRICS}
    chosen = tuple(sorted(metrics))
    return Selection(chosen, interval, subscription_id(chosen, interval, instance))


def subscription_id(metrics: tuple[str, ...], interval_ms: int, instance: uuid.UUID) -> int:
    """A signed int32 that changes with the metric set, the interval and the client."""
    digest = crc32c.crc32c(("\n".join(metrics) + f"\n{interval_ms}").encode())
    folded = 0
    for shift in range(0, 128, 32):
        folded ^= (instance.int >> shift) & 0xFFFFFFFF
    value = digest ^ folded
    return value - (1 << 32) if value >= 1 << 31 else value

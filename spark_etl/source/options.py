"""Options and offset arithmetic of the `logflume` data source (pure: no I/O, no Spark).

Offsets follow Spark's Kafka source:
- an offset map is `{topic: {partition: offset}}`; in JSON (options, Spark's
  checkpoint) partitions are strings: `{"t":{"0":23,"1":-2}}`;
- in a `startingOffsets`/`endingOffsets` JSON, -2 means earliest and -1 latest;
- a range [start, end) covers offsets start..end-1 (end = the next offset to read).

A topic-partition is the tuple `(topic, partition)` throughout (`TP`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import re
from collections.abc import Iterable, Mapping

from common.kafka_properties import PropertiesError, translate

TP = tuple[str, int]
EARLIEST = -2
LATEST = -1


class DataLossError(RuntimeError):
    """Offsets the query needs are no longer (or not yet) in the topic."""


# What a read yields: the records (Spark's Kafka source schema), or only the offset
# ranges it would read (one row per range), for a job that reads them itself in the
# task that processes them (the offline job: records never cross into the JVM).
EMIT_MODES = ("records", "ranges")


def _choice(opts: Mapping[str, str], key: str, choices: tuple[str, ...]) -> str:
    value = opts.get(key, choices[0]).lower()
    if value not in choices:
        raise ValueError(f"logflume: option {key} must be one of {', '.join(choices)}")
    return value


@dataclasses.dataclass(frozen=True)
class SourceOptions:
    """The data source's options, validated. Immutable and picklable."""

    # librdkafka settings: bootstrap.servers plus every `kafka.*` option, Java client
    # names translated (common/kafka_properties.py); not in the repr: it holds passwords
    client: dict = dataclasses.field(repr=False)
    topics: tuple[str, ...]  # from `subscribe`, empty when `pattern` is used
    pattern: str | None  # `subscribePattern`
    starting: str | dict  # "earliest" | "latest" | {tp: offset}
    ending: str | dict
    max_offsets_per_trigger: int | None
    min_partitions: int | None
    max_records_per_partition: int | None
    fail_on_data_loss: bool
    poll_timeout_s: float
    topic_out: str | None  # writer: `topic`
    emit: str = "records"  # `emit`: EMIT_MODES

    @classmethod
    def parse(cls, options: Mapping[str, str], streaming: bool) -> SourceOptions:
        opts = {k.lower(): v for k, v in options.items() if k.lower() != "path"}
        client = {k[len("kafka.") :]: v for k, v in opts.items() if k.startswith("kafka.")}
        try:
            client = translate(client)
        except PropertiesError as e:
            raise ValueError(f"logflume: option kafka.{e}") from None
        if "bootstrap.servers" in opts:
            client.setdefault("bootstrap.servers", opts["bootstrap.servers"])
        if not client.get("bootstrap.servers"):
            raise ValueError(
                "logflume: option kafka.bootstrap.servers (or bootstrap.servers) is required"
            )
        topics = tuple(t.strip() for t in opts.get("subscribe", "").split(",") if t.strip())
        pattern = opts.get("subscribepattern")
        starting = parse_offsets_option(
            opts.get("startingoffsets", "latest" if streaming else "earliest"), "startingOffsets"
        )
        ending = parse_offsets_option(opts.get("endingoffsets", "latest"), "endingOffsets")
        if not streaming and starting == "latest":
            raise ValueError("logflume: startingOffsets=latest is not valid for batch queries")
        if ending == "earliest":
            raise ValueError("logflume: endingOffsets=earliest is not valid")
        return cls(
            client=client,
            topics=topics,
            pattern=pattern,
            starting=starting,
            ending=ending,
            max_offsets_per_trigger=_positive(opts, "maxoffsetspertrigger"),
            min_partitions=_positive(opts, "minpartitions"),
            max_records_per_partition=_positive(opts, "maxrecordsperpartition"),
            fail_on_data_loss=_bool(opts.get("failondataloss", "true"), "failOnDataLoss"),
            poll_timeout_s=int(opts.get("kafkaconsumer.polltimeoutms", "120000")) / 1000,
            topic_out=opts.get("topic"),
            emit=_choice(opts, "emit", EMIT_MODES),
        )

    def require_subscription(self) -> None:
        if bool(self.topics) == bool(self.pattern):
            raise ValueError("logflume: set exactly one of subscribe or subscribePattern")

    def selects(self, topic: str) -> bool:
        if self.pattern is not None:
            return re.fullmatch(self.pattern, topic) is not None
        return topic in self.topics


def _positive(opts: Mapping[str, str], key: str) -> int | None:
    if key not in opts:
        return None
    value = int(opts[key])
    if value <= 0:
        raise ValueError(f"logflume: option {key} must be > 0, got {value}")
    return value


def _bool(text: str, name: str) -> bool:
    if text.lower() not in ("true", "false"):
        raise ValueError(f"logflume: option {name} must be true or false, got {text!r}")
    return text.lower() == "true"


def parse_offsets_option(text: str, name: str) -> str | dict[TP, int]:
    """`earliest`, `latest`, or Spark's JSON `{"topic":{"0":23,"1":-2}}`."""
    text = text.strip()
    if text.lower() in ("earliest", "latest"):
        return text.lower()
    try:
        raw = json.loads(text)
        return {(t, int(p)): int(o) for t, parts in raw.items() for p, o in parts.items()}
    except (ValueError, AttributeError, TypeError) as e:
        raise ValueError(
            f'logflume: {name} must be earliest, latest or JSON like {{"t":{{"0":23}}}}: {e}'
        ) from e


def resolve(
    spec: str | dict[TP, int], tps: Iterable[TP], marks: Mapping[TP, tuple[int, int]], default: str
) -> dict[TP, int]:
    """Concrete offsets for `tps` given an offsets option and (low, high) watermarks.

    Partitions a JSON spec leaves out take `default` ("earliest" or "latest").
    """
    out = {}
    for tp in tps:
        low, high = marks[tp]
        want = (
            spec.get(tp, EARLIEST if default == "earliest" else LATEST)
            if isinstance(spec, dict)
            else (EARLIEST if spec == "earliest" else LATEST)
        )
        out[tp] = low if want == EARLIEST else high if want == LATEST else want
    return out


def check_start(tp: TP, start: int, low: int, high: int, fail_on_data_loss: bool, log) -> int:
    """The offset to start reading `tp` from: `start`, unless retention removed it.

    Raises DataLossError naming the partition and offsets when start < low (data
    deleted) or start > high (log truncated or topic recreated), unless
    `fail_on_data_loss` is false: then log a warning and continue from `low`.
    """
    if low <= start <= high:
        return start
    topic, partition = tp
    if start < low:
        msg = (
            f"logflume: topic {topic!r} partition {partition}: offsets {start}..{low - 1} "
            f"are no longer available (earliest available offset is {low}); they were "
            "probably deleted by retention"
        )
    else:
        msg = (
            f"logflume: topic {topic!r} partition {partition}: offset {start} is beyond the "
            f"latest offset {high} (log truncated or topic recreated)"
        )
    if fail_on_data_loss:
        raise DataLossError(msg + ". Set failOnDataLoss=false to skip ahead and continue.")
    log.warning("%s; failOnDataLoss=false: continuing from offset %d", msg, low)
    return low


def limit_offsets(
    start: Mapping[TP, int], target: Mapping[TP, int], max_rows: int
) -> dict[TP, int]:
    """End offsets that advance at most `max_rows` in total, spread over partitions in
    proportion to their backlog (so event time advances evenly everywhere).

    Every partition with a backlog gets its share (largest remainders first); a
    partition never passes its target (nor moves back from a target below its start:
    the caller handles that data loss).
    """
    backlog = {tp: max(0, target[tp] - start.get(tp, target[tp])) for tp in target}
    total = sum(backlog.values())
    if total <= max_rows:
        return dict(target)
    shares = {tp: max_rows * b / total for tp, b in backlog.items()}
    alloc = {tp: math.floor(s) for tp, s in shares.items()}
    left = max_rows - sum(alloc.values())
    for tp in sorted(shares, key=lambda tp: (alloc[tp] - shares[tp], tp))[:left]:
        alloc[tp] += 1
    return {
        tp: min(target[tp], start.get(tp, target[tp]) + min(alloc[tp], backlog[tp]))
        for tp in target
    }


def split_ranges(
    ranges: list[tuple[TP, int, int]], min_partitions: int | None, max_records: int | None
) -> list[tuple[TP, int, int]]:
    """Cut [start, end) ranges so there are at least `min_partitions` pieces overall
    (large ranges are cut more, like Spark's Kafka source) and none holds more than
    `max_records` offsets. Empty ranges are dropped."""
    ranges = [r for r in ranges if r[2] > r[1]]
    total = sum(end - start for _, start, end in ranges)
    out = []
    for tp, start, end in ranges:
        size = end - start
        parts = 1
        if min_partitions and min_partitions > len(ranges):
            parts = max(1, math.ceil(size * min_partitions / total))
        if max_records:
            parts = max(parts, math.ceil(size / max_records))
        step = size / parts
        cuts = [start + round(i * step) for i in range(parts)] + [end]
        out += [(tp, a, b) for a, b in zip(cuts, cuts[1:], strict=False) if b > a]
    return out


def offsets_to_json(offsets: Mapping[TP, int]) -> dict:
    out: dict[str, dict[str, int]] = {}
    for (topic, partition), offset in sorted(offsets.items()):
        out.setdefault(topic, {})[str(partition)] = offset
    return out


def offsets_from_json(doc: Mapping) -> dict[TP, int]:
    return {(t, int(p)): int(o) for t, parts in doc.items() for p, o in parts.items()}

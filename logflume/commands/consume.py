"""`logflume consume`: print a topic's records, like kafka-console-consumer.sh, with
kcat's consumer options (its flag letters, its format tokens, its JSON envelope).

Without --group the consumer assigns partitions itself (all, or -p) and reads from
explicit offsets, committing nothing. With --group it subscribes as a member of that
consumer group and commits as it goes; -o then sets where each partition the group
assigns starts (as kcat -G does), while --from-beginning applies only where the group
has committed nothing (auto.offset.reset, as kafka-console-consumer.sh does).

Where to start (-o), in each partition read: `beginning`, `end` (the default), an
absolute offset, `-N` (N offsets before the end) or `s@MS` (the first record stamped
at or after MS milliseconds since the epoch).

What to print: one value per line by default ("null" for a null value; KEY<TAB>VALUE
with --print-key); a kcat format string (-f), where a null key or value prints as
nothing; or kcat's JSON envelope (-J), one object per line, byte for byte as kcat
writes it, with "broker" the partition's leader as the metadata named it at start
(confluent-kafka does not say which broker a record came from).

When to stop: after -c records; with -e once every assigned partition reached its end
(the high watermark, or in read_committed the last stable offset), a partition being
read no further once it did; after --timeout-ms without a record; or at SIGINT or
SIGTERM. read_committed, the default as in librdkafka and kcat, skips aborted
transactions and stops before the records of an open one.
"""

from __future__ import annotations

import argparse
import os
import re
import signal
import struct
import sys
import time
from collections.abc import Callable
from typing import NamedTuple

from logflume import client_config

# librdkafka's RD_KAFKA_OFFSET_TAIL_BASE: a start offset of OFFSET_TAIL_BASE - N means
# "N offsets before the partition's end" (RD_KAFKA_OFFSET_TAIL(N), what kcat's -o -N
# passes); librdkafka resolves it against the end it lists, the last stable offset in
# read_committed. confluent-kafka passes offsets through but has no name for it.
OFFSET_TAIL_BASE = -2000

FORMAT_TOKENS = "tpoTkKsSRh"


class Start(NamedTuple):
    """Where each partition starts: `kind` is beginning, end, offset (`value` the
    absolute offset), tail (`value` offsets before the end) or timestamp (`value` ms)."""

    kind: str
    value: int = 0


def parse_start(text: str) -> Start:
    """A -o argument, as kcat reads it."""
    if text in ("beginning", "end"):
        return Start(text)
    number = text[2:] if text.startswith("s@") else text
    try:
        value = int(number)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"expected beginning, end, OFFSET, -COUNT or s@TIMESTAMP_MS, got {text!r}"
        ) from None
    if text.startswith("s@"):
        return Start("timestamp", value)
    return Start("offset", value) if value >= 0 else Start("tail", -value)


_ESCAPE = re.compile(rb"\\(x[0-9a-fA-F]{1,2}|.)", re.S)
_ESCAPED = {b"n": b"\n", b"r": b"\r", b"t": b"\t"}


def _unescaped(match: re.Match[bytes]) -> bytes:
    sequence = match[1]
    if len(sequence) > 1:  # xHH
        return bytes([int(sequence[1:], 16)])
    return _ESCAPED.get(sequence, sequence)


def parse_format(text: str) -> list[bytes | str]:
    """A -f format string -> literal bytes (escapes resolved) and token letters.

    As in kcat, the string is cut at each `%` first and escapes are resolved in the
    literal pieces between: \\n, \\r, \\t, \\xHH, and a backslash before any other
    character stands for that character."""
    parts: list[bytes | str] = []
    rest = os.fsencode(text)
    while rest:
        literal, percent, rest = rest.partition(b"%")
        if literal:
            parts.append(_ESCAPE.sub(_unescaped, literal))
        if not percent:
            break
        if not rest:
            raise argparse.ArgumentTypeError("the format string ends with a lone %")
        token, rest = rest[:1].decode("latin-1"), rest[1:]
        if token == "%":
            parts.append(b"%")
        elif token in FORMAT_TOKENS:
            parts.append(token)
        else:
            known = ", ".join("%" + t for t in FORMAT_TOKENS)
            raise argparse.ArgumentTypeError(f"unknown format token %{token} (known: {known})")
    return parts


def _size(data: bytes | None) -> int:
    return -1 if data is None else len(data)


def _headers_csv(headers: list[tuple[str, bytes | None]] | None) -> bytes:
    return b",".join(
        name.encode() + b"=" + (b"NULL" if value is None else value)
        for name, value in headers or ()
    )


_FIELDS: dict[str, Callable] = {
    "t": lambda m: m.topic().encode(),
    "p": lambda m: b"%d" % m.partition(),
    "o": lambda m: b"%d" % m.offset(),
    "T": lambda m: b"%d" % m.timestamp()[1],
    "k": lambda m: m.key() or b"",
    "K": lambda m: b"%d" % _size(m.key()),
    "s": lambda m: m.value() or b"",
    "S": lambda m: b"%d" % _size(m.value()),
    "R": lambda m: struct.pack(">i", _size(m.value())),
    "h": lambda m: _headers_csv(m.headers()),
}


def format_record(parts: list[bytes | str], msg) -> bytes:
    """A record as the compiled format string `parts` prints it."""
    return b"".join(p if isinstance(p, bytes) else _FIELDS[p](msg) for p in parts)


_JSON_SPECIAL = re.compile(rb'["\\\x00-\x1f]')
_JSON_ESCAPED = {
    b'"': b'\\"',
    b"\\": b"\\\\",
    b"\b": b"\\b",
    b"\f": b"\\f",
    b"\n": b"\\n",
    b"\r": b"\\r",
    b"\t": b"\\t",
}


def json_string(data: bytes) -> bytes:
    """`data` as a JSON string, as kcat's JSON writer (yajl) writes it: the quote, the
    backslash and control characters escaped (\\u00XX, upper-case hex, for those without
    a short form), every other byte as it is. Bytes that are not UTF-8 are not
    replaced, so the envelope carries a record's bytes unchanged."""
    escaped = _JSON_SPECIAL.sub(lambda m: _JSON_ESCAPED.get(m[0]) or b"\\u%04X" % m[0][0], data)
    return b'"' + escaped + b'"'


def _json_value(data: bytes | None) -> bytes:
    return b"null" if data is None else json_string(data)


def json_envelope(msg, broker: int) -> bytes:
    """kcat -J's envelope of a record, its fields in kcat's order: tstype and ts only
    if the record has a timestamp, headers only if it has some, as a flat array of
    name, value, name, value..."""
    from confluent_kafka import TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME

    tstype, ts = msg.timestamp()
    fields = [
        b'"topic":' + json_string(msg.topic().encode()),
        b'"partition":%d' % msg.partition(),
        b'"offset":%d' % msg.offset(),
    ]
    if tstype in (TIMESTAMP_CREATE_TIME, TIMESTAMP_LOG_APPEND_TIME):
        kind = b"create" if tstype == TIMESTAMP_CREATE_TIME else b"logappend"
        fields += [b'"tstype":"' + kind + b'"', b'"ts":%d' % ts]
    fields.append(b'"broker":%d' % broker)
    headers = msg.headers()
    if headers:
        pairs = (json_string(name.encode()) + b"," + _json_value(v) for name, v in headers)
        fields.append(b'"headers":[' + b",".join(pairs) + b"]")
    fields += [b'"key":' + _json_value(msg.key()), b'"payload":' + _json_value(msg.value())]
    return b"{" + b",".join(fields) + b"}"


def add_parser(subparsers) -> None:
    p = subparsers.add_parser(
        "consume",
        help="print a topic's records, one value per line",
        description="Print records of a topic, one value per line (like "
        "kafka-console-consumer.sh), or as kcat prints them: -f takes kcat's format "
        "tokens (%t topic, %p partition, %o offset, %T timestamp in ms, %k key, %K key "
        "size, %s value, %S value size, %R value size as a 32-bit big-endian integer, "
        "%h headers as name=value,..., %% a percent sign; \\n, \\r, \\t and \\xHH "
        "escapes), -J kcat's JSON envelope.",
    )
    client_config.add_arguments(p)
    p.add_argument("-t", "--topic", required=True, help="the topic to read")
    starts = p.add_mutually_exclusive_group()
    starts.add_argument(
        "--from-beginning",
        action="store_true",
        help="start at the earliest offset (default: only new records); with --group, "
        "only where the group has committed no offset",
    )
    starts.add_argument(
        "-o",
        "--offset",
        type=parse_start,
        default=None,
        metavar="START",
        help="where each partition starts: beginning, end (default), an absolute offset, "
        "-N (the last N offsets of each partition) or s@MS (the first record at or "
        "after MS milliseconds since the epoch)",
    )
    p.add_argument("-G", "--group", default=None, help="consume as a member of this group")
    p.add_argument(
        "-c",
        "--count",
        "--max-messages",
        dest="max_messages",
        type=int,
        default=None,
        metavar="N",
        help="exit after this many records",
    )
    p.add_argument(
        "-e",
        "--exit",
        action="store_true",
        help="exit once every assigned partition has reached its end",
    )
    p.add_argument(
        "--timeout-ms", type=int, default=None, help="exit after this long without a record"
    )
    p.add_argument(
        "-p", "--partition", type=int, default=None, help="read only this partition (default: all)"
    )
    p.add_argument(
        "--isolation-level",
        choices=("read_committed", "read_uncommitted"),
        default="read_committed",
        help="read_committed (default) skips aborted transactions and stops before open "
        "ones; read_uncommitted reads every record",
    )
    output = p.add_mutually_exclusive_group()
    output.add_argument("--print-key", action="store_true", help="print KEY<TAB>VALUE")
    output.add_argument(
        "-f",
        "--format",
        type=parse_format,
        default=None,
        metavar="FORMAT",
        help="print each record as this kcat format string (tokens: see the description)",
    )
    output.add_argument(
        "-J", "--json", action="store_true", help="print each record as kcat's JSON envelope"
    )
    p.set_defaults(func=run)


def _error(message: str) -> int:
    print(f"logflume consume: {message}", file=sys.stderr)
    return 1


def _renderer(args, leaders: dict[int, int]) -> Callable[..., bytes]:
    """What the command prints for a record."""
    if args.format is not None:
        return lambda msg: format_record(args.format, msg)
    if args.json:
        return lambda msg: json_envelope(msg, leaders.get(msg.partition(), -1)) + b"\n"

    def line(msg) -> bytes:
        value = msg.value()
        text = b"null" if value is None else value
        if args.print_key:
            key = msg.key()
            text = (b"null" if key is None else key) + b"\t" + text
        return text + b"\n"

    return line


def start_positions(consumer, topic: str, partitions: list[int], start: Start, timeout: float):
    """The TopicPartitions to assign for `start`; raises KafkaException when the
    offsets of a timestamp cannot be listed. A partition without a record at or after
    the timestamp starts at its end, as in kcat."""
    from confluent_kafka import OFFSET_BEGINNING, OFFSET_END, KafkaException, TopicPartition

    if start.kind == "timestamp":
        asked = [TopicPartition(topic, p, start.value) for p in partitions]
        found = consumer.offsets_for_times(asked, timeout=timeout)
        failed = next((tp.error for tp in found if tp.error is not None), None)
        if failed is not None:
            raise KafkaException(failed)
        return found
    offset = {
        "beginning": OFFSET_BEGINNING,
        "end": OFFSET_END,
        "offset": start.value,
        "tail": OFFSET_TAIL_BASE - start.value,
    }[start.kind]
    return [TopicPartition(topic, p, offset) for p in partitions]


def run(args) -> int:
    from confluent_kafka import Consumer, KafkaError, KafkaException, TopicPartition

    connect_timeout = (args.timeout_ms or 10000) / 1000
    try:
        conf = client_config.client_config(
            args,
            **{
                "group.id": args.group or "logflume-console-consumer",
                "enable.auto.commit": args.group is not None,
                "auto.offset.reset": "earliest" if args.from_beginning else "latest",
                "enable.partition.eof": args.exit,
                "isolation.level": args.isolation_level,
            },
        )
        consumer = Consumer(conf)
    except (client_config.CommandConfigError, KafkaException, ValueError) as e:
        return _error(client_config.describe_error(e))
    try:
        meta = consumer.list_topics(args.topic, timeout=connect_timeout).topics[args.topic]
    except KafkaException as e:
        unreachable = f"cannot reach {args.bootstrap_server}: {e}"
        failure = client_config.authentication_failure(consumer)
        consumer.close()
        return _error(failure or unreachable)
    if meta.error is not None:
        consumer.close()
        return _error(f"topic {args.topic}: {meta.error.str()}")
    start = (
        args.offset
        if args.offset is not None
        else Start("beginning" if args.from_beginning else "end")
    )
    # The partitions assigned, and those of them that reached their end (-e).
    assigned: set[int] = set()
    at_end: set[int] = set()
    if args.group:

        def on_assign(consumer, partitions) -> None:
            assigned.clear()
            assigned.update(tp.partition for tp in partitions)
            at_end.clear()
            if args.offset is not None:
                chosen = [tp.partition for tp in partitions]
                consumer.assign(
                    start_positions(consumer, args.topic, chosen, start, connect_timeout)
                )

        def on_revoke(consumer, partitions) -> None:
            assigned.clear()

        consumer.subscribe([args.topic], on_assign=on_assign, on_revoke=on_revoke)
    else:
        if args.partition is not None:
            if args.partition not in meta.partitions:
                consumer.close()
                return _error(f"topic {args.topic} has no partition {args.partition}")
            partitions = [args.partition]
        else:
            partitions = sorted(meta.partitions)
        try:
            positions = start_positions(consumer, args.topic, partitions, start, connect_timeout)
        except KafkaException as e:
            consumer.close()
            return _error(f"cannot look up the offsets at {start.value} ms: {e}")
        consumer.assign(positions)
        assigned.update(partitions)
    render = _renderer(args, {p: pm.leader for p, pm in meta.partitions.items()})
    stopping = []
    signal.signal(signal.SIGTERM, lambda *_: stopping.append(True))
    out = sys.stdout.buffer
    count = 0
    last = time.monotonic()
    try:
        while not stopping:
            if args.max_messages is not None and count >= args.max_messages:
                break
            if args.exit and assigned and at_end >= assigned:
                break
            want = 1000 if args.max_messages is None else min(1000, args.max_messages - count)
            try:
                batch = consumer.consume(num_messages=want, timeout=0.2)
            except KafkaException as e:  # raised by on_assign
                return _error(client_config.describe_error(e))
            if not batch:
                if (
                    args.timeout_ms is not None
                    and (time.monotonic() - last) * 1000 >= args.timeout_ms
                ):
                    break
                continue
            for msg in batch:
                err = msg.error()
                if err is not None:
                    partition = msg.partition()
                    if err.code() == KafkaError._PARTITION_EOF and partition is not None:
                        # kcat -e stops reading a partition at its end
                        at_end.add(partition)
                        consumer.pause([TopicPartition(args.topic, partition)])
                    elif err.fatal():
                        return _error(err.str())
                    continue
                if msg.partition() in at_end:
                    continue
                out.write(render(msg))
                count += 1
                last = time.monotonic()
                if args.max_messages is not None and count >= args.max_messages:
                    break
            out.flush()
    except KeyboardInterrupt:
        pass
    finally:
        out.flush()
        consumer.close()
        print(f"Processed a total of {count} messages", file=sys.stderr)
    return 0

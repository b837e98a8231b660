"""`logflume consume` with kcat's options, against a broker process: the format
tokens, -o (beginning, absolute, -N per partition, s@timestamp), -e, -c, -J, the
isolation levels around an open transaction, and kcat itself run on the same records
with the same options as the independent reference of what they print."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
from confluent_kafka import Producer

from testkit.kafka import create_topic
from testkit.procs import BrokerProcess

LF = [sys.executable, "-m", "logflume"]
SETTINGS = {
    "transaction.state.log.num.partitions": 4,
    "offsets.topic.num.partitions": 4,
    "group.initial.rebalance.delay.ms": 0,
}
PARTITIONS, PER_PARTITION = 3, 10
BASE_TS = 1_700_000_000_000  # the records' CreateTime: BASE_TS + 1000 * i


@pytest.fixture(scope="module")
def broker(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("consume-kcat") / "data", settings=SETTINGS)
    b.start()
    yield b
    b.stop()


def record(p: int, i: int) -> dict:
    """Record i of partition p, as Producer.produce's keyword arguments: its CreateTime
    BASE_TS + 1000 * i, key, value and headers; a null key and value and a null and an
    empty header value at i = 3, no headers at i = 4."""
    rec: dict = {"partition": p, "timestamp": BASE_TS + 1000 * i}
    if i == 3:
        return rec | {"key": None, "value": None, "headers": [("n", None), ("e", b"")]}
    rec |= {"key": b"k%d-%d" % (p, i), "value": b"v%d-%d" % (p, i)}
    return rec if i == 4 else rec | {"headers": [("host", b"web-%d" % p), ("seq", b"%d" % i)]}


def produce(bootstrap: str, topic: str, records) -> None:
    """Send records (Producer.produce's keyword arguments); raise unless all were
    acknowledged."""
    producer = Producer({"bootstrap.servers": bootstrap, "acks": "all", "linger.ms": 5})
    failed: list = []
    for rec in records:
        producer.produce(topic, on_delivery=lambda err, _: err and failed.append(err), **rec)
    assert producer.flush(60) == 0 and not failed, failed


@pytest.fixture(scope="module")
def topic(broker) -> str:
    """kc-records: PER_PARTITION records in each of its PARTITIONS partitions."""
    create_topic(broker.bootstrap, "kc-records", PARTITIONS)
    produce(
        broker.bootstrap,
        "kc-records",
        (record(p, i) for p in range(PARTITIONS) for i in range(PER_PARTITION)),
    )
    return "kc-records"


ODD = [
    b'quote " backslash \\ slash / tab \t newline \n',
    b"control \x01\x1f del \x7f",
    "utf-8 é €".encode(),
    b"not utf-8 \xff\xfe",
    b"",
]


@pytest.fixture(scope="module")
def odd_topic(broker) -> str:
    """kc-odd: keys, values and header values with the bytes JSON must escape, bytes
    that are not UTF-8, empty ones; one partition."""
    create_topic(broker.bootstrap, "kc-odd", 1)
    produce(
        broker.bootstrap,
        "kc-odd",
        ({"partition": 0, "key": v, "value": v, "headers": [("h", v), ("h", None)]} for v in ODD),
    )
    return "kc-odd"


def consume(broker, *args) -> bytes:
    """stdout of `logflume consume` that must exit by itself, successfully."""
    r = subprocess.run(
        [*LF, "consume", "--bootstrap-server", broker.bootstrap, *args],
        capture_output=True,
        timeout=60,
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def kcat(broker, *args) -> bytes:
    r = subprocess.run(
        ["kcat", "-b", broker.bootstrap, "-C", "-q", *args], capture_output=True, timeout=60
    )
    assert r.returncode == 0, r.stderr
    return r.stdout


def test_format_tokens_with_key_headers_and_nulls(broker, topic):
    fmt = r"%t|%p|%o|%T|%k|%K|%s|%S|%h|100%%\n"
    out = consume(broker, "-t", topic, "-p", "1", "-o", "beginning", "-e", "-f", fmt)
    expected = []
    for i in range(PER_PARTITION):
        rec = record(1, i)
        key, value = rec["key"], rec["value"]
        headers = ",".join(
            f"{n}={'NULL' if v is None else v.decode()}" for n, v in rec.get("headers", [])
        )
        expected.append(
            f"{topic}|1|{i}|{BASE_TS + 1000 * i}|{(key or b'').decode()}|"
            f"{-1 if key is None else len(key)}|{(value or b'').decode()}|"
            f"{-1 if value is None else len(value)}|{headers}|100%"
        )
    assert out.decode().splitlines() == expected
    assert "|k1-0|4|v1-0|4|host=web-1,seq=0|" in expected[0]
    assert expected[3].endswith("||-1||-1|n=NULL,e=|100%")


def test_escapes_and_the_binary_size(broker, topic):
    out = consume(broker, "-t", topic, "-p", "0", "-o", "2", "-c", "1", "-f", r"%R\t%s\x21\n")
    assert out == b"\x00\x00\x00\x04\tv0-2!\n"


def test_offset_minus_n_is_the_last_n_of_each_partition(broker, topic):
    out = consume(broker, "-t", topic, "-o", "-3", "-e", "-f", r"%p %o\n")
    got = sorted(tuple(map(int, line.split())) for line in out.splitlines())
    assert got == [(p, o) for p in range(PARTITIONS) for o in (7, 8, 9)]
    more_than_there_is = consume(broker, "-t", topic, "-o", "-100", "-e")
    assert len(more_than_there_is.splitlines()) == PARTITIONS * PER_PARTITION


def test_offset_absolute_applies_to_every_partition(broker, topic):
    out = consume(broker, "-t", topic, "--offset", "8", "--exit", "--format", r"%p %o\n")
    got = sorted(tuple(map(int, line.split())) for line in out.splitlines())
    assert got == [(p, o) for p in range(PARTITIONS) for o in (8, 9)]


def test_offset_at_a_timestamp(broker, topic):
    # the first record at or after BASE_TS + 5500 is i = 6, in every partition
    out = consume(broker, "-t", topic, "-o", f"s@{BASE_TS + 5500}", "-e", "-f", r"%p %o %T\n")
    got = sorted(tuple(map(int, line.split())) for line in out.splitlines())
    assert got == [(p, i, BASE_TS + 1000 * i) for p in range(PARTITIONS) for i in range(6, 10)]
    later = consume(broker, "-t", topic, "-o", f"s@{BASE_TS + 60_000}", "-e")
    assert later == b""


def test_exit_at_the_end_and_count(broker, topic):
    everything = consume(broker, "-t", topic, "--from-beginning", "-e")
    assert len(everything.splitlines()) == PARTITIONS * PER_PARTITION
    assert consume(broker, "-t", topic, "-e") == b""  # from the end: nothing, and exits
    create_topic(broker.bootstrap, "kc-empty", 2)
    assert consume(broker, "-t", "kc-empty", "-o", "beginning", "-e") == b""
    five = consume(broker, "-t", topic, "-o", "beginning", "-c", "5")
    assert len(five.splitlines()) == 5
    old_names = consume(
        broker,
        "--topic",
        topic,
        "--partition",
        "2",
        "--offset",
        "0",
        "--max-messages",
        "2",
        "--print-key",
    )
    assert old_names.splitlines() == [b"k2-0\tv2-0", b"k2-1\tv2-1"]


def test_group_member_starts_where_offset_says_and_exits_at_the_end(broker, topic):
    args = ("-t", topic, "-G", "kc-group", "-e", "-f", r"%p %o\n")
    out = consume(broker, *args, "-o", "-2")
    got = sorted(tuple(map(int, line.split())) for line in out.splitlines())
    assert got == [(p, o) for p in range(PARTITIONS) for o in (8, 9)]
    # from the offsets the group committed: --from-beginning is for partitions without
    assert consume(broker, *args, "--from-beginning") == b""


def test_json_envelope(broker, topic):
    out = consume(broker, "-t", topic, "-p", "2", "-o", "beginning", "-e", "-J")
    envelopes = [json.loads(line) for line in out.splitlines()]
    assert len(envelopes) == PER_PARTITION
    first = envelopes[0]
    assert list(first) == [
        "topic",
        "partition",
        "offset",
        "tstype",
        "ts",
        "broker",
        "headers",
        "key",
        "payload",
    ]
    assert first == {
        "topic": topic,
        "partition": 2,
        "offset": 0,
        "tstype": "create",
        "ts": BASE_TS,
        "broker": 0,
        "headers": ["host", "web-2", "seq", "0"],
        "key": "k2-0",
        "payload": "v2-0",
    }
    nulls = envelopes[3]
    assert (nulls["key"], nulls["payload"], nulls["headers"]) == (None, None, ["n", None, "e", ""])
    assert "headers" not in envelopes[4]


def test_read_committed_stops_before_an_open_transaction(broker):
    create_topic(broker.bootstrap, "kc-txn", 1)
    produce(broker.bootstrap, "kc-txn", ({"partition": 0, "value": b"c%d" % i} for i in range(3)))
    txn = Producer({"bootstrap.servers": broker.bootstrap, "transactional.id": "kc-open"})
    txn.init_transactions(30)
    txn.begin_transaction()
    for i in range(2):
        txn.produce("kc-txn", b"open%d" % i, partition=0)
    assert txn.flush(30) == 0
    try:
        start = ("-t", "kc-txn", "-o", "beginning", "-e")
        committed = consume(broker, *start)
        assert committed.splitlines() == [b"c0", b"c1", b"c2"]
        assert consume(broker, *start, "--isolation-level", "read_committed") == committed
        everything = consume(broker, *start, "--isolation-level", "read_uncommitted")
        assert everything.splitlines() == [b"c0", b"c1", b"c2", b"open0", b"open1"]
        # kcat's default is librdkafka's, read_committed, as ours
        assert kcat(broker, "-t", "kc-txn", "-o", "beginning", "-e", "-f", r"%s\n") == committed
        tail = consume(
            broker, "-t", "kc-txn", "-o", "-2", "-e", "--isolation-level", "read_uncommitted"
        )
        assert tail.splitlines() == [b"open0", b"open1"]
    finally:
        txn.abort_transaction(30)


KCAT_FORMAT = r"%t %p %o %k %s %K %S %T [%h]\n"


@pytest.mark.parametrize("partition", range(PARTITIONS))
def test_format_is_kcats(broker, topic, partition):
    args = ("-t", topic, "-p", str(partition), "-o", "beginning", "-e")
    ours = consume(broker, *args, "-f", KCAT_FORMAT)
    assert len(ours.splitlines()) == PER_PARTITION
    assert ours == kcat(broker, *args, "-f", KCAT_FORMAT)


def test_start_offsets_are_kcats(broker, topic):
    for start in ("-4", "-100", f"s@{BASE_TS + 7000}", "5"):
        args = ("-t", topic, "-o", start, "-e", "-f", r"%p %o %s\n")
        ours = sorted(consume(broker, *args).splitlines())
        assert ours and ours == sorted(kcat(broker, *args).splitlines()), start


@pytest.mark.parametrize("which", ["topic", "odd_topic"])
def test_json_envelope_is_kcats(broker, which, request):
    name = request.getfixturevalue(which)
    args = ("-t", name, "-p", "0", "-o", "beginning", "-e", "-J")
    ours, theirs = consume(broker, *args).splitlines(), kcat(broker, *args).splitlines()
    assert len(ours) == len(theirs) > 0
    for mine, reference in zip(ours, theirs, strict=True):
        assert mine == reference


def test_odd_bytes_format_is_kcats(broker, odd_topic):
    args = ("-t", odd_topic, "-o", "beginning", "-e", "-f", r"%k|%s|%h|%K|%S\n")
    ours = consume(broker, *args)
    assert ours == kcat(broker, *args)
    assert ODD[3] in ours


def test_bad_format_and_offset_are_usage_errors(broker):
    for args, message in (
        (("-f", "%x"), b"unknown format token %x"),
        (("-f", "a%"), b"ends with a lone %"),
        (("-o", "yesterday"), b"expected beginning, end, OFFSET, -COUNT or s@TIMESTAMP_MS"),
        (("-f", "%s", "-J"), b"not allowed with"),
        (("-o", "end", "--from-beginning"), b"not allowed with"),
    ):
        r = subprocess.run(
            [*LF, "consume", "--bootstrap-server", broker.bootstrap, "-t", "x", *args],
            capture_output=True,
            timeout=60,
        )
        assert r.returncode == 2 and message in r.stderr, (args, r.stderr)

"""The kafka sink's audit tier (sinks/kafka/audit.py): pure code, no broker."""

import pytest
from hypothesis import given
from hypothesis import strategies as st

from common.audit import AGENT, MINUTE_MS, AuditRecord, Bucket, Tally, checksum
from sinks.kafka.audit import Drill, SinkAudit, dead_indexes
from sinks.kafka.records import Records

M = 1_764_345_600_000


def records(values, topic="t", headers=None, stamps=M):
    return Records(topic, values, None, headers, stamps, [])


def test_a_batch_of_one_host_topic_and_time_is_one_bucket():
    host = [("host", b"web-1")]
    out = records([b"a", b"b"], headers=[host, host], stamps=M + 5)
    assert SinkAudit("audit", "a.k").delivered(out) == {
        Bucket("web-1", "t", M): Tally(2, checksum([b"a", b"b"]))
    }


@given(
    st.lists(
        st.tuples(
            st.binary(max_size=8),
            st.sampled_from(["t", "u"]),
            st.sampled_from([None, "web-1", "web-2"]),
            st.integers(M, M + 3 * MINUTE_MS),
        ),
        min_size=1,
        max_size=30,
    ),
    st.data(),
)
def test_buckets_split_by_host_topic_and_minute(rows, data):
    values = [v for v, *_ in rows]
    headers = [None if h is None else [("host", h.encode())] for _, _, h, _ in rows]
    out = Records([t for _, t, _, _ in rows], values, None, headers, [s for *_, s in rows], [])
    skip = set(data.draw(st.lists(st.integers(0, len(rows) - 1), max_size=3)))
    expected: dict[Bucket, list[bytes]] = {}
    for i, (v, t, h, s) in enumerate(rows):
        if i not in skip:
            expected.setdefault(Bucket(h or "", t, s - s % MINUTE_MS), []).append(v)
    got = SinkAudit("audit", "a.k").delivered(out, skip)
    assert got == {b: Tally(len(v), checksum(v)) for b, v in expected.items()}


@given(st.lists(st.integers(M, M + 3 * MINUTE_MS), min_size=1, max_size=30))
def test_one_hosts_run_of_lines_with_times_of_their_own_splits_by_minute(stamps):
    host = [("host", b"web-1")]
    values = [b"%d" % i for i in range(len(stamps))]
    out = records(values, headers=[host] * len(stamps), stamps=stamps)
    expected: dict[Bucket, list[bytes]] = {}
    for ts, value in zip(stamps, values, strict=True):
        expected.setdefault(Bucket("web-1", "t", ts - ts % MINUTE_MS), []).append(value)
    got = SinkAudit("audit", "a.k").delivered(out)
    assert got == {b: Tally(len(v), checksum(v)) for b, v in expected.items()}


def test_published_records_are_running_totals_applied_only_when_delivered():
    audit = SinkAudit("audit", "agent.kafka")
    bucket = Bucket("", "t", M)
    first = audit.delivered(records([b"a"]))
    ((key, value),) = audit.records(first)
    assert AuditRecord.parse(key, value).tally == Tally(1, checksum([b"a"]))
    assert audit.totals == {}, "nothing counts before it is delivered"
    audit.apply(first)
    audit.apply(audit.delivered(records([b"b", b"c"])))
    ((key2, value2),) = audit.records({}, [bucket])
    rec = AuditRecord.parse(key2, value2)
    assert key2 == key and rec.tier == AGENT
    assert rec.tally == Tally(3, checksum([b"a", b"b", b"c"]))
    assert audit.dirty == {bucket}


def test_each_sink_instance_writes_keys_of_its_own():
    delta = SinkAudit("audit", "a.k").delivered(records([b"a"]))
    keys = {SinkAudit("audit", "a.k").records(delta)[0][0] for _ in range(3)}
    assert len(keys) == 3


def test_dead_letters_are_found_by_topic_and_value_once_each():
    out = Records(["t", "u", "t", "t"], [b"x", b"x", b"x", b"y"], None, None, M, [])
    assert dead_indexes(out, [("t", b"x")]) == {0}
    assert dead_indexes(out, [("t", b"x"), ("t", b"x"), ("u", b"x")]) == {0, 1, 2}


async def test_an_audit_topic_the_agent_may_not_create_is_named_with_the_way_out(
    tmp_path, monkeypatch
):
    from confluent_kafka import KafkaError, KafkaException

    from sinks.kafka import KafkaSink, sink
    from tests.agent.helpers import context

    def refused(*args):
        raise KafkaException(KafkaError(KafkaError.TOPIC_AUTHORIZATION_FAILED))

    monkeypatch.setattr(sink, "ensure_topic", refused)
    kafka = KafkaSink(KafkaSink.Config(topic="t"), context(tmp_path, "k"))
    with pytest.raises(RuntimeError) as raised:
        await kafka._ensure_audit_topic()
    message = str(raised.value)
    assert message.startswith("audit topic logflume-audit: ")
    assert "WRITE and DESCRIBE" in message and "audit: false" in message


def test_a_drill_loses_and_duplicates_what_it_counts_once_until_spent():
    audit = SinkAudit("audit", "a.k", Drill(drop=3, duplicate=1))
    first = Records(["t", "u", "t"], [b"a", b"b", b"c"], [b"1", b"2", b"3"], None, [1, 2, 3], [])
    sent = audit.produced(first)
    # never a whole batch lost: two of the three dropped, the one left sent twice
    assert sent == Records(["t", "t"], [b"a", b"a"], [b"1", b"1"], None, [1, 1], [])
    assert audit.delivered(first) == {  # counted as sent, once each
        Bucket("", "t", 0): Tally(2, checksum([b"a", b"c"])),
        Bucket("", "u", 0): Tally(1, checksum([b"b"])),
    }
    second = records([b"d", b"e"])
    assert audit.produced(second).values == [b"d"]  # the third drop
    third = records([b"f", b"g"])
    assert audit.produced(third) is third  # spent


def test_without_a_drill_the_records_are_produced_as_they_are():
    out = records([b"a"])
    assert SinkAudit("audit", "a.k").produced(out) is out

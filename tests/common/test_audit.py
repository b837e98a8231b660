"""The audit's checksum, buckets, records and verdicts (common/audit.py): pure code."""

import xxhash
from hypothesis import given
from hypothesis import strategies as st

from common.audit import (
    AGENT,
    BROKER,
    MASK,
    MINUTE_MS,
    SPARK_REALTIME,
    AuditRecord,
    Bucket,
    Progress,
    Tally,
    checksum,
    coverage,
    minute_of,
    minute_text,
    published,
    reconcile,
    totals,
)

values = st.lists(st.binary(max_size=40), max_size=30)
M = 1_764_345_600_000  # 2025-11-28T16:00Z, a minute's start
LATER = M + 10 * MINUTE_MS  # every bucket at M is past its grace


def test_the_hash_is_xxh64_with_seed_42():
    assert checksum([b""]) == xxhash.xxh64_intdigest(b"", 42)
    assert checksum([b"hello"]) == xxhash.xxh64(b"hello", seed=42).intdigest()


@given(values, st.randoms())
def test_the_checksum_ignores_order_and_adds_up(vals, rnd):
    shuffled = list(vals)
    rnd.shuffle(shuffled)
    assert checksum(vals) == checksum(shuffled)
    half = len(vals) // 2
    assert checksum(vals) == checksum(vals[half:], checksum(vals[:half]))
    assert 0 <= checksum(vals) <= MASK


@given(st.lists(st.binary(max_size=20), min_size=2, max_size=20, unique=True))
def test_a_loss_and_a_duplicate_keep_the_count_but_not_the_checksum(vals):
    changed = vals[1:] + [vals[-1]]  # the first lost, the last twice
    assert len(changed) == len(vals)
    assert checksum(changed) != checksum(vals)


def test_minutes():
    assert minute_of(M + 59_999) == M
    assert minute_of(M + MINUTE_MS) == M + MINUTE_MS
    assert minute_text(M) == "2025-11-28T16:00Z"


def test_a_record_survives_the_topic():
    rec = AuditRecord(AGENT, Bucket("web-1", "nginx-access", M), "a.k.1", Tally(3, 2**64 - 1))
    assert rec.key() == b"agent/web-1/nginx-access/2025-11-28T16:00Z/a.k.1"
    back = AuditRecord.parse(rec.key(), rec.value(now_ms=5))
    assert back == rec
    assert AuditRecord.parse(rec.key(), None) is None  # a tombstone
    assert AuditRecord.parse(b"k", b"not json") is None
    assert AuditRecord.parse(b"k", b'{"tier": "agent"}') is None


def test_the_last_record_of_a_key_counts_and_writers_add_up():
    bucket = Bucket("web-1", "t", M)

    def msg(writer, count):
        rec = AuditRecord(AGENT, bucket, writer, Tally(count, count))
        return rec.key(), rec.value()

    mark = Progress(SPARK_REALTIME, "t", "job", 123)
    messages = [msg("run1", 5), msg("run1", 7), msg("run2", 3), (b"x", b"junk")]
    latest, marks = published([*messages, (mark.key(), mark.value())])
    assert totals(latest) == {bucket: {AGENT: Tally(10, 10)}}
    assert marks == [mark]


def bucket_with(agent: list[bytes], broker: list[bytes], minute=M):
    b = Bucket("web-1", "t", minute)
    return {
        b: {
            AGENT: Tally(len(agent), checksum(agent)),
            BROKER: Tally(len(broker), checksum(broker)),
        }
    }


def status(tiers, now=LATER, compared=(BROKER,)):
    (v,) = reconcile(tiers, compared, now)
    return v.status, v.difference, v.where


def test_verdicts():
    lines = [b"a", b"b", b"c"]
    assert status(bucket_with(lines, lines)) == ("complete", 0, "")
    assert status(bucket_with(lines, lines[:2])) == ("missing", -1, BROKER)
    assert status(bucket_with(lines, [*lines, b"a"])) == ("duplicated", 1, BROKER)
    assert status(bucket_with(lines, [b"a", b"b", b"b"])) == ("checksum differs", 0, BROKER)


def test_a_bucket_is_open_until_its_grace_is_over():
    lines = [b"a"]
    end = M + MINUTE_MS
    assert status(bucket_with(lines, []), now=end + 119_000)[0] == "still open"
    assert status(bucket_with(lines, []), now=end + 120_000)[0] == "missing"


def test_a_host_whose_clock_is_ahead_stays_open_until_our_clock_passes_its_minute():
    ahead = M + 30 * MINUTE_MS
    assert status(bucket_with([b"a"], [], minute=ahead))[0] == "still open"


def test_a_compared_tier_that_counted_nothing_of_a_bucket_misses_all_of_it():
    b = Bucket("web-2", "t", M)
    tiers = {b: {AGENT: Tally(4, checksum([b"1", b"2", b"3", b"4"]))}}
    assert status(tiers, compared=(BROKER, SPARK_REALTIME)) == ("missing", -4, BROKER)
    assert status(tiers, compared=()) == ("unchecked", 0, "")
    assert status({b: {BROKER: Tally(1, 1)}})[0] == "no agent count"


def test_verdict_text_and_json():
    (v,) = reconcile(bucket_with([b"a", b"b"], [b"a"]), [BROKER], LATER)
    assert v.problem and v.text() == "missing 1 (broker)"
    doc = v.to_json()
    assert doc["minute"] == "2025-11-28T16:00Z"
    assert doc["tiers"]["agent"]["count"] == 2
    assert doc["tiers"]["agent"]["checksum"] == f"{checksum([b'a', b'b']):016x}"


def test_a_spark_tier_is_held_to_the_agent_only_within_the_minutes_it_covered():
    def rec(tier, minute, count):
        return AuditRecord(tier, Bucket("web-1", "t", minute), "w", Tally(count, count))

    published = [
        *(rec(AGENT, M + i * MINUTE_MS, 5) for i in range(6)),
        *(rec(SPARK_REALTIME, M + i * MINUTE_MS, 5) for i in (1, 2, 3, 4)),  # from minute 1
    ]
    published[7] = rec(SPARK_REALTIME, M + 2 * MINUTE_MS, 4)  # one line short in minute 2
    published[9] = rec(SPARK_REALTIME, M + 4 * MINUTE_MS, 3)  # minute 4: read part way
    # the job read the topic to its end when minute 3 had closed (2 minutes of grace
    # after its end), not yet minute 4
    as_of = M + 4 * MINUTE_MS + 120_000
    marks = [
        Progress(SPARK_REALTIME, "t", "job", as_of - 5_000),
        Progress(SPARK_REALTIME, "t", "job2", as_of),
    ]
    covered = coverage(published, marks)
    assert covered == {(SPARK_REALTIME, "t"): (M + 2 * MINUTE_MS, as_of)}
    verdicts = reconcile(totals(published), [SPARK_REALTIME], LATER, covered=covered)
    assert [v.status for v in verdicts] == [
        "unchecked",  # before the job started
        "unchecked",  # its first minute: read from part way through
        "missing",
        "complete",
        "unchecked",  # not read to its end yet
        "unchecked",
    ]
    assert coverage(published, []) == {}, "no progress mark: nothing covered"

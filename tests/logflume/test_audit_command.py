"""`logflume audit`'s own pieces: its times and its table (the reconciling itself
against a broker: tests/sinks/test_kafka_audit_seam.py)."""

import datetime as dt

import pytest

from common.audit import (
    AGENT,
    BROKER,
    MINUTE_MS,
    SPARK_OFFLINE,
    AuditRecord,
    Bucket,
    Tally,
    extra_totals,
    reconcile,
    totals,
)
from logflume.commands.audit import parse_time, print_table

NOW = 1_795_882_949_000
M = NOW - NOW % MINUTE_MS - 10 * MINUTE_MS


def test_times():
    assert parse_time("now", NOW) == NOW
    assert parse_time("15m", NOW) == parse_time("-15m", NOW) == NOW - 15 * 60_000
    assert parse_time("1d", NOW) == NOW - 86_400_000
    assert parse_time("1795882949000", NOW) == 1795882949000
    assert parse_time("2026-11-28T16:10:00Z", NOW) == 1795882200000
    local = dt.datetime(2026, 11, 28, 16, 10).timestamp() * 1000
    assert parse_time("2026-11-28T16:10", NOW) == local
    with pytest.raises(ValueError, match="not a time"):
        parse_time("yesterday", NOW)


def test_the_table_names_each_tier_and_the_verdict(capsys):
    tiers = {
        Bucket("web-1", "nginx-access", M): {AGENT: Tally(3, 9), BROKER: Tally(3, 9)},
        Bucket("web-2", "nginx-access", M): {AGENT: Tally(3, 9), BROKER: Tally(2, 7)},
        Bucket("", "netcat", NOW - NOW % MINUTE_MS): {AGENT: Tally(1, 1)},
    }
    print_table(reconcile(tiers, [BROKER], NOW), {BROKER})
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["MINUTE", "HOST", "TOPIC", "AGENT", "BROKER", "VERDICT"]
    assert lines[1].split()[1:] == ["web-1", "nginx-access", "3", "3", "complete"]
    assert lines[2].split()[1:] == ["web-2", "nginx-access", "3", "2", "missing", "1", "(broker)"]
    assert lines[3].split()[1:] == ["-", "netcat", "1", "-", "still", "open"]
    assert lines[4] == "3 buckets: 1 complete, 1 missing, 1 still open"


def test_the_spark_tiers_rows_it_could_not_parse_are_shown_beside_their_count(capsys):
    bucket = Bucket("web-1", "nginx-access", M)
    spark = [
        AuditRecord(SPARK_OFFLINE, bucket, f"batch-{i}", Tally(n, c), {"parsed": p, "rejected": r})
        for i, (n, c, p, r) in enumerate([(2, 5, 2, 0), (1, 4, 0, 1)])
    ]
    agent = AuditRecord(AGENT, bucket, "web.k.1", Tally(3, 9))
    records = [agent, *spark]
    covered = {(SPARK_OFFLINE, "nginx-access"): (M, NOW)}  # the job read past the minute
    (verdict,) = reconcile(totals(records), [SPARK_OFFLINE], NOW, covered=covered)
    verdict.extra = extra_totals(records)[bucket]
    print_table([verdict], {SPARK_OFFLINE})
    row = capsys.readouterr().out.splitlines()[1]
    assert row.split()[1:] == ["web-1", "nginx-access", "3", "3", "(1", "rejected)", "complete"]
    tiers = verdict.to_json()["tiers"]
    assert tiers[SPARK_OFFLINE] == {"count": 3, "checksum": f"{9:016x}", "parsed": 2, "rejected": 1}
    assert tiers[AGENT] == {"count": 3, "checksum": f"{9:016x}"}

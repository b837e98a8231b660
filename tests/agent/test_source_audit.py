"""The audit's source tier in the agent (agent/source_audit.py): pure code."""

from agent.source_audit import SourceCounts, SourceTally
from common.audit import AGENT_SOURCE, MINUTE_MS, AuditRecord, Bucket
from sinks.kafka.audit import SinkAudit

M = 1_764_345_600_000


def test_batches_add_up_per_host_and_minute_of_reading():
    tally = SourceTally("access")
    tally.count("web-1", read=10, kept=7, unparsable=2, now_ms=M + 5)
    tally.count("web-1", read=4, kept=4, unparsable=0, now_ms=M + MINUTE_MS - 1)
    tally.count("web-1", read=1, kept=0, unparsable=0, now_ms=M + MINUTE_MS)
    tally.count("web-2", read=3, kept=3, unparsable=3, now_ms=M)
    assert tally.take_dirty() == {
        ("web-1", M): SourceCounts(read=14, filtered=3, unparsable=2),
        ("web-1", M + MINUTE_MS): SourceCounts(read=1, filtered=1, unparsable=0),
        ("web-2", M): SourceCounts(read=3, filtered=0, unparsable=3),
    }
    assert tally.take_dirty() == {}


def test_what_was_taken_and_not_published_is_taken_again_with_later_counts():
    tally = SourceTally("access")
    tally.count("web-1", 5, 5, 0, M)
    taken = tally.take_dirty()
    tally.count("web-1", 2, 1, 0, M)
    tally.restore(taken)
    assert tally.take_dirty() == {("web-1", M): SourceCounts(read=7, filtered=1, unparsable=0)}


def test_a_sink_publishes_its_sources_totals_under_its_topic_as_running_totals():
    tally = SourceTally("access")
    audit = SinkAudit("audit", "web.k", sources=[tally], records_topic="nginx-access", agent="web")
    tally.count("web-1", 10, 7, 2, M)
    ((key, value),) = audit.source_records(audit.take_sources())
    rec = AuditRecord.parse(key, value)
    assert rec is not None
    assert (rec.tier, rec.bucket) == (AGENT_SOURCE, Bucket("web-1", "nginx-access", M))
    assert rec.writer == f"web.access.{tally.writer_run}"
    assert (rec.tally.count, rec.extra) == (10, {"filtered": 3, "unparsable": 2})
    tally.count("web-1", 1, 1, 0, M)
    ((_, value),) = audit.source_records(audit.take_sources())
    assert AuditRecord.parse(key, value).tally.count == 11  # the total, not the change


def test_a_sink_whose_topic_is_a_template_publishes_no_source_tier():
    tally = SourceTally("access")
    tally.count("web-1", 1, 1, 0, M)
    audit = SinkAudit("audit", "web.k", sources=[tally], records_topic=None, agent="web")
    assert audit.take_sources() == [] and tally.dirty

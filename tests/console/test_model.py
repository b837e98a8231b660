"""The console's pure parts: folding nginx-stats rows, rates between polls, what the
page shows of an agent's and a broker's /metrics, the URL lists, the message
browser's texts and times."""

import pytest

from console.model import (
    Rates,
    StatsFold,
    agent_summary,
    epoch_seconds,
    lag,
    parse_timestamp,
    parse_urls,
    partition_sizes,
    record_json,
    text_of,
)

MINUTE = "2026-11-26T18:00:00.000Z"
NEXT = "2026-11-26T18:01:00.000Z"


def stats_row(start, host, requests, final=False, **extra):
    return {"window_start": start, "host": host, "requests": requests, "final": final, **extra}


def test_latest_row_of_a_window_and_host_wins_and_hosts_are_summed():
    fold = StatsFold()
    fold.add(stats_row(MINUTE, "a", 5, status_2xx=5))
    fold.add(stats_row(MINUTE, "b", 7))
    fold.add(stats_row(MINUTE, "a", 9, status_2xx=8, status_5xx=1))  # supersedes a's 5
    fold.add(stats_row(NEXT, "a", 3, final=False))
    fold.add(stats_row(MINUTE, "b", 8, final=True))
    fold.add(stats_row(MINUTE, "a", 10, final=True, status_2xx=9, status_5xx=1))
    points = fold.per_minute()
    assert [p["t"] for p in points] == [epoch_seconds(MINUTE), epoch_seconds(NEXT)]
    first, second = points
    assert first["requests"] == 18 and first["hosts"] == 2 and first["final"] is True
    assert first["status_2xx"] == 9 and first["status_5xx"] == 1
    assert second["requests"] == 3 and second["final"] is False


def test_a_provisional_row_after_the_final_one_wins_too_as_the_topic_says():
    fold = StatsFold()
    fold.add(stats_row(MINUTE, None, 10, final=True))
    fold.add(stats_row(MINUTE, None, 4))
    assert [(p["requests"], p["final"]) for p in fold.per_minute()] == [(4, False)]


def test_rows_that_are_not_stats_are_ignored_and_old_windows_dropped():
    fold = StatsFold(keep_windows=2)
    assert not fold.add(["not", "a", "row"])
    assert not fold.add({"window_start": "yesterday"})
    for minute in range(5):
        fold.add(stats_row(f"2026-11-26T18:0{minute}:00Z", "a", minute))
    assert [p["requests"] for p in fold.per_minute()] == [3, 4]


def test_timestamps_with_and_without_zone():
    assert epoch_seconds("1970-01-01T00:01:00Z") == 60
    assert epoch_seconds("1970-01-01T01:01:00+01:00") == 60
    assert epoch_seconds("1970-01-01T00:01:00") == 60
    assert epoch_seconds(60) is None


def test_rates_between_two_polls():
    rates = Rates()
    assert rates.update(10.0, {"t": 100, "u": 5}) == {"t": None, "u": None}
    assert rates.update(12.0, {"t": 160, "u": 5}) == {"t": 30.0, "u": 0.0}
    # a value going down (a recreated topic, a restarted agent) has no rate this poll
    assert rates.update(14.0, {"t": 10}) == {"t": None}
    assert rates.update(15.0, {"t": 20}) == {"t": 10.0}
    rates.forget_except(["u"])
    assert rates.update(16.0, {"t": 30, "u": 7}) == {"t": None, "u": 0.5}


def test_lag_per_partition():
    assert lag(100, 70) == 30
    assert lag(100, -1001) is None  # nothing committed
    assert lag(5, 9) == 0


def test_url_lists():
    assert parse_urls("127.0.0.1:8286, http://h:9/metrics,,https://x:1/health/") == [
        "http://127.0.0.1:8286",
        "http://h:9",
        "https://x:1",
    ]
    assert parse_urls(None) == parse_urls("") == []


AGENT_METRICS = """\
# TYPE logflume_agent_source_events_in_total counter
logflume_agent_source_events_in_total{component="nginx"} 100.0
# TYPE logflume_agent_sink_events_out_total counter
logflume_agent_sink_events_out_total{component="nginx-kafka"} 90.0
# TYPE logflume_agent_channel_events gauge
logflume_agent_channel_events{component="nginx"} 250.0
# TYPE logflume_agent_channel_capacity_events gauge
logflume_agent_channel_capacity_events{component="nginx"} 1000.0
# TYPE logflume_agent_oldest_undelivered_event_age_seconds gauge
logflume_agent_oldest_undelivered_event_age_seconds{component="nginx-kafka"} 0.5
"""
HEALTH = {"status": "ok", "components": {"source.nginx": "running", "sink.nginx-kafka": "running"}}


def test_agent_summary_has_components_rates_and_channel_fill():
    rates = Rates()
    first = agent_summary("http://a", AGENT_METRICS, HEALTH, rates, now=1.0)
    later = AGENT_METRICS.replace("} 100.0", "} 140.0").replace("} 90.0", "} 110.0")
    summary = agent_summary("http://a", later, HEALTH, rates, now=3.0)
    assert first["components"][0]["rate"] is None
    assert summary["status"] == "ok"
    rows = {(c["kind"], c["name"]): c for c in summary["components"]}
    assert rows[("source", "nginx")]["rate"] == 20.0
    assert rows[("source", "nginx")]["events_total"] == 140.0
    assert rows[("sink", "nginx-kafka")]["rate"] == 10.0
    assert rows[("sink", "nginx-kafka")]["oldest_age"] == 0.5
    assert rows[("channel", "nginx")]["fill"] == 0.25


def test_partition_sizes_take_the_largest_copy():
    text = """\
# TYPE logflume_broker_log_size_bytes gauge
logflume_broker_log_size_bytes{partition="0",topic="t"} 100.0
logflume_broker_log_size_bytes{partition="1",topic="t"} 50.0
"""
    other = text.replace("100.0", "120.0").replace("50.0", "40.0")
    assert partition_sizes([text, other]) == {("t", 0): 120.0, ("t", 1): 50.0}


def test_record_texts_and_pretty_json():
    assert text_of(None, 5) is None
    assert text_of(b"abcdef", 3) == "abc…"
    assert text_of(b"\xff", 5) == "\ufffd"
    assert (
        record_json(b'{"a": [1, {"b": "\xc3\xa9"}]}')
        == '{\n  "a": [\n    1,\n    {\n      "b": "é"\n    }\n  ]\n}'
    )
    for not_pretty in (None, b"", b"42", b'"text"', b"{not json", b"plain line"):
        assert record_json(not_pretty) is None


def test_parse_timestamp():
    assert parse_timestamp("1795935596365") == 1795935596365
    assert parse_timestamp("2026-11-29T07:00:00Z") == 1795935600000
    assert parse_timestamp("2026-11-29T07:00:00") == 1795935600000  # no zone: UTC
    assert parse_timestamp(" 2026-11-29T08:00:00+01:00 ") == 1795935600000
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_timestamp("yesterday")

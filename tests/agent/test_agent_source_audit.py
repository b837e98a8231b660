"""The audit's source tier across the agent as deployed: an agent process tails an
nginx log through the nginx parser and a filter into a kafka sink on a real broker;
`logflume audit` (as an operator runs it) then shows, beside what the sink
delivered, what the source read, filtered out and could not parse. The independent
count is the file the test wrote."""

from datetime import UTC, datetime

import pytest

from testkit.agent import AgentProcess, read_topic
from testkit.procs import wait_until
from tests.sinks.test_kafka_audit_seam import audit

PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      access: {{type: tail, paths: ["{log}"], start_at: beginning, channels: [c],
                add_host: true, persist_interval: 0.05s,
                interceptors: [{{type: nginx}},
                               {{type: regex_filter, pattern: healthcheck, mode: exclude}}]}}
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: kafka, channel: c, topic: access, bootstrap_servers: "{bootstrap}",
          delivery: {delivery}, linger_ms: 2}}
"""


def nginx_line(path: str) -> str:
    now = datetime.now(UTC).strftime("%d/%b/%Y:%H:%M:%S +0000")
    return f'10.0.0.1 - - [{now}] "GET {path} HTTP/1.1" 200 5 "-" "curl"\n'


@pytest.mark.parametrize("delivery", ["at_least_once", "exactly_once"])
def test_the_source_tier_shows_what_was_read_filtered_and_unparsable(tmp_path, broker, delivery):
    log = tmp_path / "access.log"
    lines = [nginx_line(f"/page/{i}") for i in range(5)]
    lines += [nginx_line("/healthcheck") for _ in range(3)]  # parsed, then filtered out
    lines += ["not an access-log line\n", "nor this one\n"]  # unparsable: shipped, flagged
    log.write_text("".join(lines))
    text = PIPELINE.format(log=log, bootstrap=broker.bootstrap, delivery=delivery)
    agent = AgentProcess(tmp_path, text).start()
    try:
        # the lines first (cheap to watch); the audit records travel with them
        shipped = read_topic(broker.bootstrap, "access", lambda msgs: len(msgs) >= 7, 120)
        assert len(shipped) == 7, f"{len(shipped)} of 7 lines shipped"

        def published() -> dict | None:
            _, report = audit(broker.bootstrap, "--from", "1h", "--format", "json")
            tiers = [b["tiers"] for b in report["buckets"]]
            delivered = sum(t["agent"]["count"] for t in tiers if "agent" in t)
            source = [t["agent-source"] for t in tiers if "agent-source" in t]
            read = sum(s["count"] for s in source)
            return report if delivered == 7 and read == 10 else None

        report = wait_until(
            published, 120, "the agent's and its source's counts published", every=1
        )
    finally:
        agent.stop()
    source = [b["tiers"]["agent-source"] for b in report["buckets"] if "agent-source" in b["tiers"]]
    assert sum(s["filtered"] for s in source) == 3
    assert sum(s["unparsable"] for s in source) == 2
    assert {b["topic"] for b in report["buckets"]} == {"access"}
    host = {b["host"] for b in report["buckets"]}
    assert len(host) == 1 and host != {""}  # add_host: this machine's name on both tiers
    # shown, never held: the source tier alone decides no verdict
    assert {b["status"] for b in report["buckets"]} <= {"still open"}

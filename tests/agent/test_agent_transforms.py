"""The web host's transforms in the agent as deployed: an agent process tails an nginx
log through the parser, anonymize_ip (hash, its salt read from a file), strip_query,
fields, sample and rate_limit into a kafka sink on a real broker. The records in the
topic are compared, field by field, with what the test computes from the lines it
wrote; the counters with what each interceptor changed or dropped."""

import calendar
import hashlib
import hmac
import socket
from datetime import UTC, datetime

import orjson

from testkit.agent import AgentProcess, read_topic
from testkit.procs import wait_until

SALT = "a-salt-for-the-test-only-0123456789"
PIPELINE = """
agents:
  a:
    metrics: {{listen: "{{metrics}}"}}
    sources:
      access:
        type: tail
        paths: ["{log}"]
        start_at: beginning
        channels: [c]
        persist_interval: 0.05s
        interceptors:
          - {{type: nginx}}
          - {{type: anonymize_ip, mode: hash, salt: "${{file:{salt}}}"}}
          - {{type: strip_query, fields: [path, referrer]}}
          - {{type: fields, drop: [user_agent, time], rename: {{client: client_id}},
              mask: {{user: "***"}}}}
          - {{type: sample, rate: 2}}
          - {{type: rate_limit, events_per_second: 0.001, burst: 4}}
    channels:
      c: {{type: memory}}
    sinks:
      k: {{type: kafka, channel: c, topic: web, bootstrap_servers: "{bootstrap}", linger_ms: 2}}
"""
UNPARSABLE = "upstream timed out while reading from 198.51.100.23?secret=1"
# (client, user, request, referrer); every other line passes sample, the first 4 of
# those rate_limit: lines 0, 2, 4 and 6 reach the topic
LINES = [
    (
        "203.0.113.57",
        "alice",
        "GET /login?token=s3cret HTTP/1.1",
        "https://example.com/?q=shoes#top",
    ),
    ("203.0.113.58", None, "GET /static/app.js HTTP/1.1", None),
    None,  # UNPARSABLE: travels as it is, raw
    ("198.51.100.7", None, "POST /search?q=me HTTP/1.1", "https://example.com/a"),
    ("unix:", None, "GET /health#probe HTTP/1.1", None),
    ("2001:db8:85a3::7348", "bob", "GET /cart HTTP/2.0", None),
    (
        "2001:DB8:85A3:0::1",
        "carol",
        "GET /checkout?step=2 HTTP/2.0",
        "https://shop.example/cart?id=9",
    ),
    ("192.0.2.1", None, "GET /?utm_source=mail HTTP/1.1", None),
    ("192.0.2.2", None, "GET /about HTTP/1.1", None),
    ("192.0.2.3", None, "GET /contact HTTP/1.1", None),
    ("192.0.2.4", None, "GET /faq?x HTTP/1.1", None),
]


def nginx_line(now: datetime, item) -> str:
    if item is None:
        return UNPARSABLE
    client, user, request, referrer = item
    stamp = now.strftime("%d/%b/%Y:%H:%M:%S +0000")
    return f'{client} - {user or "-"} [{stamp}] "{request}" 200 512 "{referrer or "-"}" "curl/8.5"'


def pseudonym(client: str) -> str:
    """What the documentation promises: HMAC-SHA256 over the address's bytes, keyed
    by the salt, 16 hex digits."""
    family = socket.AF_INET6 if ":" in client else socket.AF_INET
    packed = socket.inet_pton(family, client)
    return hmac.new(SALT.encode(), packed, hashlib.sha256).hexdigest()[:16]


def expected_record(ts: int, item) -> dict:
    client, user, request, referrer = item
    method, path, protocol = request.split(" ")
    return {
        "ts": ts,
        "client_id": client if client == "unix:" else pseudonym(client),
        "user": None if user is None else "***",
        "method": method,
        "path": path.split("?")[0].split("#")[0],
        "protocol": protocol,
        "status": 200,
        "bytes": 512,
        "referrer": None if referrer is None else referrer.split("?")[0].split("#")[0],
        "request_time": None,
        "upstream_response_time": None,
    }


def test_web_host_transforms_end_to_end(tmp_path, broker):
    salt = tmp_path / "ip-salt"
    salt.write_text(SALT + "\n")
    now = datetime.now(UTC).replace(microsecond=0)
    ts = calendar.timegm(now.timetuple()) * 1000
    log = tmp_path / "access.log"
    log.write_text("".join(nginx_line(now, item) + "\n" for item in LINES))
    text = PIPELINE.format(log=log, salt=salt, bootstrap=broker.bootstrap)
    agent = AgentProcess(tmp_path, text).start()

    def counter(name: str, interceptor: int) -> float | None:
        return agent.metric(name, component=f"access.interceptor{interceptor}")

    try:
        # every line through the interceptors (7 dropped), the 4 others acknowledged
        wait_until(
            lambda: (
                agent.metric("logflume_agent_source_events_filtered_total", component="access") == 7
                and agent.metric("logflume_agent_sink_events_out_total", component="k") == 4
            ),
            60,
            "11 lines read, 7 filtered out, 4 delivered",
        )
        shipped = read_topic(broker.bootstrap, "web", lambda msgs: len(msgs) >= 4, 60)
        assert agent.metric("logflume_agent_source_events_in_total", component="access") == 11
        assert counter("logflume_agent_ip_anonymized_total", 1) == 9
        assert counter("logflume_agent_ip_unparsable_total", 1) == 1  # unix:
        assert counter("logflume_agent_query_stripped_total", 2) == 6
        assert counter("logflume_agent_fields_changed_total", 3) == 10  # every parsed line
        assert counter("logflume_agent_sampled_out_total", 4) == 5
        assert counter("logflume_agent_throttled_total", 5) == 2
    finally:
        agent.stop()
    values = [m.value() for m in shipped]
    assert len(values) == 4
    assert orjson.loads(values[0]) == expected_record(ts, LINES[0])
    assert values[1] == UNPARSABLE.encode()  # no record: its body, address and all
    assert orjson.loads(values[2]) == expected_record(ts, LINES[4])
    assert orjson.loads(values[3]) == expected_record(ts, LINES[6])
    # one client, one pseudonym, however its address is written; none is an address
    assert orjson.loads(values[3])["client_id"] == pseudonym("2001:db8:85a3::1")
    assert all(b"203.0.113" not in v and b"s3cret" not in v for v in values)

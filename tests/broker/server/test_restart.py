"""Data, topics and topic configs survive SIGKILL; SIGTERM shuts down cleanly with exit 0."""

from broker.protocol import ApiKey
from tests.broker.server.test_requests import create, records_of
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body


def describe_topic(c: WireClient, name: str) -> dict:
    body = {
        "resources": [{"resource_type": 2, "resource_name": name, "configuration_keys": None}],
        "include_synonyms": False,
        "include_documentation": False,
    }
    res = c.request(ApiKey.DESCRIBE_CONFIGS, 1, body)["results"][0]
    return {e["name"]: e["value"] for e in res["configs"]}


def test_sigkill_keeps_topics_configs_and_acknowledged_data(broker_factory):
    b = broker_factory()
    with WireClient(b.port) as c:
        create(c, "durable", 3, configs={"retention.ms": "86400001", "segment.bytes": "100000"})
        for i in range(50):
            r = c.request(
                ApiKey.PRODUCE,
                8,
                produce_body("durable", batch(b"v%d" % i, b"w%d" % i), partition=i % 3),
            )
            assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
        c.request(ApiKey.PRODUCE, 8, produce_body("auto-made", batch(b"auto")))
    b.kill()
    b.start()
    with WireClient(b.port) as c:
        md = c.request(ApiKey.METADATA, 4, {"topics": None, "allow_auto_topic_creation": False})
        parts = {t["name"]: len(t["partitions"]) for t in md["topics"]}
        assert parts == {"durable": 3, "auto-made": 1}
        cfg = describe_topic(c, "durable")
        assert cfg["retention.ms"] == "86400001" and cfg["segment.bytes"] == "100000"
        values = []
        for p in range(3):
            f = c.request(ApiKey.FETCH, 11, fetch_body("durable", 0, partition=p))
            part = f["responses"][0]["partitions"][0]
            assert part["high_watermark"] == 2 * len(range(p, 50, 3))
            offset = 0
            while offset < part["high_watermark"]:
                got = c.request(ApiKey.FETCH, 11, fetch_body("durable", offset, partition=p))
                recs = records_of(got["responses"][0]["partitions"][0])
                values += recs
                offset += len(recs)
        assert sorted(values) == sorted(
            [b"v%d" % i for i in range(50)] + [b"w%d" % i for i in range(50)]
        )
        r = c.request(ApiKey.PRODUCE, 8, produce_body("durable", batch(b"after")))
        assert r["responses"][0]["partition_responses"][0]["base_offset"] == 2 * 17


def test_sigterm_is_graceful(broker_factory):
    b = broker_factory()
    with WireClient(b.port) as c:
        c.request(ApiKey.PRODUCE, 8, produce_body("graceful", batch(b"x")))
        # A long poll in flight is answered during shutdown, not dropped.
        corr = c.send(ApiKey.FETCH, 11, fetch_body("graceful", 1, max_wait_ms=30000))
        assert b.stop() == 0
        got, body = c.recv(ApiKey.FETCH, 11)
        assert got == corr and body["responses"][0]["partitions"][0]["error_code"] == 0
    assert (b.data_dir / ".kafka_cleanshutdown").exists()
    assert "logs flushed and closed cleanly" in b.log_text()
    b.start()
    with WireClient(b.port) as c:
        f = c.request(ApiKey.FETCH, 11, fetch_body("graceful", 0))
        assert records_of(f["responses"][0]["partitions"][0]) == [b"x"]

"""The broker's answers to each API, over a raw connection with the broker's own codec."""

import time

from broker.protocol import ApiKey, ErrorCode, encode_request
from broker.protocol.records import iter_batches
from tests.broker.server.wire import WireClient, batch, fetch_body, produce_body


def create(
    c: WireClient,
    name: str,
    partitions: int = 1,
    rf: int = -1,
    configs=None,
    validate_only=False,
    version=4,
):
    body = {
        "topics": [
            {
                "name": name,
                "num_partitions": partitions,
                "replication_factor": rf,
                "assignments": [],
                "configs": [{"name": k, "value": v} for k, v in (configs or {}).items()],
            }
        ],
        "timeout_ms": 5000,
        "validate_only": validate_only,
    }
    return c.request(ApiKey.CREATE_TOPICS, version, body)["topics"][0]


def records_of(resp_partition) -> list[bytes]:
    data = bytes(resp_partition["records"] or b"")
    return [r.value for b in iter_batches(data, allow_partial_tail=True) for r in b.records()]


def test_api_versions_above_ours_gets_v0_fallback_then_v3_works(module_broker):
    with WireClient(module_broker.port) as c:
        # A v5 request (newer than the broker): header v2, a body the broker must not parse.
        raw = bytearray(encode_request(ApiKey.API_VERSIONS, 0, 7, "x", {}))
        raw[6:8] = (5).to_bytes(2, "big")
        raw += b"\x00\x00"  # tagged fields the old header lacks; ignored by the broker
        raw[0:4] = (len(raw) - 4).to_bytes(4, "big")
        c.send_raw(bytes(raw))
        corr, body = c.recv(ApiKey.API_VERSIONS, 0)
        assert corr == 7
        assert body["error_code"] == ErrorCode.UNSUPPORTED_VERSION
        ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        assert ranges[ApiKey.API_VERSIONS] == (0, 4)
        body = c.request(
            ApiKey.API_VERSIONS,
            3,
            {"client_software_name": "wire-test", "client_software_version": "1.0"},
        )
        assert body["error_code"] == 0
        ranges = {k["api_key"]: (k["min_version"], k["max_version"]) for k in body["api_keys"]}
        assert ranges[ApiKey.PRODUCE] == (0, 12) and ranges[ApiKey.FETCH] == (0, 17)


def test_metadata_version_quirks_and_auto_create(module_broker):
    with WireClient(module_broker.port) as c:
        assert create(c, "md-a", 2)["error_code"] == 0
        v0 = c.request(ApiKey.METADATA, 0, {"topics": []})
        assert "md-a" in {t["name"] for t in v0["topics"]}
        v1_all = c.request(ApiKey.METADATA, 1, {"topics": None})
        assert "md-a" in {t["name"] for t in v1_all["topics"]}
        assert v1_all["controller_id"] == 0
        v1_none = c.request(ApiKey.METADATA, 1, {"topics": []})
        assert v1_none["topics"] == []
        v8 = c.request(
            ApiKey.METADATA, 8, {"topics": [{"name": "md-a"}], "allow_auto_topic_creation": False}
        )
        assert v8["cluster_id"] and v8["brokers"][0]["port"] == module_broker.port
        (topic,) = v8["topics"]
        assert [p["leader_id"] for p in topic["partitions"]] == [0, 0]
        assert topic["partitions"][0]["isr_nodes"] == [0]
        no_create = c.request(
            ApiKey.METADATA, 4, {"topics": [{"name": "md-new"}], "allow_auto_topic_creation": False}
        )
        assert no_create["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        # the request that auto-creates a topic is answered as Kafka's (no partitions
        # yet), the next one finds it
        body = {"topics": [{"name": "md-new"}], "allow_auto_topic_creation": True}
        auto = c.request(ApiKey.METADATA, 4, body)
        assert auto["topics"][0]["error_code"] == ErrorCode.LEADER_NOT_AVAILABLE
        assert auto["topics"][0]["partitions"] == []
        again = c.request(ApiKey.METADATA, 4, body)
        assert again["topics"][0]["error_code"] == 0
        assert len(again["topics"][0]["partitions"]) == 1
        bad = c.request(ApiKey.METADATA, 1, {"topics": [{"name": "../../etc"}]})
        assert bad["topics"][0]["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION


def test_create_topics_errors(module_broker):
    with WireClient(module_broker.port) as c:
        assert create(c, "ct-ok", 3, configs={"retention.ms": "60000"})["error_code"] == 0
        assert create(c, "ct-ok")["error_code"] == ErrorCode.TOPIC_ALREADY_EXISTS
        assert create(c, "../../etc")["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert create(c, "x" * 250)["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert create(c, "..")["error_code"] == ErrorCode.INVALID_TOPIC_EXCEPTION
        assert create(c, "ct-p", 0)["error_code"] == ErrorCode.INVALID_PARTITIONS
        assert create(c, "ct-rf", 1, rf=2)["error_code"] == ErrorCode.INVALID_REPLICATION_FACTOR
        bad_cfg = create(c, "ct-cfg", configs={"retention.ms": "soon"})
        assert (
            bad_cfg["error_code"] == ErrorCode.INVALID_CONFIG
            and "retention.ms" in bad_cfg["error_message"]
        )
        assert (
            create(c, "ct-cfg", configs={"no.such": "1"})["error_code"] == ErrorCode.INVALID_CONFIG
        )
        assert create(c, "ct-val", validate_only=True)["error_code"] == 0
        md = c.request(ApiKey.METADATA, 1, {"topics": None})
        names = {t["name"] for t in md["topics"]}
        assert "ct-ok" in names and "ct-val" not in names and "ct-cfg" not in names
        assert create(c, "__internal_ok")["error_code"] == 0
    assert not (module_broker.data_dir.parent.parent / "etc").exists()


def test_describe_configs_topic_and_broker(module_broker):
    with WireClient(module_broker.port) as c:
        create(c, "dc-t", 1, configs={"retention.ms": "12345", "cleanup.policy": "compact"})
        body = {
            "resources": [
                {"resource_type": 2, "resource_name": "dc-t", "configuration_keys": None},
                {
                    "resource_type": 4,
                    "resource_name": "0",
                    "configuration_keys": ["num.partitions"],
                },
                {"resource_type": 2, "resource_name": "dc-missing", "configuration_keys": None},
            ],
            "include_synonyms": True,
            "include_documentation": True,
        }
        for version in (0, 1, 3):
            res = c.request(ApiKey.DESCRIBE_CONFIGS, version, body)["results"]
            topic = {e["name"]: e for e in res[0]["configs"]}
            assert topic["retention.ms"]["value"] == "12345"
            assert topic["cleanup.policy"]["value"] == "compact"
            assert topic["segment.bytes"]["value"] == str(1 << 30)
            if version == 0:
                assert topic["retention.ms"]["is_default"] is False
                assert topic["segment.bytes"]["is_default"] is True
            else:
                assert topic["retention.ms"]["config_source"] == 1
                assert topic["segment.bytes"]["config_source"] == 5
                assert topic["retention.ms"]["synonyms"][0]["source"] == 1
            (broker_entry,) = res[1]["configs"]
            assert broker_entry["name"] == "num.partitions" and broker_entry["value"] == "1"
            assert broker_entry["read_only"] is True
            assert res[2]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION


def test_produce_acks_and_fetch_roundtrip(module_broker):
    with WireClient(module_broker.port) as c:
        create(c, "pf", 1)
        r = c.request(ApiKey.PRODUCE, 8, produce_body("pf", batch(b"a", b"b"), acks=1))
        part = r["responses"][0]["partition_responses"][0]
        assert part["error_code"] == 0 and part["base_offset"] == 0
        r = c.request(ApiKey.PRODUCE, 3, produce_body("pf", batch(b"c"), acks=-1))
        assert r["responses"][0]["partition_responses"][0]["base_offset"] == 2
        # acks=0: no response; the next request's answer comes back first.
        c.send(ApiKey.PRODUCE, 8, produce_body("pf", batch(b"d"), acks=0))
        md = c.request(ApiKey.METADATA, 1, {"topics": [{"name": "pf"}]})
        assert md["topics"][0]["error_code"] == 0
        for version in (4, 11):
            f = c.request(ApiKey.FETCH, version, fetch_body("pf", 1))
            p = f["responses"][0]["partitions"][0]
            assert p["error_code"] == 0
            assert p["high_watermark"] == 4 and p["last_stable_offset"] == 4
            assert records_of(p) == [
                b"a",
                b"b",
                b"c",
                b"d",
            ]  # whole first batch (offset 1 inside it)
            if version == 11:
                assert p["preferred_read_replica"] == -1 and p["log_start_offset"] == 0
        f = c.request(ApiKey.FETCH, 11, fetch_body("pf", 99))
        assert f["responses"][0]["partitions"][0]["error_code"] == ErrorCode.OFFSET_OUT_OF_RANGE
        unknown = c.request(ApiKey.FETCH, 11, fetch_body("pf-nope", 0))
        assert (
            unknown["responses"][0]["partitions"][0]["error_code"]
            == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        )


def test_fetch_first_batch_whole_even_above_max_bytes(module_broker):
    with WireClient(module_broker.port) as c:
        create(c, "kip74", 1)
        big = batch(b"x" * 5000)
        c.request(ApiKey.PRODUCE, 8, produce_body("kip74", big))
        c.request(ApiKey.PRODUCE, 8, produce_body("kip74", batch(b"y")))
        f = c.request(ApiKey.FETCH, 11, fetch_body("kip74", 0, max_bytes=100))
        assert records_of(f["responses"][0]["partitions"][0]) == [b"x" * 5000]


def test_produce_errors(broker_factory):
    b = broker_factory(settings={"auto.create.topics.enable": "false", "message.max.bytes": "2000"})
    with WireClient(b.port) as c:
        create(c, "pe", 1)
        create(c, "pe-isr2", 1, configs={"min.insync.replicas": "2"})
        create(c, "pe-small", 1, configs={"max.message.bytes": "200"})

        def code(topic, records, acks=1):
            r = c.request(ApiKey.PRODUCE, 8, produce_body(topic, records, acks=acks))
            return r["responses"][0]["partition_responses"][0]["error_code"]

        good = batch(b"ok")
        corrupt = bytearray(good)
        corrupt[-1] ^= 0xFF
        assert code("pe", bytes(corrupt)) == ErrorCode.CORRUPT_MESSAGE
        assert code("pe", good[:-3]) == ErrorCode.CORRUPT_MESSAGE
        assert code("pe", batch(b"z" * 3000)) == ErrorCode.MESSAGE_TOO_LARGE
        assert code("pe-small", batch(b"z" * 300)) == ErrorCode.MESSAGE_TOO_LARGE
        assert code("pe-isr2", good, acks=-1) == ErrorCode.NOT_ENOUGH_REPLICAS
        assert code("pe-isr2", good, acks=1) == 0
        assert code("pe-missing", good) == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
        assert code("pe", good, acks=2) == ErrorCode.INVALID_REQUIRED_ACKS
        assert code("pe", good) == 0
        f = c.request(ApiKey.FETCH, 11, fetch_body("pe", 0))
        assert records_of(f["responses"][0]["partitions"][0]) == [b"ok"]
        # acks=0 with an error: the broker closes the connection.
        c.send(ApiKey.PRODUCE, 8, produce_body("pe", bytes(corrupt), acks=0))
        assert c.is_closed_by_peer()


def test_long_poll_fetch_is_woken_by_append_and_keeps_order(module_broker):
    with WireClient(module_broker.port) as consumer, WireClient(module_broker.port) as producer:
        create(producer, "lp", 1)
        fetch_corr = consumer.send(ApiKey.FETCH, 11, fetch_body("lp", 0, max_wait_ms=20000))
        md_corr = consumer.send(ApiKey.METADATA, 1, {"topics": []})
        time.sleep(0.3)
        producer.request(ApiKey.PRODUCE, 8, produce_body("lp", batch(b"wake")))
        start = time.monotonic()
        corr, body = consumer.recv(ApiKey.FETCH, 11)
        assert corr == fetch_corr  # the fetch answers first although metadata was ready first
        assert time.monotonic() - start < 10
        assert records_of(body["responses"][0]["partitions"][0]) == [b"wake"]
        corr, _ = consumer.recv(ApiKey.METADATA, 1)
        assert corr == md_corr


def test_long_poll_fetch_expires_empty(module_broker):
    with WireClient(module_broker.port) as c:
        create(c, "lp-empty", 1)
        f = c.request(ApiKey.FETCH, 11, fetch_body("lp-empty", 0, max_wait_ms=200))
        p = f["responses"][0]["partitions"][0]
        assert p["error_code"] == 0 and records_of(p) == [] and p["high_watermark"] == 0


def test_list_offsets(module_broker):
    with WireClient(module_broker.port) as c:
        create(c, "lo", 1)
        for v in (b"1", b"2", b"3"):
            c.request(ApiKey.PRODUCE, 8, produce_body("lo", batch(v)))

        def ask(version, ts):
            body = {
                "replica_id": -1,
                "isolation_level": 0,
                "topics": [
                    {
                        "name": "lo",
                        "partitions": [
                            {
                                "partition_index": 0,
                                "current_leader_epoch": -1,
                                "timestamp": ts,
                                "max_num_offsets": 1,
                            }
                        ],
                    }
                ],
            }
            return c.request(ApiKey.LIST_OFFSETS, version, body)["topics"][0]["partitions"][0]

        assert ask(0, -1)["old_style_offsets"] == [3]
        assert ask(0, -2)["old_style_offsets"] == [0]
        assert ask(5, -1)["offset"] == 3
        assert ask(1, -2)["offset"] == 0
        by_ts = ask(4, 0)
        assert by_ts["offset"] == 0 and by_ts["timestamp"] > 0
        assert ask(4, 2**62)["offset"] == -1


def test_delete_topics(module_broker):
    with WireClient(module_broker.port) as c:
        create(c, "del-me", 2)
        c.request(ApiKey.PRODUCE, 8, produce_body("del-me", batch(b"x")))
        r = c.request(
            ApiKey.DELETE_TOPICS, 3, {"topic_names": ["del-me", "del-nope"], "timeout_ms": 5000}
        )
        codes = {x["name"]: x["error_code"] for x in r["responses"]}
        assert codes == {"del-me": 0, "del-nope": ErrorCode.UNKNOWN_TOPIC_OR_PARTITION}
        md = c.request(
            ApiKey.METADATA, 4, {"topics": [{"name": "del-me"}], "allow_auto_topic_creation": False}
        )
        assert md["topics"][0]["error_code"] == ErrorCode.UNKNOWN_TOPIC_OR_PARTITION
    assert not list(module_broker.data_dir.glob("del-me-*"))


def test_sasl_on_a_plaintext_listener_is_an_illegal_state(module_broker):
    """As Kafka answers it: the listener does not authenticate."""
    with WireClient(module_broker.port) as c:
        r = c.request(ApiKey.SASL_HANDSHAKE, 1, {"mechanism": "PLAIN"})
        assert r == {"error_code": ErrorCode.ILLEGAL_SASL_STATE, "mechanisms": []}
        r = c.request(ApiKey.SASL_AUTHENTICATE, 0, {"auth_bytes": b"x"})
        assert r["error_code"] == ErrorCode.ILLEGAL_SASL_STATE
        # Still usable afterwards.
        assert c.request(ApiKey.API_VERSIONS, 0, {})["error_code"] == 0


def test_unsupported_version_closes_connection(module_broker):
    with WireClient(module_broker.port) as c:
        raw = bytearray(encode_request(ApiKey.METADATA, 1, 1, "x", {"topics": []}))
        raw[6:8] = (40).to_bytes(2, "big")
        c.send_raw(bytes(raw))
        assert c.is_closed_by_peer()


def test_auto_create_uses_num_partitions_and_config_file(broker_factory, tmp_path):
    conf = tmp_path / "server.properties"
    conf.write_text("# broker settings\nnum.partitions = 3\nlog.retention.hours=2\n")
    b = broker_factory(args=["--config", str(conf)])
    with WireClient(b.port) as c:
        r = c.request(ApiKey.PRODUCE, 8, produce_body("auto3", batch(b"x")))
        assert r["responses"][0]["partition_responses"][0]["error_code"] == 0
        md = c.request(ApiKey.METADATA, 1, {"topics": [{"name": "auto3"}]})
        assert len(md["topics"][0]["partitions"]) == 3
        body = {
            "resources": [
                {
                    "resource_type": 2,
                    "resource_name": "auto3",
                    "configuration_keys": ["retention.ms"],
                }
            ],
            "include_synonyms": True,
            "include_documentation": False,
        }
        (entry,) = c.request(ApiKey.DESCRIBE_CONFIGS, 1, body)["results"][0]["configs"]
        assert entry["value"] == str(2 * 3_600_000)
        assert entry["config_source"] == 4  # static broker config
        assert [s["name"] for s in entry["synonyms"]] == ["log.retention.hours", "log.retention.ms"]

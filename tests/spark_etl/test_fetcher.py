"""The source's Fetch requests (spark_etl/source/fetcher.py) against real broker
processes: raw record sets as the broker stored them, a fetch asked ahead and the
answers nobody waits for any more, the aborted transactions and
last stable offset of read_committed, OFFSET_OUT_OF_RANGE, a broker restarting
mid-read, every security protocol of the secured broker, and the settings it
refuses."""

import struct
import threading
import time

import pytest
from confluent_kafka import Producer

from common import certs
from spark_etl.source import fetcher
from testkit.kafka import create_topic, produce
from testkit.procs import BrokerProcess
from testkit.secured import start_secured_broker

PASSWORD = "fetch-secret"


@pytest.fixture(autouse=True)
def pooled_fetchers_closed():
    """The pool is this (pytest's) process's: close what a test left in it."""
    yield
    fetcher.close_pooled()


@pytest.fixture(scope="module")
def bk(tmp_path_factory):
    b = BrokerProcess(tmp_path_factory.mktemp("fetch") / "broker").start()
    yield b
    b.stop()


def batches(records: bytes) -> list[tuple[int, int, int]]:
    """(base offset, last offset, attributes) of each complete batch of a record set."""
    out, pos = [], 0
    while pos + 61 <= len(records):
        base, length = struct.unpack_from(">qi", records, pos)
        if pos + 12 + length > len(records):
            break
        (attributes,) = struct.unpack_from(">h", records, pos + 21)
        (last_delta,) = struct.unpack_from(">i", records, pos + 23)
        out.append((base, base + last_delta, attributes))
        pos += 12 + length
    return out


def read_all(source: fetcher.Fetcher, tp, start: int, end: int, committed=True) -> list:
    """Every batch of [start, end), fetch after fetch."""
    out, pos = [], start
    while pos < end:
        data = source.fetch(tp, pos, committed, time.monotonic() + 30)
        assert data.error == fetcher.NONE
        got = batches(data.records)
        assert got, f"no complete batch at {pos}"
        out += got
        pos = got[-1][1] + 1
    return out


def test_raw_record_sets_from_the_leader(bk):
    create_topic(bk.bootstrap, "raw", 2)
    produce(bk.bootstrap, "raw", [b"x" * 100] * 300, partition=1)
    with fetcher.borrowed({"bootstrap.servers": bk.bootstrap}) as source:
        data = source.fetch(("raw", 1), 0, True, time.monotonic() + 30)
        assert isinstance(data.records, bytes)
        assert (data.high_watermark, data.last_stable_offset, data.log_start_offset) == (
            300,
            300,
            0,
        )
        assert data.aborted == []
        got = read_all(source, ("raw", 1), 0, 300)
        assert got[0][0] == 0 and got[-1][1] == 299
        # from the middle of a batch: the broker answers from that batch's start
        mid = source.fetch(("raw", 1), 150, False, time.monotonic() + 30)
        first = batches(mid.records)[0]
        assert first[0] <= 150 <= first[1] and mid.aborted is None
        empty = source.fetch(("raw", 0), 0, True, time.monotonic() + 30)
        assert (empty.records, empty.high_watermark) == (b"", 0)


def test_the_pool_hands_back_the_same_fetcher(bk):
    conf = {"bootstrap.servers": bk.bootstrap}
    with fetcher.borrowed(conf) as first:
        pass
    with fetcher.borrowed(conf) as second:
        assert second is first
    with pytest.raises(RuntimeError), fetcher.borrowed(conf) as failed:
        raise RuntimeError("a read failed")
    with fetcher.borrowed(conf) as third:
        assert third is not failed


def in_flight(source: fetcher.Fetcher) -> int:
    """Requests sent on the fetcher's connections whose answers are not read."""
    return sum(len(conn._in_flight) for conn in source._conns.values())


def test_a_fetch_asked_ahead_is_answered_to_the_fetch_that_asks_for_it(bk):
    create_topic(bk.bootstrap, "ahead", 1)
    for _ in range(3):  # a batch each
        produce(bk.bootstrap, "ahead", [b"y" * 100] * 100)
    tp = ("ahead", 0)
    with fetcher.borrowed({"bootstrap.servers": bk.bootstrap}) as source:
        first = source.fetch(tp, 0, False, time.monotonic() + 30)
        nxt = batches(first.records)[0][1] + 1
        plain = source.fetch(tp, nxt, False, time.monotonic() + 30)
        source.prefetch(tp, nxt, False)
        assert in_flight(source) == 1
        ahead = source.fetch(tp, nxt, False, time.monotonic() + 30)
        assert ahead == plain and batches(ahead.records)[0][0] == nxt == 100
        assert in_flight(source) == 0
        # the same offset asked ahead in read_uncommitted is not a read_committed answer
        source.prefetch(tp, nxt, False)
        assert batches(source.fetch(tp, nxt, True, time.monotonic() + 30).records)
        assert in_flight(source) == 0


def test_an_answer_nobody_waits_for_any_more_is_dropped(bk):
    create_topic(bk.bootstrap, "dropped", 1)
    produce(bk.bootstrap, "dropped", [b"z" * 100] * 300)
    tp = ("dropped", 0)
    with fetcher.borrowed({"bootstrap.servers": bk.bootstrap}) as source:
        source.fetch(tp, 0, False, time.monotonic() + 30)
        source.prefetch(tp, 0, False)
        source.prefetch(tp, 100, False)
        got = batches(source.fetch(tp, 299, False, time.monotonic() + 30).records)
        assert got[0][0] <= 299 <= got[0][1]
        assert in_flight(source) == 0
        source.refresh_metadata("dropped")  # the connection is in step again
        assert batches(source.fetch(tp, 0, False, time.monotonic() + 30).records)[0][0] == 0


def test_nothing_is_asked_ahead_of_a_partition_without_a_known_leader(bk):
    with fetcher.borrowed({"bootstrap.servers": bk.bootstrap}) as source:
        source.prefetch(("unknown", 0), 0, False)
        assert in_flight(source) == 0


def test_offset_out_of_range(bk):
    create_topic(bk.bootstrap, "oor", 1)
    produce(bk.bootstrap, "oor", [b"a", b"b"])
    with fetcher.borrowed({"bootstrap.servers": bk.bootstrap}) as source:
        data = source.fetch(("oor", 0), 10, True, time.monotonic() + 30)
        assert data.error == fetcher.OFFSET_OUT_OF_RANGE


def test_aborted_transactions_and_last_stable_offset(bk):
    create_topic(bk.bootstrap, "fetch-txn", 1)
    producer = Producer({"bootstrap.servers": bk.bootstrap, "transactional.id": "fetch-test"})
    producer.init_transactions(30)
    producer.begin_transaction()
    producer.produce("fetch-txn", b"a0", partition=0)
    producer.flush(30)
    producer.abort_transaction(30)  # a0 at 0, its abort marker at 1
    producer.begin_transaction()
    producer.produce("fetch-txn", b"c0", partition=0)
    producer.commit_transaction(30)  # c0 at 2, its commit marker at 3
    producer.begin_transaction()
    producer.produce("fetch-txn", b"o0", partition=0)  # open: o0 at 4
    producer.flush(30)
    try:
        with fetcher.borrowed({"bootstrap.servers": bk.bootstrap}) as source:
            committed = source.fetch(("fetch-txn", 0), 0, True, time.monotonic() + 30)
            assert (committed.high_watermark, committed.last_stable_offset) == (5, 4)
            assert committed.aborted is not None and len(committed.aborted) == 1
            assert committed.aborted[0][1] == 0
            # read_committed stops at the last stable offset; markers are batches too
            assert [b[:2] for b in batches(committed.records)] == [(0, 0), (1, 1), (2, 2), (3, 3)]
            assert batches(committed.records)[1][2] & 0x20  # the control flag
            everything = source.fetch(("fetch-txn", 0), 0, False, time.monotonic() + 30)
            assert everything.aborted is None
            assert batches(everything.records)[-1][:2] == (4, 4)
    finally:
        producer.abort_transaction(30)


def test_a_broker_restart_mid_read_is_waited_for(tmp_path):
    b = BrokerProcess(tmp_path / "broker").start()
    try:
        create_topic(b.bootstrap, "restart", 1)
        produce(b.bootstrap, "restart", [b"r%d" % i for i in range(100)])
        with fetcher.borrowed({"bootstrap.servers": b.bootstrap}) as source:
            assert batches(source.fetch(("restart", 0), 0, True, time.monotonic() + 30).records)
            b.stop()
            restarting = threading.Timer(1.0, b.start)
            restarting.start()
            try:
                data = source.fetch(("restart", 0), 0, True, time.monotonic() + 60)
            finally:
                restarting.join()
            assert data.high_watermark == 100 and batches(data.records)[0][0] == 0
    finally:
        b.stop()


def test_a_broker_gone_for_good_times_out_naming_the_partition(tmp_path):
    b = BrokerProcess(tmp_path / "broker").start()
    try:
        create_topic(b.bootstrap, "gone", 1)
        with fetcher.borrowed({"bootstrap.servers": b.bootstrap}) as source:
            source.fetch(("gone", 0), 0, True, time.monotonic() + 30)
            b.stop()
            with pytest.raises(TimeoutError, match="gone-0 at offset 0"):
                source.fetch(("gone", 0), 0, True, time.monotonic() + 1)
    finally:
        b.stop()


def test_a_topic_that_does_not_exist_is_waited_for_then_named(bk):
    with fetcher.borrowed({"bootstrap.servers": bk.bootstrap}) as source:
        # (and the Metadata requests do not create it)
        with pytest.raises(TimeoutError, match="no-such-topic-0 .*UNKNOWN_TOPIC_OR_PARTITION"):
            source.fetch(("no-such-topic", 0), 0, True, time.monotonic() + 1)
    assert "no-such-topic" not in _topics(bk)


def _topics(bk) -> set:
    from confluent_kafka.admin import AdminClient

    return set(AdminClient({"bootstrap.servers": bk.bootstrap}).list_topics(timeout=10).topics)


@pytest.fixture(scope="module")
def secured(tmp_path_factory):
    s = start_secured_broker(tmp_path_factory.mktemp("fetch-sec"), {"spark": PASSWORD})
    create_topic(s.plain, "secret", 1)
    produce(s.plain, "secret", [b"s%d" % i for i in range(50)])
    yield s
    s.stop()


def _secured_conf(secured, protocol, password=PASSWORD, mechanism="SCRAM-SHA-512"):
    bootstrap = {
        "SASL_SSL": secured.sasl_ssl,
        "SSL": secured.ssl,
        "SASL_PLAINTEXT": secured.sasl_plaintext,
    }[protocol]
    conf = {"bootstrap.servers": bootstrap, "security.protocol": protocol.lower()}
    if protocol.startswith("SASL_"):
        conf |= {"sasl.mechanism": mechanism, "sasl.username": "spark", "sasl.password": password}
    if protocol.endswith("SSL"):
        conf["ssl.ca.location"] = str(secured.ca)
    return conf


@pytest.mark.parametrize("protocol", ["SASL_SSL", "SSL", "SASL_PLAINTEXT"])
def test_secured_listeners(secured, protocol):
    with fetcher.borrowed(_secured_conf(secured, protocol)) as source:
        got = read_all(source, ("secret", 0), 0, 50)
        assert got[-1][1] == 49


def test_a_refused_login_says_so_at_once(secured):
    conf = _secured_conf(secured, "SASL_SSL", password="wrong")
    with pytest.raises(fetcher.FetchError, match="login as 'spark': SASL_AUTHENTICATION_FAILED"):
        with fetcher.borrowed(conf) as source:
            source.fetch(("secret", 0), 0, True, time.monotonic() + 60)


def test_a_mechanism_the_broker_does_not_offer_says_so_at_once(secured):
    conf = _secured_conf(secured, "SASL_SSL", mechanism="PLAIN")
    with pytest.raises(fetcher.FetchError, match="offers SCRAM-SHA-512.*UNSUPPORTED_SASL"):
        with fetcher.borrowed(conf) as source:
            source.fetch(("secret", 0), 0, True, time.monotonic() + 60)


def test_a_certificate_it_cannot_trust_says_so_at_once(secured, tmp_path):
    conf = _secured_conf(secured, "SSL")
    conf["ssl.ca.location"] = str(certs.write_ca(tmp_path, certs.new_ca()))
    with pytest.raises(fetcher.FetchError, match="certificate verify failed"):
        with fetcher.borrowed(conf) as source:
            source.fetch(("secret", 0), 0, True, time.monotonic() + 60)


@pytest.mark.parametrize(
    "extra, named",
    [
        ({"security.protocol": "sasl_ssl", "sasl.mechanism": "GSSAPI"}, "sasl.mechanism GSSAPI"),
        ({"security.protocol": "sasl_ssl", "sasl.mechanism": "OAUTHBEARER"}, "OAUTHBEARER"),
        ({"security.protocol": "sasl_plaintext"}, "sasl.mechanism GSSAPI"),
        ({"security.protocol": "kerberos"}, "security.protocol kerberos"),
        ({"ssl.keystore.location": "/k.p12"}, "ssl.keystore.location"),
        ({"ssl.ca.pem": "-----BEGIN"}, "ssl.ca.pem"),
    ],
)
def test_settings_it_cannot_honour_are_named(extra, named):
    with pytest.raises(ValueError, match=named):
        fetcher.check_settings({"bootstrap.servers": "127.0.0.1:9", **extra})


def test_an_authorization_failure_is_not_retried(tmp_path):
    """A user without ACLs on the topic: TOPIC_AUTHORIZATION_FAILED at once, not a
    wait for a leader until the deadline."""
    settings = {
        "authorizer.class.name": "kafka.security.authorizer.AclAuthorizer",
        "allow.everyone.if.no.acl.found": "false",
        "super.users": "User:ANONYMOUS",  # the PLAINTEXT listener: the test's own setup
    }
    s = start_secured_broker(tmp_path, {"spark": PASSWORD}, settings)
    try:
        create_topic(s.plain, "locked", 1)
        produce(s.plain, "locked", [b"x"])
        with pytest.raises(fetcher.FetchError, match="TOPIC_AUTHORIZATION_FAILED"):
            with fetcher.borrowed(_secured_conf(s, "SASL_PLAINTEXT")) as source:
                source.fetch(("locked", 0), 0, True, time.monotonic() + 60)
    finally:
        s.stop()

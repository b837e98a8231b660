"""`logflume certs` then `logflume broker --config`: the secured single node of the
README in two commands, used by a librdkafka client and by `logflume topics` with the
printed client properties."""

import stat
import subprocess
import sys

from confluent_kafka import Consumer, Producer, TopicPartition
from cryptography import x509

from common.ports import free_port
from testkit.procs import BrokerProcess


def _props(path) -> dict[str, str]:
    lines = [ln for ln in path.read_text().splitlines() if ln and not ln.startswith("#")]
    return dict(ln.split("=", 1) for ln in lines)


def test_certs_then_broker_serves_mutual_tls(tmp_path):
    port = free_port()
    d = tmp_path / "tls"
    printed = subprocess.run(
        [sys.executable, "-m", "logflume", "certs", str(d), "--client", "web1"]
        + ["--host", "broker1.example", "--listen", f"127.0.0.1:{port}"],
        capture_output=True,
        text=True,
        check=True,
    ).stdout
    broker_props = _props(d / "server.properties")
    rdkafka_props = _props(d / "librdkafka.properties")
    assert f"listeners=SSL://127.0.0.1:{port}" in printed  # and printed, for a copy-paste
    for name in ("ca.key", "broker.pem", "broker.key", "web1.pem", "web1.key"):
        assert stat.S_IMODE((d / name).stat().st_mode) == 0o600, name
    cert = x509.load_pem_x509_certificate((d / "broker.crt").read_bytes())
    san = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert set(san.get_values_for_type(x509.DNSName)) == {"localhost", "broker1.example"}
    assert [str(ip) for ip in san.get_values_for_type(x509.IPAddress)] == ["127.0.0.1"]
    assert broker_props["ssl.client.auth"] == "required"

    config = d / "server.properties"
    # (listeners repeated as a setting only so that testkit passes no --listen)
    only = {"listeners": broker_props["listeners"]}
    broker = BrokerProcess(tmp_path / "data", settings=only, args=["--config", str(config)])
    broker.start()
    try:
        conf = {"bootstrap.servers": f"127.0.0.1:{port}", **rdkafka_props}
        producer = Producer(conf)
        producer.produce("secured", b"hello over mutual TLS")
        assert producer.flush(15) == 0
        consumer = Consumer({**conf, "group.id": "unused"})
        assert consumer.get_watermark_offsets(TopicPartition("secured", 0), timeout=10) == (0, 1)
        consumer.close()
        client = d / "client.properties"
        listed = subprocess.run(
            [sys.executable, "-m", "logflume", "topics", "--list"]
            + ["--bootstrap-server", f"127.0.0.1:{port}", "--command-config", str(client)],
            capture_output=True,
            text=True,
            timeout=30,
        )
        assert listed.returncode == 0, listed.stderr
        assert "secured" in listed.stdout.split()
    finally:
        broker.stop()

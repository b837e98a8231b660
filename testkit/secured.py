"""A broker with a PLAINTEXT listener (for the test's own setup and checks), a
SASL_SSL one (SCRAM-SHA-512, a trial CA from common/certs.py), with SCRAM users, and
an SSL and a SASL_PLAINTEXT one for the tests that cover each security protocol."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialAlteration,
    UserScramCredentialUpsertion,
)

from common import certs
from common.ports import free_port, wait_for_port
from testkit.procs import BrokerProcess


@dataclasses.dataclass
class SecuredBroker:
    broker: BrokerProcess
    plain: str  # bootstrap of the PLAINTEXT listener
    sasl_ssl: str  # bootstrap of the SASL_SSL listener
    ca: Path  # PEM of the CA that signed the broker's certificate
    ssl: str  # bootstrap of the SSL listener
    sasl_plaintext: str  # bootstrap of the SASL_PLAINTEXT listener

    def java_properties(self, user: str, password: str, protocol: str = "SASL_SSL") -> str:
        """A Kafka client properties file's text for `user` over `protocol` (SASL_SSL,
        SSL: no login, SASL_PLAINTEXT: no TLS)."""
        text = f"security.protocol={protocol}\n"
        if protocol.startswith("SASL_"):
            jaas = (
                "org.apache.kafka.common.security.scram.ScramLoginModule required "
                f'username="{user}" password="{password}";'
            )
            text += f"sasl.mechanism=SCRAM-SHA-512\nsasl.jaas.config={jaas}\n"
        if protocol.endswith("SSL"):
            text += f"ssl.truststore.location={self.ca}\nssl.truststore.type=PEM\n"
        return text

    def stop(self) -> None:
        self.broker.stop()


def start_secured_broker(
    root: Path, users: dict[str, str], settings: dict | None = None
) -> SecuredBroker:
    """Start it under `root` with SCRAM-SHA-512 `users` {name: password} and the
    broker `settings` on top of its own."""
    ca = certs.new_ca()
    ca_file = certs.write_ca(root / "certs", ca)
    broker_pem = certs.write_keystore(
        root / "certs",
        "broker",
        certs.issue(ca, "localhost", hosts=["localhost", "127.0.0.1"], server=True),
    )
    plain, sasl_ssl, tls, sasl_plain = (free_port() for _ in range(4))
    settings = {
        **(settings or {}),
        "listeners": (
            f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl},"
            f"SSL://127.0.0.1:{tls},SASL_PLAINTEXT://127.0.0.1:{sasl_plain}"
        ),
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(broker_pem),
        "group.initial.rebalance.delay.ms": 0,
    }
    broker = BrokerProcess(root / "data", port=plain, settings=settings).start()
    for port in (sasl_ssl, tls, sasl_plain):
        wait_for_port(port, proc=broker.proc)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upserts: list[UserScramCredentialAlteration] = [
        UserScramCredentialUpsertion(u, info, pw.encode()) for u, pw in users.items()
    ]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(10)
    return SecuredBroker(
        broker,
        f"127.0.0.1:{plain}",
        f"127.0.0.1:{sasl_ssl}",
        ca_file,
        f"127.0.0.1:{tls}",
        f"127.0.0.1:{sasl_plain}",
    )

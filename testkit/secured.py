"""A broker with a PLAINTEXT listener (for the test's own setup and checks) and a
SASL_SSL one (SCRAM-SHA-512, a trial CA from common/certs.py), with SCRAM users."""

from __future__ import annotations

import dataclasses
from pathlib import Path

from confluent_kafka.admin import (
    AdminClient,
    ScramCredentialInfo,
    ScramMechanism,
    UserScramCredentialUpsertion,
)

from common import certs
from testkit.ports import free_port
from testkit.procs import BrokerProcess, wait_for_port


@dataclasses.dataclass
class SecuredBroker:
    broker: BrokerProcess
    plain: str  # bootstrap of the PLAINTEXT listener
    sasl_ssl: str  # bootstrap of the SASL_SSL listener
    ca: Path  # PEM of the CA that signed the broker's certificate

    def java_properties(self, user: str, password: str) -> str:
        """A Kafka client properties file's text for `user` over SASL_SSL."""
        jaas = (
            "org.apache.kafka.common.security.scram.ScramLoginModule required "
            f'username="{user}" password="{password}";'
        )
        return (
            "security.protocol=SASL_SSL\n"
            "sasl.mechanism=SCRAM-SHA-512\n"
            f"sasl.jaas.config={jaas}\n"
            f"ssl.truststore.location={self.ca}\n"
            "ssl.truststore.type=PEM\n"
        )

    def stop(self) -> None:
        self.broker.stop()


def start_secured_broker(root: Path, users: dict[str, str]) -> SecuredBroker:
    """Start it under `root` with SCRAM-SHA-512 `users` {name: password}."""
    ca = certs.new_ca()
    ca_file = certs.write_ca(root / "certs", ca)
    broker_pem = certs.write_keystore(
        root / "certs",
        "broker",
        certs.issue(ca, "localhost", hosts=["localhost", "127.0.0.1"], server=True),
    )
    plain, sasl_ssl = free_port(), free_port()
    settings = {
        "listeners": f"PLAINTEXT://127.0.0.1:{plain},SASL_SSL://127.0.0.1:{sasl_ssl}",
        "sasl.enabled.mechanisms": "SCRAM-SHA-512",
        "ssl.keystore.type": "PEM",
        "ssl.keystore.location": str(broker_pem),
        "group.initial.rebalance.delay.ms": 0,
    }
    broker = BrokerProcess(root / "data", port=plain, settings=settings).start()
    wait_for_port(sasl_ssl, proc=broker.proc)
    admin = AdminClient({"bootstrap.servers": f"127.0.0.1:{plain}"})
    info = ScramCredentialInfo(ScramMechanism.SCRAM_SHA_512, 4096)
    upserts = [UserScramCredentialUpsertion(u, info, pw.encode()) for u, pw in users.items()]
    for future in admin.alter_user_scram_credentials(upserts).values():
        future.result(10)
    return SecuredBroker(broker, f"127.0.0.1:{plain}", f"127.0.0.1:{sasl_ssl}", ca_file)

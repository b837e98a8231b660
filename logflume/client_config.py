"""How the client commands (topics, configs, groups, produce, consume) connect:
`--bootstrap-server` and `--command-config FILE`, as Kafka's tools take them.

The file holds Kafka *Java* client properties, the file an operator already passes
to kafka-topics.sh (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
`ssl.truststore.location` ...). The commands use librdkafka, so the Java-only
settings are translated: the username and password of a PLAIN or SCRAM
`sasl.jaas.config`, PEM trust and key stores (`ssl.truststore.*`,
`ssl.keystore.*` of type PEM, or PKCS12 key stores, which librdkafka reads too):
common/kafka_properties.py, which the Spark data source shares. JKS stores cannot
be read by librdkafka: they are refused with the way out. Every other key goes to
librdkafka as it is; one it does not know is an error that names it.
"""

from __future__ import annotations

import javaproperties

from common.kafka_properties import PropertiesError as CommandConfigError
from common.kafka_properties import translate


class Quiet:
    """A logger for librdkafka that drops its chatter (connection refused ...): the
    commands report what failed themselves."""

    def log(self, *args, **kwargs) -> None:
        return None

    def __getattr__(self, name):
        return self.log


def add_arguments(parser) -> None:
    parser.add_argument(
        "--bootstrap-server",
        required=True,
        metavar="HOST:PORT",
        help="broker(s) to connect to first, comma-separated",
    )
    parser.add_argument(
        "--command-config",
        metavar="FILE",
        help="Kafka client properties (security.protocol, sasl.*, ssl.*), as for Kafka's tools",
    )


__all__ = [
    "CommandConfigError",
    "add_arguments",
    "admin_client",
    "client_config",
    "describe_error",
    "read",
    "translate",
]


def read(path: str) -> dict[str, str]:
    """The properties of a --command-config file. Raises CommandConfigError."""
    try:
        with open(path, "rb") as f:
            return javaproperties.load(f)
    except OSError as e:
        raise CommandConfigError(f"--command-config {path}: {e.strerror}") from None


def client_config(args, **settings) -> dict:
    """librdkafka settings for `args` (bootstrap servers, the translated
    --command-config), then `settings`. Raises CommandConfigError."""
    conf = {"bootstrap.servers": args.bootstrap_server, "logger": Quiet()}
    if args.command_config:
        conf |= translate(read(args.command_config))
    return conf | settings


def admin_client(args):
    """A confluent-kafka AdminClient for `args` (client_config, with the command's
    --timeout-ms as its socket timeout). Raises CommandConfigError, KafkaException or
    ValueError; describe_error() words them."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(args, **{"socket.timeout.ms": args.timeout_ms}))


def describe_error(exc: Exception) -> str:
    """The message of a confluent-kafka exception (its KafkaError's text)."""
    err = exc.args[0] if exc.args else exc
    return err.str() if hasattr(err, "str") else str(err)

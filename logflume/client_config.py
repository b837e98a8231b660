"""How the client commands (topics, configs, groups, produce, consume) connect:
`--bootstrap-server` and `--command-config FILE`, as Kafka's tools take them.

The file holds Kafka *Java* client properties, the file an operator already passes
to kafka-topics.sh (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
`ssl.truststore.location` ...). The commands use librdkafka, so the Java-only
settings are translated: the username and password of a PLAIN or SCRAM
`sasl.jaas.config`, PEM trust and key stores (`ssl.truststore.*`,
`ssl.keystore.*` of type PEM, or PKCS12 key stores, which librdkafka reads too).
JKS stores cannot be read by librdkafka: they are refused with the way out. Every
other key goes to librdkafka as it is; one it does not know is an error that names it.
"""

from __future__ import annotations

import re

import javaproperties


class CommandConfigError(ValueError):
    """A --command-config file that cannot be used; the message names the key."""


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


def client_config(args, **settings) -> dict:
    """librdkafka settings for `args` (bootstrap servers, the translated
    --command-config), then `settings`. Raises CommandConfigError."""
    conf = {"bootstrap.servers": args.bootstrap_server, "logger": Quiet()}
    if args.command_config:
        try:
            with open(args.command_config, "rb") as f:
                props = javaproperties.load(f)
        except OSError as e:
            raise CommandConfigError(
                f"--command-config {args.command_config}: {e.strerror}"
            ) from None
        conf |= translate(props)
    return conf | settings


_JAAS_MODULES = ("PlainLoginModule", "ScramLoginModule")
_JAAS_OPTION = re.compile(r'(\w+)\s*=\s*"((?:[^"\\]|\\.)*)"')


def translate(props: dict[str, str]) -> dict[str, str]:
    """Kafka Java client properties -> librdkafka properties."""
    props = dict(props)
    out: dict[str, str] = {}
    jaas = props.pop("sasl.jaas.config", None)
    if jaas is not None:
        if not any(m in jaas for m in _JAAS_MODULES):
            raise CommandConfigError(
                "sasl.jaas.config: only PlainLoginModule and ScramLoginModule are understood"
            )
        options = {k: re.sub(r"\\(.)", r"\1", v) for k, v in _JAAS_OPTION.findall(jaas)}
        if "username" not in options or "password" not in options:
            raise CommandConfigError('sasl.jaas.config: needs username="..." password="..."')
        out["sasl.username"] = options["username"]
        out["sasl.password"] = options["password"]
    trust_type = props.pop("ssl.truststore.type", "PEM").upper()
    trust = props.pop("ssl.truststore.location", None)
    props.pop("ssl.truststore.password", None)  # PEM trust stores have none
    if trust is not None:
        if trust_type != "PEM":
            raise CommandConfigError(
                f"ssl.truststore.location: a {trust_type} trust store cannot be read by "
                "librdkafka; give a PEM file of the CA certificates (ssl.truststore.type=PEM)"
            )
        out["ssl.ca.location"] = trust
    if "ssl.truststore.certificates" in props:
        out["ssl.ca.pem"] = props.pop("ssl.truststore.certificates")
    key_type = props.pop("ssl.keystore.type", "JKS").upper()
    keystore = props.pop("ssl.keystore.location", None)
    key_password = props.pop("ssl.keystore.password", None)
    if keystore is not None:
        if key_type == "PEM":
            out["ssl.certificate.location"] = out["ssl.key.location"] = keystore
        elif key_type == "PKCS12":
            out["ssl.keystore.location"] = keystore
            if key_password is not None:
                out["ssl.keystore.password"] = key_password
        else:
            raise CommandConfigError(
                f"ssl.keystore.location: a {key_type} key store cannot be read by librdkafka; "
                "use ssl.keystore.type=PEM or PKCS12"
            )
    if "ssl.keystore.certificate.chain" in props:
        out["ssl.certificate.pem"] = props.pop("ssl.keystore.certificate.chain")
    if "ssl.keystore.key" in props:
        out["ssl.key.pem"] = props.pop("ssl.keystore.key")
    return out | props


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

"""How the client commands (topics, configs, groups, produce, consume) connect:
`--bootstrap-server` and `--command-config FILE`, as Kafka's tools take them, with
defaults from the environment and a profile file (common/client_options.py).

The file holds Kafka *Java* client properties, the file an operator already passes
to kafka-topics.sh (`security.protocol`, `sasl.mechanism`, `sasl.jaas.config`,
`ssl.truststore.location` ...). The commands use librdkafka, so the Java-only
settings are translated: the username and password of a PLAIN or SCRAM
`sasl.jaas.config`, PEM trust and key stores (`ssl.truststore.*`,
`ssl.keystore.*` of type PEM, or PKCS12 key stores, which librdkafka reads too):
common/kafka_properties.py, which the Spark data source shares. JKS stores cannot
be read by librdkafka: they are refused with the way out. Every other key goes to
librdkafka as it is; one it does not know is an error that names it.

A refused SASL login reaches librdkafka's application only through `error_cb`
(KafkaError._AUTHENTICATION, with the broker's message); the requests themselves
fail later as "Broker transport failure" or a timeout. Every configuration from
client_config() records it (FAILURES) and describe_error() prefers it, worded as
Kafka's tools word a SaslAuthenticationException.
"""

from __future__ import annotations

import re

from common import client_options
from common.kafka_properties import PropertiesError as CommandConfigError
from common.kafka_properties import read, translate

_SASL_ERROR = re.compile(
    r"SASL authentication error: (?P<message>.*?)(?: \(after \d+ms in state .*\))?$", re.S
)


def authentication_message(text: str) -> str:
    """librdkafka's text of an _AUTHENTICATION error -> the broker's message as
    Kafka's tools print it ('sasl_ssl://h:9093/bootstrap: SASL authentication
    error: Authentication failed ... (after 5ms in state AUTH_REQ)' -> 'Authentication
    failed ...')."""
    from broker.sasl.client import refusal

    found = _SASL_ERROR.search(text)
    return refusal(found["message"] if found else text)


class Failures:
    """The failures librdkafka reports through `error_cb` that a command should
    name instead of what its requests then fail with: the last SASL authentication
    failure. One per process (FAILURES), shared by the configurations
    client_config() builds; written from the client's poll, read on the command's
    error path, both in the command's thread."""

    def __init__(self):
        self.authentication: str | None = None

    def error_cb(self, err) -> None:
        from confluent_kafka import KafkaError

        if err.code() == KafkaError._AUTHENTICATION:
            self.authentication = authentication_message(err.str())


FAILURES = Failures()


class Quiet:
    """A logger for librdkafka that drops its chatter (connection refused ...): the
    commands report what failed themselves."""

    def log(self, *args, **kwargs) -> None:
        return None

    def __getattr__(self, name):
        return self.log


def add_arguments(parser) -> None:
    """`--bootstrap-server` (required: the flag or $LOGFLUME_BOOTSTRAP_SERVER) and
    `--command-config` (default: $LOGFLUME_COMMAND_CONFIG or the profile file):
    common/client_options.py."""
    client_options.add_arguments(parser)


__all__ = [
    "CommandConfigError",
    "add_arguments",
    "admin_client",
    "authentication_failure",
    "client_config",
    "describe_error",
    "read",
    "request_error",
    "translate",
]


def client_config(args, **settings) -> dict:
    """librdkafka settings for `args` (bootstrap servers, the translated
    --command-config), then `settings`. Raises CommandConfigError."""
    conf = {
        "bootstrap.servers": args.bootstrap_server,
        "logger": Quiet(),
        "error_cb": FAILURES.error_cb,
    }
    if args.command_config:
        conf |= translate(read(args.command_config))
    return conf | settings


def admin_client(args):
    """A confluent-kafka AdminClient for `args` (client_config, with the command's
    --timeout-ms as its socket timeout). Raises CommandConfigError, KafkaException or
    ValueError; describe_error() words them."""
    from confluent_kafka.admin import AdminClient

    return AdminClient(client_config(args, **{"socket.timeout.ms": args.timeout_ms}))


def authentication_failure(client=None) -> str | None:
    """The SASL authentication failure librdkafka reported, if any, worded as
    Kafka's tools word it. `client` (the command's AdminClient, Producer or
    Consumer) is polled first, so that librdkafka hands over what it reported."""
    if client is not None:
        client.poll(0)
    return FAILURES.authentication


def describe_error(exc: Exception, client=None) -> str:
    """The message of a confluent-kafka exception (its KafkaError's text), or the
    authentication failure behind it (authentication_failure(client))."""
    failure = authentication_failure(client)
    if failure is not None:
        return failure
    if isinstance(exc, TimeoutError) and not exc.args:  # a future's result(timeout)
        return "no answer from the broker within --timeout-ms"
    err = exc.args[0] if exc.args else exc
    return err.str() if hasattr(err, "str") else str(err)


def request_error(exc: Exception, client, args) -> str:
    """A failed admin request in one line, as the admin commands report it: the
    authentication failure behind it, else the broker's refusal with Kafka's error
    name (librdkafka abbreviates some: UNKNOWN_TOPIC_OR_PART), else a broker that
    could not be reached or did not answer, named with `args`' --bootstrap-server
    and --timeout-ms."""
    from confluent_kafka import KafkaError

    from broker.protocol.errors import ErrorCode

    failure = authentication_failure(client)
    if failure is not None:
        return failure
    where = f"{args.bootstrap_server} within {args.timeout_ms} ms"
    err = exc.args[0] if exc.args else None
    if isinstance(err, KafkaError):
        code = err.code()
        if code > 0:
            try:
                name = ErrorCode(code).name
            except ValueError:  # a code newer than broker/protocol/errors.py
                name = err.name()
            return f"{name}: {err.str()}"
        if code in (KafkaError._TRANSPORT, KafkaError._ALL_BROKERS_DOWN, KafkaError._RESOLVE):
            return f"cannot reach {where} ({err.str()})"
        if code == KafkaError._TIMED_OUT:
            return f"no answer from {where} ({err.str()})"
        return err.str()
    if isinstance(exc, TimeoutError):  # a future's result(timeout)
        return f"no answer from {where}"
    return str(exc)

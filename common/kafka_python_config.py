"""librdkafka settings -> kafka-python's, for the clients that speak to brokers
through kafka-python next to confluent-kafka: the console's groups reader
(console/groups.py) and the Spark source's fetcher (spark_etl/source/fetcher.py).

Their settings come as librdkafka's (a --command-config file or `kafka.*` options,
translated from Java's names by common/kafka_properties.py). The connection and
security settings carry over; one kafka-python cannot honour (a PKCS12 key store,
inline PEM, a SASL mechanism other than PLAIN and SCRAM, an unknown
security.protocol) is an error naming it, never ignored, since it decides whether
and how the client connects. librdkafka's tuning settings do not apply and are left
out.
"""

from __future__ import annotations

from typing import Any

# librdkafka setting -> kafka-python setting, for those that carry over as they are
_SAME = {
    "sasl.username": "sasl_plain_username",
    "sasl.password": "sasl_plain_password",
    "ssl.ca.location": "ssl_cafile",
    "ssl.certificate.location": "ssl_certfile",
    "ssl.key.location": "ssl_keyfile",
    "ssl.key.password": "ssl_password",
    "ssl.crl.location": "ssl_crlfile",
}
_HANDLED = {
    "bootstrap.servers",
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "ssl.endpoint.identification.algorithm",
    *_SAME,
}
MECHANISMS = ("PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512")
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")


class KafkaPythonConfigError(ValueError):
    """librdkafka settings kafka-python cannot use; the message names them."""


def client_settings(conf: dict, client_id: str, timeout_s: float) -> dict[str, Any]:
    """kafka-python client settings (KafkaAdminClient, KafkaNetClient) for the
    librdkafka settings `conf`; `client_id` unless `conf` sets client.id."""
    unknown = sorted(k for k in conf if k.startswith(("ssl.", "sasl.")) and k not in _HANDLED)
    if unknown:
        raise KafkaPythonConfigError("kafka-python cannot use " + ", ".join(unknown))
    protocol = str(conf.get("security.protocol", "PLAINTEXT")).upper()
    if protocol not in PROTOCOLS:
        raise KafkaPythonConfigError(
            f"security.protocol {conf['security.protocol']}: must be one of {', '.join(PROTOCOLS)}"
        )
    ms = int(timeout_s * 1000)
    out: dict[str, Any] = {
        "bootstrap_servers": [s.strip() for s in str(conf["bootstrap.servers"]).split(",")],
        "client_id": str(conf.get("client.id", client_id)),
        "request_timeout_ms": ms,
        "bootstrap_timeout_ms": ms,
        "security_protocol": protocol,
    }
    mechanism = conf.get("sasl.mechanism") or conf.get("sasl.mechanisms")
    if protocol.startswith("SASL_"):
        mechanism = mechanism or "GSSAPI"  # librdkafka's default
    if mechanism is not None:
        if str(mechanism).upper() not in MECHANISMS:
            raise KafkaPythonConfigError(
                f"sasl.mechanism {mechanism}: kafka-python is used here with "
                f"{', '.join(MECHANISMS)} only"
            )
        out["sasl_mechanism"] = str(mechanism).upper()
    for theirs, ours in _SAME.items():
        if theirs in conf:
            out[ours] = conf[theirs]
    if str(conf.get("ssl.endpoint.identification.algorithm", "https")).lower() == "none":
        out["ssl_check_hostname"] = False
    return out

"""The kafka sink's `tls:` and `sasl:` blocks and the librdkafka settings they make
(Kafka's listeners: TLS alone is SSL, SASL alone SASL_PLAINTEXT, both SASL_SSL);
`ssl_context` makes the same `tls:` block a Python TLS context, for the checks of
`logflume agent test-output` that speak the Kafka protocol themselves."""

from __future__ import annotations

import dataclasses
import ssl
from typing import Literal


@dataclasses.dataclass(frozen=True)
class TlsConfig:
    ca: str | None = None  # PEM file of the CA certificates to trust; null: the system's
    cert: str | None = None  # PEM client certificate, for brokers that require one (with key)
    key: str | None = None  # PEM private key of `cert`
    verify: bool = True  # verify the broker's certificate (false only for trials)


@dataclasses.dataclass(frozen=True)
class SaslConfig:
    mechanism: Literal["PLAIN", "SCRAM-SHA-256", "SCRAM-SHA-512"]  # SASL mechanism
    username: str  # SASL user
    password: str = dataclasses.field(repr=False)  # never logged; use ${VAR} or ${file:/path}


def librdkafka_security(tls: TlsConfig | None, sasl: SaslConfig | None) -> dict:
    """librdkafka settings for the `tls:` and `sasl:` blocks."""
    conf: dict = {}
    if tls is not None:
        conf["enable.ssl.certificate.verification"] = tls.verify
        for key, value in (
            ("ssl.ca.location", tls.ca),
            ("ssl.certificate.location", tls.cert),
            ("ssl.key.location", tls.key),
        ):
            if value is not None:
                conf[key] = value
    if sasl is not None:
        conf["sasl.mechanism"] = sasl.mechanism
        conf["sasl.username"] = sasl.username
        conf["sasl.password"] = sasl.password
    protocol = {(False, False): "PLAINTEXT", (True, False): "SSL", (False, True): "SASL_PLAINTEXT"}
    conf["security.protocol"] = protocol.get((tls is not None, sasl is not None), "SASL_SSL")
    return conf


def ssl_context(tls: TlsConfig) -> ssl.SSLContext:
    """The `tls:` block as librdkafka applies it: the broker's certificate and host
    name verified against `ca` (the system's CAs without it) unless `verify: false`,
    `cert` and `key` presented when given. Raises OSError or ssl.SSLError when a
    file cannot be loaded."""
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = tls.verify
    ctx.verify_mode = ssl.CERT_REQUIRED if tls.verify else ssl.CERT_NONE
    if tls.ca is not None:
        ctx.load_verify_locations(cafile=tls.ca)
    elif tls.verify:
        ctx.load_default_certs()
    if tls.cert is not None:
        ctx.load_cert_chain(tls.cert, tls.key)
    return ctx


def unreadable(path: str) -> str | None:
    try:
        with open(path, "rb"):
            return None
    except OSError as e:
        return f"cannot read {path}: {e.strerror}"

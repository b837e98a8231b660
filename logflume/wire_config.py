"""How the commands that speak the Kafka protocol themselves (`logflume
transactions`, `logflume groups --delete-offsets` and its share groups, through
broker/protocol/client.BlockingClient) connect, from the same `--command-config`
file as the librdkafka-based commands (logflume/client_config.py).

The file is read and translated to librdkafka's names as for the other commands;
`settings()` (pure) keeps what a blocking connection needs:

    security.protocol                       PLAINTEXT (default), SSL, SASL_PLAINTEXT, SASL_SSL
    sasl.mechanism / sasl.mechanisms        PLAIN, SCRAM-SHA-256, SCRAM-SHA-512
    sasl.username, sasl.password            the login (from sasl.jaas.config)
    ssl.ca.location, ssl.ca.pem             the CAs that verify the broker (default: the system's)
    ssl.certificate.location + ssl.key.location, ssl.certificate.pem + ssl.key.pem
      (with ssl.key.password), or ssl.keystore.location + ssl.keystore.password
      (PKCS12)                              a client certificate
    ssl.endpoint.identification.algorithm   https (default: check the host name) or none
    enable.ssl.certificate.verification     false: do not verify the broker at all

Any other `ssl.*` or `sasl.*` setting, and a mechanism other than PLAIN and SCRAM
(GSSAPI, OAUTHBEARER), cannot be honoured here and is an error that names the key.
Settings that do not concern the connection's security (client.id, timeouts ...)
do not apply to these commands and are left alone.
"""

from __future__ import annotations

import dataclasses
import os
import ssl

from broker.protocol.client import SaslLogin, Security
from broker.sasl.client import MECHANISM_NAMES
from broker.server.tls import load_pem_chain, normalize_pem
from logflume.client_config import CommandConfigError, read, translate

PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_HONOURED = {
    "security.protocol",
    "sasl.mechanism",
    "sasl.mechanisms",
    "sasl.username",
    "sasl.password",
    "ssl.ca.location",
    "ssl.ca.pem",
    "ssl.certificate.location",
    "ssl.key.location",
    "ssl.key.password",
    "ssl.certificate.pem",
    "ssl.key.pem",
    "ssl.keystore.location",
    "ssl.keystore.password",
    "ssl.endpoint.identification.algorithm",
    "enable.ssl.certificate.verification",
}


@dataclasses.dataclass(frozen=True)
class TlsSettings:
    """The TLS side of WireSettings: file names and switches, not loaded yet."""

    ca_location: str | None = None
    ca_pem: str | None = None
    certificate_location: str | None = None
    key_location: str | None = None
    certificate_pem: str | None = None
    key_pem: str | None = dataclasses.field(default=None, repr=False)
    key_password: str | None = dataclasses.field(default=None, repr=False)
    keystore_location: str | None = None  # PKCS12
    keystore_password: str | None = dataclasses.field(default=None, repr=False)
    verify: bool = True
    check_hostname: bool = True


@dataclasses.dataclass(frozen=True)
class WireSettings:
    """A BlockingClient's connection settings from client properties; `security()`
    loads the TLS material."""

    protocol: str = "PLAINTEXT"
    tls: TlsSettings | None = None
    sasl: SaslLogin | None = None

    def security(self) -> Security:
        """The Security to connect with. Raises CommandConfigError naming the key
        whose file cannot be loaded."""
        return Security(tls=_context(self.tls) if self.tls else None, sasl=self.sasl)


def settings(props: dict[str, str]) -> WireSettings:
    """librdkafka client properties (client_config.translate's output) -> the
    settings of a blocking connection. Raises CommandConfigError naming the key it
    cannot honour."""
    protocol = props.get("security.protocol", "PLAINTEXT").upper()
    if protocol not in PROTOCOLS:
        raise CommandConfigError(
            f"security.protocol: {props['security.protocol']!r} is not one of {', '.join(PROTOCOLS)}"
        )
    mechanism = _mechanism(props) if protocol.startswith("SASL_") else None
    for key in sorted(props):
        if key.startswith(("ssl.", "sasl.")) and key not in _HONOURED:
            raise CommandConfigError(
                f"{key}: not supported by this command, which speaks the Kafka protocol "
                "itself (it takes security.protocol, sasl.mechanism, sasl.jaas.config, "
                "ssl.truststore.* of type PEM, ssl.keystore.* of type PEM or PKCS12)"
            )
    sasl = _login(props, mechanism) if mechanism is not None else None
    tls = _tls(props) if protocol.endswith("SSL") else None
    return WireSettings(protocol, tls, sasl)


def _mechanism(props: dict[str, str]) -> str:
    key = "sasl.mechanism" if "sasl.mechanism" in props else "sasl.mechanisms"
    if key not in props:
        raise CommandConfigError(
            f"sasl.mechanism: not set, which means GSSAPI (Kafka's default), not supported "
            f"by this command; set one of {', '.join(MECHANISM_NAMES)}"
        )
    mechanism = props[key].strip().upper()
    if mechanism not in MECHANISM_NAMES:
        raise CommandConfigError(
            f"{key}: {mechanism} is not supported by this command; "
            f"use one of {', '.join(MECHANISM_NAMES)}"
        )
    return mechanism


def _login(props: dict[str, str], mechanism: str) -> SaslLogin:
    for needed in ("sasl.username", "sasl.password"):
        if needed not in props:
            raise CommandConfigError(
                f"{needed}: needed for SASL {mechanism} (give sasl.jaas.config with "
                'username="..." password="...")'
            )
    return SaslLogin(mechanism, props["sasl.username"], props["sasl.password"])


_PAIRS = (
    ("ssl.certificate.location", "ssl.key.location"),
    ("ssl.certificate.pem", "ssl.key.pem"),
)
_CLIENT_KEY_SOURCES = ("ssl.certificate.location", "ssl.certificate.pem", "ssl.keystore.location")


def _tls(props: dict[str, str]) -> TlsSettings:
    algorithm = props.get("ssl.endpoint.identification.algorithm", "https").strip().lower()
    if algorithm not in ("https", "none"):
        raise CommandConfigError(
            f"ssl.endpoint.identification.algorithm: expected https or none, got {algorithm!r}"
        )
    verify = props.get("enable.ssl.certificate.verification", "true").strip().lower()
    if verify not in ("true", "false"):
        raise CommandConfigError(
            f"enable.ssl.certificate.verification: expected true or false, got {verify!r}"
        )
    sources = [k for k in _CLIENT_KEY_SOURCES if k in props]
    if len(sources) > 1:
        raise CommandConfigError(
            f"{sources[1]}: give the client certificate one way, not with {sources[0]}"
        )
    for cert, key in _PAIRS:
        if (cert in props) != (key in props):
            missing = key if cert in props else cert
            raise CommandConfigError(f"{missing}: needed with the other half of the client key")
    if "ssl.ca.location" in props and "ssl.ca.pem" in props:
        raise CommandConfigError("ssl.ca.location: set it or ssl.ca.pem, not both")
    return TlsSettings(
        ca_location=props.get("ssl.ca.location"),
        ca_pem=props.get("ssl.ca.pem"),
        certificate_location=props.get("ssl.certificate.location"),
        key_location=props.get("ssl.key.location"),
        certificate_pem=props.get("ssl.certificate.pem"),
        key_pem=props.get("ssl.key.pem"),
        key_password=props.get("ssl.key.password"),
        keystore_location=props.get("ssl.keystore.location"),
        keystore_password=props.get("ssl.keystore.password"),
        verify=verify == "true",
        check_hostname=verify == "true" and algorithm == "https",
    )


def _context(tls: TlsSettings) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = tls.check_hostname
    ctx.verify_mode = ssl.CERT_REQUIRED if tls.verify else ssl.CERT_NONE
    key = "ssl.ca.location"
    try:
        if tls.ca_location is not None:
            if os.path.isdir(tls.ca_location):
                ctx.load_verify_locations(capath=tls.ca_location)
            else:
                ctx.load_verify_locations(cafile=tls.ca_location)
        elif tls.ca_pem is not None:
            key = "ssl.ca.pem"
            ctx.load_verify_locations(cadata=normalize_pem(tls.ca_pem))
        elif tls.verify:
            ctx.load_default_certs()
        if tls.certificate_location is not None:
            key = "ssl.certificate.location"
            ctx.load_cert_chain(tls.certificate_location, tls.key_location, tls.key_password)
        elif tls.certificate_pem is not None:
            key = "ssl.certificate.pem"
            assert tls.key_pem is not None  # checked with the other half of the client key
            pem = normalize_pem(tls.key_pem) + normalize_pem(tls.certificate_pem)
            load_pem_chain(ctx, pem, tls.key_password)
        elif tls.keystore_location is not None:
            key = "ssl.keystore.location"
            load_pem_chain(ctx, _pkcs12_as_pem(tls.keystore_location, tls.keystore_password), None)
    except (OSError, ValueError) as e:
        reason = e.reason if isinstance(e, ssl.SSLError) and e.reason else None
        reason = reason or getattr(e, "strerror", None) or str(e)
        raise CommandConfigError(f"{key}: cannot load ({reason})") from None
    return ctx


def _pkcs12_as_pem(path: str, password: str | None) -> str:
    """A PKCS12 key store's key and certificates as PEM text (the key unencrypted,
    for load_pem_chain)."""
    from cryptography.hazmat.primitives.serialization import (
        Encoding,
        NoEncryption,
        PrivateFormat,
        pkcs12,
    )

    with open(path, "rb") as f:
        data = f.read()
    key, cert, extra = pkcs12.load_key_and_certificates(
        data, password.encode() if password else None
    )
    if key is None or cert is None:
        raise ValueError("no private key with its certificate in it")
    parts = [key.private_bytes(Encoding.PEM, PrivateFormat.PKCS8, NoEncryption())]
    parts += [c.public_bytes(Encoding.PEM) for c in [cert, *extra]]
    return b"".join(parts).decode()


def security(args) -> Security:
    """The Security for a command's `--command-config` (PLAINTEXT without one).
    Raises CommandConfigError."""
    if not args.command_config:
        return Security()
    return settings(translate(read(args.command_config))).security()

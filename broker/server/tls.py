"""ssl.SSLContext from Kafka's ssl.* settings, with PEM material (Kafka 2.7+).

`server_context(settings, listener)` and `client_context(settings)` take the ssl.*
values as `BrokerConfig.ssl_settings(listener)` resolves them (per-listener
overrides applied) and return a ready context, or raise ConfigError naming the key.
No sockets here: the contexts are unit-tested as they are built.

Key material, as Kafka takes it with `ssl.keystore.type=PEM`:
- `ssl.keystore.location`: one PEM file with the private key and the certificate
  chain; or `ssl.keystore.key` + `ssl.keystore.certificate.chain` inline;
- `ssl.key.password` decrypts an encrypted private key;
- `ssl.truststore.location` (a PEM file of CA certificates) or
  `ssl.truststore.certificates` inline, with `ssl.truststore.type=PEM`.
Inline PEM may arrive with its line breaks folded away (a properties value continued
with backslashes); it is re-wrapped before OpenSSL sees it. Python's ssl module
loads a key chain only from a file, so inline material goes through a private
temporary file that is removed at once. JKS and PKCS12 stores are refused.

A keystore changed dynamically (broker/dynamic_config.py) is checked as Kafka's
SslFactory checks it: `check_keystore_update` refuses a certificate of another subject
DN, or without every subject alt name of the one in use, unless
`ssl.allow.dn.changes` / `ssl.allow.san.changes`.

`ssl.enabled.protocols` and `ssl.protocol` bound the TLS versions; TLSv1.2 is the
floor (TLSv1 and TLSv1.1 are refused in the config and in the handshake).
`ssl.client.auth`: none, requested (a certificate is verified if sent) or required.
A listener refuses TLS 1.2 renegotiation, as Kafka's broker does (and the listener's
transport, broker.server.tls_transport, relies on it).
"""

from __future__ import annotations

import os
import re
import ssl
import tempfile
from collections.abc import Mapping

from cryptography import x509

from broker.config import ConfigError

_VERSIONS = {"TLSv1.2": ssl.TLSVersion.TLSv1_2, "TLSv1.3": ssl.TLSVersion.TLSv1_3}
_OLD = {"SSLv2", "SSLv3", "TLSv1", "TLSv1.1", "SSL"}
_CLIENT_AUTH = {
    "none": ssl.CERT_NONE,
    "requested": ssl.CERT_OPTIONAL,
    "required": ssl.CERT_REQUIRED,
}
_PEM_BLOCK = re.compile(r"-----BEGIN ([A-Z0-9 ]+)-----(.*?)-----END \1-----", re.S)


def normalize_pem(text: str) -> str:
    """PEM blocks with their base64 re-wrapped at 64 columns (Kafka accepts inline
    PEM whose line breaks were lost in a properties file)."""
    blocks = []
    for label, body in _PEM_BLOCK.findall(text):
        data = "".join(body.split())
        lines = [data[i : i + 64] for i in range(0, len(data), 64)]
        blocks.append("\n".join([f"-----BEGIN {label}-----", *lines, f"-----END {label}-----"]))
    if not blocks:
        raise ValueError("no PEM block found")
    return "\n".join(blocks) + "\n"


def _versions(settings: Mapping[str, object]) -> tuple[ssl.TLSVersion, ssl.TLSVersion]:
    enabled = [v.strip() for v in str(settings["ssl.enabled.protocols"]).split(",") if v.strip()]
    for v in enabled:
        if v in _OLD:
            raise ConfigError(f"ssl.enabled.protocols: {v} is not allowed (TLSv1.2 at least)")
        if v not in _VERSIONS:
            raise ConfigError(f"ssl.enabled.protocols: unknown protocol {v!r}")
    if not enabled:
        raise ConfigError("ssl.enabled.protocols: no protocol enabled")
    protocol = str(settings["ssl.protocol"]).strip()
    if protocol in _OLD:
        raise ConfigError(f"ssl.protocol: {protocol} is not allowed (TLSv1.2 at least)")
    if protocol != "TLS" and protocol not in _VERSIONS:
        raise ConfigError(f"ssl.protocol: unknown protocol {protocol!r}")
    versions = sorted(_VERSIONS[v] for v in enabled)
    highest = versions[-1] if protocol == "TLS" else min(versions[-1], _VERSIONS[protocol])
    if highest < versions[0]:
        raise ConfigError(f"ssl.protocol: {protocol} is below every ssl.enabled.protocols entry")
    return versions[0], highest


def _base_context(purpose_server: bool, settings: Mapping[str, object]) -> ssl.SSLContext:
    ctx = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER if purpose_server else ssl.PROTOCOL_TLS_CLIENT)
    ctx.minimum_version, ctx.maximum_version = _versions(settings)
    return ctx


def _check_type(settings: Mapping[str, object], store: str) -> None:
    kind = str(settings[f"ssl.{store}.type"]).upper()
    if kind != "PEM":
        raise ConfigError(
            f"ssl.{store}.type: {kind} stores are not supported; set ssl.{store}.type=PEM "
            "with PEM files or inline PEM"
        )


def has_keystore(settings: Mapping[str, object]) -> bool:
    return any(settings[k] for k in ("ssl.keystore.location", "ssl.keystore.key"))


def _load_keystore(ctx: ssl.SSLContext, settings: Mapping[str, object]) -> None:
    _check_type(settings, "keystore")
    location = settings["ssl.keystore.location"]
    key, chain = settings["ssl.keystore.key"], settings["ssl.keystore.certificate.chain"]
    raw_password = settings["ssl.key.password"]
    password = str(raw_password) if raw_password else None
    if location and (key or chain):
        raise ConfigError("ssl.keystore.location: set it or ssl.keystore.key, not both")
    if location:
        try:
            ctx.load_cert_chain(str(location), password=password)
        except OSError as e:
            raise ConfigError(f"ssl.keystore.location: {location}: {_reason(e)}") from None
        return
    if not (key and chain):
        raise ConfigError("ssl.keystore.key: needs ssl.keystore.certificate.chain with it")
    try:
        pem = normalize_pem(str(key)) + normalize_pem(str(chain))
    except ValueError:
        raise ConfigError("ssl.keystore.key: not PEM text") from None
    try:
        load_pem_chain(ctx, pem, password)
    except OSError as e:
        raise ConfigError(f"ssl.keystore.key: {_reason(e)}") from None


def load_pem_chain(ctx: ssl.SSLContext, pem: str, password: str | None) -> None:
    """A key and its certificates held in memory (PEM text) into `ctx`: ssl reads them
    only from a file, so through a private one (mkstemp: 0600) removed at once."""
    fd, path = tempfile.mkstemp(prefix="logflume-key-", suffix=".pem")
    try:
        with os.fdopen(fd, "w") as f:
            f.write(pem)
        ctx.load_cert_chain(path, password=password)
    finally:
        os.unlink(path)


def _load_truststore(ctx: ssl.SSLContext, settings: Mapping[str, object]) -> bool:
    """Load the CA certificates; False when none is configured."""
    location, inline = settings["ssl.truststore.location"], settings["ssl.truststore.certificates"]
    if not (location or inline):
        return False
    _check_type(settings, "truststore")
    if location and inline:
        raise ConfigError(
            "ssl.truststore.location: set it or ssl.truststore.certificates, not both"
        )
    try:
        if location:
            ctx.load_verify_locations(cafile=str(location))
        else:
            ctx.load_verify_locations(cadata=normalize_pem(str(inline)))
    except (OSError, ValueError) as e:
        key = "ssl.truststore.location" if location else "ssl.truststore.certificates"
        raise ConfigError(f"{key}: {_reason(e)}") from None
    return True


def _reason(e: Exception) -> str:
    if isinstance(e, ssl.SSLError) and e.reason:
        return f"cannot load ({e.reason})"
    return getattr(e, "strerror", None) or str(e)


def server_context(settings: Mapping[str, object], listener: str) -> ssl.SSLContext:
    """The context an SSL listener accepts with."""
    if not has_keystore(settings):
        raise ConfigError(
            f"listener {listener}: an SSL listener needs ssl.keystore.location "
            "(or ssl.keystore.key and ssl.keystore.certificate.chain)"
        )
    ctx = _base_context(True, settings)
    _load_keystore(ctx, settings)
    auth = str(settings["ssl.client.auth"]).strip().lower()
    if auth not in _CLIENT_AUTH:
        raise ConfigError(f"ssl.client.auth: expected none, requested or required, got {auth!r}")
    trusted = _load_truststore(ctx, settings)
    if auth != "none" and not trusted:
        raise ConfigError(
            f"ssl.client.auth={auth}: needs ssl.truststore.location or "
            "ssl.truststore.certificates to verify client certificates"
        )
    ctx.verify_mode = _CLIENT_AUTH[auth]
    ctx.options |= ssl.OP_NO_RENEGOTIATION  # as Kafka's broker, which refuses it
    return ctx


def client_context(settings: Mapping[str, object]) -> ssl.SSLContext:
    """The context a broker connects to another broker's SSL listener with: the
    server is verified against the truststore (the system's CAs without one), the
    keystore, if any, is presented as client certificate."""
    ctx = _base_context(False, settings)
    if not _load_truststore(ctx, settings):
        ctx.load_default_certs()
    if has_keystore(settings):
        _load_keystore(ctx, settings)
    ctx.check_hostname = str(settings["ssl.endpoint.identification.algorithm"]).lower() == "https"
    return ctx


def leaf_certificate(settings: Mapping[str, object]) -> x509.Certificate | None:
    """The first certificate of the keystore `settings` name (None without one)."""
    location, chain = settings["ssl.keystore.location"], settings["ssl.keystore.certificate.chain"]
    try:
        if location:
            with open(str(location), "rb") as f:
                pem = f.read()
        elif chain:
            pem = normalize_pem(str(chain)).encode()
        else:
            return None
        return x509.load_pem_x509_certificates(pem)[0]
    except (OSError, ValueError) as e:
        raise ConfigError(f"ssl.keystore.location: {_reason(e)}") from None


def _alt_names(cert: x509.Certificate) -> set[str]:
    try:
        ext = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName)
    except x509.ExtensionNotFound:
        return set()
    return {str(name.value) for name in ext.value}


def check_keystore_update(
    old: x509.Certificate | None, settings: Mapping[str, object], listener: str
) -> None:
    """Kafka's SslFactory.validateReconfiguration for a new keystore: the same subject
    DN, and at least the subject alt names of `old`, unless allowed to change."""
    new = leaf_certificate(settings)
    if old is None or new is None:
        return
    if not settings["ssl.allow.dn.changes"] and new.subject != old.subject:
        raise ConfigError(
            f"listener {listener}: Keystore DistinguishedName does not match: "
            f"existing={{DN={old.subject.rfc4514_string()}}}, "
            f"new={{DN={new.subject.rfc4514_string()}}}"
        )
    if not settings["ssl.allow.san.changes"] and not _alt_names(old) <= _alt_names(new):
        raise ConfigError(
            f"listener {listener}: Keystore SubjectAltNames do not match: "
            f"existing={{SAN={sorted(_alt_names(old))}}}, new={{SAN={sorted(_alt_names(new))}}}"
        )

"""TLS for the network sources (tcp, http): a `tls:` block and its server context.

`cert` and `key` are PEM files (the key may sit in the cert file: give it twice);
with `ca`, clients must present a certificate signed by it (mutual TLS). The files
are loaded by `validate`, so a missing or mismatched file is a config error naming
the key, before the agent starts."""

from __future__ import annotations

import dataclasses
import ssl


@dataclasses.dataclass(frozen=True)
class ServerTlsConfig:
    cert: str  # PEM certificate (chain) the source presents
    key: str  # PEM private key of `cert`
    ca: str | None = None  # PEM CA certificates; given: clients must present a cert it signed


def server_context(config: ServerTlsConfig) -> ssl.SSLContext:
    """Raises OSError or ssl.SSLError on unreadable or mismatched files."""
    ctx = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.load_cert_chain(config.cert, config.key)
    if config.ca is not None:
        ctx.load_verify_locations(cafile=config.ca)
        ctx.verify_mode = ssl.CERT_REQUIRED
    return ctx


def check(config: ServerTlsConfig | None) -> list[str]:
    """Config errors of a `tls:` block (`validate` messages)."""
    if config is None:
        return []
    for key in ("cert", "key", "ca"):
        path = getattr(config, key)
        if path is None:
            continue
        try:
            with open(path, "rb"):
                pass
        except OSError as e:
            return [f"tls.{key}: cannot read {path}: {e.strerror}"]
    try:
        server_context(config)
    except (OSError, ssl.SSLError) as e:
        return [f"tls: cert, key and ca do not load: {getattr(e, 'reason', None) or e}"]
    return []

"""What each SASL listener serves, from Kafka's keys:

- `sasl.enabled.mechanisms` (or `listener.name.<l>.sasl.enabled.mechanisms`):
  PLAIN, SCRAM-SHA-256, SCRAM-SHA-512. Kafka's default is GSSAPI (Kerberos), which
  this broker does not serve: a SASL listener left at the default is a config error
  that says what to set, rather than a listener nobody can log in to.
- PLAIN users: `user_<name>="<password>"` options of the PlainLoginModule entry in
  `listener.name.<l>.plain.sasl.jaas.config`.
- SCRAM users: the credential store (broker.sasl.credentials); the
  `listener.name.<l>.scram-sha-*.sasl.jaas.config` entry only gives this broker's own
  username/password for inter-broker connections.
Pure.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable

from broker.sasl import jaas
from broker.sasl.authenticator import SaslServer
from broker.sasl.plain import PlainServer
from broker.sasl.scram import MECHANISMS as SCRAM_MECHANISMS
from broker.sasl.scram import ScramServer

SERVED = ("PLAIN", *SCRAM_MECHANISMS)
MODULES = {
    "PLAIN": "org.apache.kafka.common.security.plain.PlainLoginModule",
    "SCRAM-SHA-256": "org.apache.kafka.common.security.scram.ScramLoginModule",
    "SCRAM-SHA-512": "org.apache.kafka.common.security.scram.ScramLoginModule",
}


@dataclasses.dataclass(frozen=True, slots=True)
class ListenerSasl:
    mechanisms: tuple[str, ...]
    plain_users: dict[str, str]  # PLAIN: name -> password
    jaas: dict[str, jaas.JaasEntry]  # mechanism -> the listener's entry (when set)


def jaas_key(listener: str, mechanism: str) -> str:
    return f"listener.name.{listener.lower()}.{mechanism.lower()}.sasl.jaas.config"


def mechanisms_key(config, listener: str) -> str:
    key = f"listener.name.{listener.lower()}.sasl.enabled.mechanisms"
    return key if config.is_explicit(key) else "sasl.enabled.mechanisms"


def listener_sasl(config, listener: str) -> ListenerSasl:
    """A SASL listener's settings; ValueError naming the key when wrong."""
    key = mechanisms_key(config, listener)
    mechanisms = tuple(m.strip().upper() for m in str(config.get(key)).split(",") if m.strip())
    for m in mechanisms:
        if m not in SERVED:
            hint = " (Kafka's default)" if m == "GSSAPI" and not config.is_explicit(key) else ""
            raise ValueError(
                f"{key}: {m}{hint} is not served by this broker; set {key} to some of "
                f"{', '.join(SERVED)} for SASL listener {listener}"
            )
    if not mechanisms:
        raise ValueError(f"{key}: no mechanism enabled for SASL listener {listener}")
    entries: dict[str, jaas.JaasEntry] = {}
    for m in SERVED:
        jkey = jaas_key(listener, m)
        if not config.is_explicit(jkey):
            continue
        try:
            entry = jaas.parse(str(config.get(jkey)))
        except jaas.JaasError as e:
            raise ValueError(f"{jkey}: {e}") from None
        if entry.module != MODULES[m]:
            raise ValueError(f"{jkey}: expected {MODULES[m]}, got {entry.module}")
        entries[m] = entry
    users: dict[str, str] = {}
    if "PLAIN" in mechanisms:
        if "PLAIN" not in entries:
            raise ValueError(
                f"{jaas_key(listener, 'PLAIN')}: needed for PLAIN on listener {listener} "
                '(PlainLoginModule required user_<name>="<password>" ...;)'
            )
        opts = entries["PLAIN"].options
        users = {k[5:]: v for k, v in opts.items() if k.startswith("user_") and len(k) > 5}
    return ListenerSasl(mechanisms, users, entries)


def client_credentials(config, listener: str, mechanism: str) -> tuple[str, str]:
    """This broker's own username/password on `listener` (inter-broker SASL)."""
    entry = listener_sasl(config, listener).jaas.get(mechanism)
    key = jaas_key(listener, mechanism)
    if entry is None or "username" not in entry.options or "password" not in entry.options:
        raise ValueError(f"{key}: needs username=... password=... for inter-broker SASL")
    return entry.options["username"], entry.options["password"]


def server_factories(sasl: ListenerSasl, scram_lookup) -> dict[str, Callable[[], SaslServer]]:
    """Mechanism -> factory of a fresh server exchange, for one listener's
    Authenticator; `scram_lookup(user, mechanism)` gives a ScramCredential or None."""
    out: dict[str, Callable[[], SaslServer]] = {}
    for m in sasl.mechanisms:
        if m == "PLAIN":
            out[m] = functools.partial(PlainServer, sasl.plain_users)
        else:
            out[m] = functools.partial(ScramServer, m, functools.partial(_lookup, scram_lookup, m))
    return out


def _lookup(scram_lookup, mechanism: str, user: str):
    return scram_lookup(user, mechanism)

"""Listeners as Kafka configures them: names, addresses, security protocols.

`listeners` is a comma-separated list of `NAME://host:port` (a bare `host:port`, as
`--listen` takes it, is the PLAINTEXT listener); names are case-insensitive (Kafka
upper-cases them) and unique, and so are the ports. `advertised.listeners` gives,
for some of these names, the address published to clients; a listener without an
entry there advertises its own address, with a wildcard host published as
127.0.0.1. `listener.security.protocol.map` maps each listener name to its security
protocol; every listener must be in it.

Inter-broker traffic (replica fetchers) goes to the listener named by
`inter.broker.listener.name`, or else to the one named like the protocol given in
`security.inter.broker.protocol` (default PLAINTEXT, so a listener named PLAINTEXT);
setting both is an error, as in Kafka, and so is naming a listener that does not
exist.

All four of Kafka's security protocols are served: SASL_PLAINTEXT and SASL_SSL with
the mechanisms of broker.sasl. Pure functions, no I/O.
"""

from __future__ import annotations

import dataclasses
import re

from common.hostport import connect_address, parse_hostport

DEFAULT_PROTOCOL_MAP = "PLAINTEXT:PLAINTEXT,SSL:SSL,SASL_PLAINTEXT:SASL_PLAINTEXT,SASL_SSL:SASL_SSL"
PROTOCOLS = ("PLAINTEXT", "SSL", "SASL_PLAINTEXT", "SASL_SSL")
_NAME = re.compile(r"[A-Z0-9_]+")


class ListenerError(ValueError):
    """A bad listener setting; the message names the key."""


@dataclasses.dataclass(frozen=True, slots=True)
class Listener:
    name: str  # upper case, as Kafka normalises it
    host: str
    port: int
    protocol: str  # one of PROTOCOLS

    @property
    def tls(self) -> bool:
        return self.protocol in ("SSL", "SASL_SSL")

    @property
    def sasl(self) -> bool:
        return self.protocol.startswith("SASL_")


def parse_addresses(value: str, key: str) -> dict[str, tuple[str, int]]:
    """`NAME://host:port,...` -> {NAME: (host, port)} in the given order; names and
    non-zero ports must be unique."""
    out: dict[str, tuple[str, int]] = {}
    ports: set[int] = set()
    for item in (i.strip() for i in value.split(",")):
        if not item:
            continue
        name, sep, rest = item.rpartition("://")
        name = name.strip().upper() if sep else "PLAINTEXT"
        if not _NAME.fullmatch(name):
            raise ListenerError(f"{key}: {item!r}: a listener name is letters, digits and _")
        try:
            host, port = parse_hostport(rest, f"{key}: listener {item!r}")
        except ValueError as e:
            raise ListenerError(str(e)) from None
        if name in out:
            raise ListenerError(f"{key}: listener name {name} appears twice")
        if port and port in ports:
            raise ListenerError(f"{key}: port {port} is used by two listeners")
        ports.add(port)
        out[name] = (host, port)
    if not out:
        raise ListenerError(f"{key}: no listener given")
    return out


def parse_protocol_map(value: str) -> dict[str, str]:
    key = "listener.security.protocol.map"
    out: dict[str, str] = {}
    for item in (i.strip() for i in value.split(",")):
        if not item:
            continue
        name, sep, protocol = item.partition(":")
        name, protocol = name.strip().upper(), protocol.strip().upper()
        if not sep or not _NAME.fullmatch(name):
            raise ListenerError(f"{key}: expected NAME:PROTOCOL, got {item!r}")
        if protocol not in PROTOCOLS:
            raise ListenerError(
                f"{key}: {item!r}: unknown security protocol (one of {', '.join(PROTOCOLS)})"
            )
        out[name] = protocol
    return out


@dataclasses.dataclass(frozen=True, slots=True)
class ListenerSetup:
    listeners: tuple[Listener, ...]
    advertised: dict[str, tuple[str, int]]  # explicit advertised.listeners entries
    inter_broker: str  # listener name for broker-to-broker connections

    def by_name(self, name: str) -> Listener:
        return next(lst for lst in self.listeners if lst.name == name)

    def advertised_address(self, name: str, bound_port: int | None = None) -> tuple[str, int]:
        """What clients are told for listener `name`: its advertised.listeners entry,
        else its own address (the port actually bound, when it asked for port 0)."""
        if name in self.advertised:
            return self.advertised[name]
        lst = self.by_name(name)
        return connect_address(lst.host, bound_port or lst.port)


def resolve(
    listeners: str,
    advertised: str | None,
    protocol_map: str,
    inter_broker_name: str | None,
    inter_broker_protocol: str | None,
) -> ListenerSetup:
    """Kafka's rules for these five keys (None: the key is not set)."""
    protocols = parse_protocol_map(protocol_map)
    bound = parse_addresses(listeners, "listeners")
    out = []
    for name, (host, port) in bound.items():
        protocol = protocols.get(name)
        if protocol is None:
            raise ListenerError(
                f"listener.security.protocol.map: no security protocol for listener {name}"
            )
        out.append(Listener(name, host, port, protocol))
    adv = parse_addresses(advertised, "advertised.listeners") if advertised else {}
    for name in adv:
        if name not in bound:
            raise ListenerError(f"advertised.listeners: {name} is not a listener in listeners")
    if inter_broker_name is not None and inter_broker_protocol is not None:
        raise ListenerError(
            "Only one of inter.broker.listener.name and security.inter.broker.protocol "
            "should be set"
        )
    if inter_broker_name is not None:
        inter = inter_broker_name.strip().upper()
        key = "inter.broker.listener.name"
    else:
        inter = (inter_broker_protocol or "PLAINTEXT").strip().upper()
        key = "security.inter.broker.protocol"
        if inter not in PROTOCOLS:
            raise ListenerError(f"{key}: unknown security protocol {inter!r}")
    if inter not in bound:
        raise ListenerError(
            f"{key}: the inter-broker listener {inter} is not a listener; "
            f"the listeners are {', '.join(bound)}"
        )
    return ListenerSetup(tuple(out), adv, inter)

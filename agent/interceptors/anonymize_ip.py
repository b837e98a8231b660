"""`anonymize_ip` interceptor: the client address of parsed records, truncated (IPv4 to
its /24: 203.0.113.57 becomes 203.0.113.0; IPv6 to its /48, the last 80 bits zeroed)
or hashed (the first 16 hex digits of HMAC-SHA256 keyed by `salt`); a value that is
no address is left as it is and counted.

`mode: truncate` keeps the network and zeroes the host part: an IPv4 address keeps
its /24 (203.0.113.57 becomes 203.0.113.0), an IPv6 address its /48, the last 80
bits zeroed (2001:db8:85a3:8d3::7348 becomes 2001:db8:85a3::), as Google Analytics'
IP anonymisation does; an IPv4-mapped IPv6 address (::ffff:203.0.113.57,
an IPv4 client on a dual-stack socket) is truncated as IPv4 (::ffff:203.0.113.0).
`mode: hash` replaces the address with the first 16 hex digits (64 bits) of
HMAC-SHA256 keyed by `salt` over the address's bytes (4 for IPv4, IPv4-mapped ones
included; 16 for IPv6), so one client keeps one stable pseudonym however it was
written, and without the salt nobody can try the 2^32 IPv4 addresses to reverse it.

A value that is no address (`unix:`, a list such as "203.0.113.57, 10.0.0.1", a
number) is left as it is and counted in `logflume_agent_ip_unparsable_total`;
anonymised ones in `logflume_agent_ip_anonymized_total`. A null or missing field,
and an event without a record, are left alone, uncounted: a line the parser could
not parse travels as its raw body, address included (a `regex_filter` with
`header: parse_error` can drop those), and so does every event to a sink with
`format: raw`. Results are cached per distinct value.
"""

from __future__ import annotations

import dataclasses
import hmac
import ipaddress
from collections.abc import Callable
from typing import Literal

from agent.api import Context, Event, Interceptor, register

MIN_SALT = 16
_V4_KEEP = 0xFFFF_FF00  # /24
_V6_KEEP = ((1 << 48) - 1) << 80  # /48
_CACHE_MAX = 65536
_MISSING = object()

Address = ipaddress.IPv4Address | ipaddress.IPv6Address


def parse(text: str) -> Address | None:
    """The address `text` writes, an IPv4-mapped IPv6 one as its IPv4 address; None
    when it is none."""
    try:
        addr = ipaddress.ip_address(text)
    except ValueError:
        return None
    if isinstance(addr, ipaddress.IPv6Address) and addr.ipv4_mapped is not None:
        return addr.ipv4_mapped
    return addr


def truncate(text: str) -> str | None:
    """IPv4 to its /24, IPv6 to its /48 (see the module's docstring); None: no address."""
    addr = parse(text)
    if addr is None:
        return None
    if isinstance(addr, ipaddress.IPv4Address):
        net = str(ipaddress.IPv4Address(int(addr) & _V4_KEEP))
        # a mapped address stays mapped, written as Python >= 3.13 writes it
        return "::ffff:" + net if ":" in text else net
    return str(ipaddress.IPv6Address(int(addr) & _V6_KEEP))


def hasher(salt: str) -> Callable[[str], str | None]:
    """The `hash` mode's function for `salt`; None: no address."""
    key = salt.encode()

    def digest(text: str) -> str | None:
        addr = parse(text)
        if addr is None:
            return None
        return hmac.digest(key, addr.packed, "sha256").hex()[:16]

    return digest


@dataclasses.dataclass
class AnonymizeIpConfig:
    field: str = "client"  # the record field holding the address (the nginx parser's `client`)
    mode: Literal["truncate", "hash"] = "truncate"  # truncate: IPv4 /24, IPv6 /48; hash: HMAC
    salt: str | None = dataclasses.field(
        default=None, repr=False
    )  # mode hash: the HMAC key, a secret of 16+ characters (never logged): `${file:/path}`


@register("interceptor", "anonymize_ip")
class AnonymizeIp(Interceptor):
    """Anonymises one field of parsed records; owned by one source's pipeline (single task)."""

    Config = AnonymizeIpConfig

    @classmethod
    def validate(cls, config: AnonymizeIpConfig) -> list[str]:
        errors = [] if config.field else ["field: empty"]
        if config.mode != "hash":
            return errors + (["salt: only used with mode: hash"] if config.salt else [])
        if config.salt is None:
            errors.append(
                f"salt: required with mode: hash (a secret of at least {MIN_SALT} characters)"
            )
        elif len(config.salt) < MIN_SALT:
            errors.append(
                f"salt: too short ({len(config.salt)} characters): "
                f"a secret of at least {MIN_SALT} characters"
            )
        return errors

    def __init__(self, config: AnonymizeIpConfig, context: Context):
        super().__init__(config, context)
        self._convert: Callable[[str], str | None] = truncate
        if config.mode == "hash":
            assert config.salt is not None  # validate() requires it
            self._convert = hasher(config.salt)
        self._cache: dict[str, str | None] = {}
        labels = {"component": context.name}
        self._done = context.metrics.counter(
            "logflume_agent_ip_anonymized_total", "Addresses anonymised (anonymize_ip)", **labels
        )
        self._bad = context.metrics.counter(
            "logflume_agent_ip_unparsable_total",
            "Values anonymize_ip left as they were: no IP address",
            **labels,
        )

    def intercept(self, events: list[Event]) -> list[Event]:
        field, cache, done, bad = self.config.field, self._cache, 0, 0
        for e in events:
            rec = e.record
            if rec is None:
                continue
            value = rec.get(field)
            if value is None:
                continue
            if not isinstance(value, str):
                bad += 1
                continue
            out = cache.get(value, _MISSING)
            if out is _MISSING:
                if len(cache) >= _CACHE_MAX:
                    cache.clear()
                out = cache[value] = self._convert(value)
            if out is None:
                bad += 1
            else:
                rec[field] = out
                done += 1
        if done:
            self._done.inc(done)
        if bad:
            self._bad.inc(bad)
        return events

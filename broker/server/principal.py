"""Who is on a connection: Kafka's principal of an SSL client.

A client that presented a verified certificate is `User:<name>`, where name is the
certificate's subject DN in RFC 2253 form (`CN=web1,OU=ops,O=acme`: most specific
attribute first) passed through `ssl.principal.mapping.rules`; any other client is
`User:ANONYMOUS`. The rules are Kafka's: a comma-separated list of
`RULE:pattern/replacement/[LU]` and `DEFAULT`, tried in order; a RULE applies when
its (Java) regex matches the whole DN, the replacement may use `$1`..., and a
trailing L or U lower- or upper-cases the result; DEFAULT keeps the DN as it is.
When no rule applies the client is refused, as Kafka refuses it. Pure.
"""

from __future__ import annotations

import dataclasses
import re

from cryptography import x509

ANONYMOUS = "User:ANONYMOUS"
_RULE = re.compile(r"\s*(?:(DEFAULT)|RULE:((?:\\.|[^\\/])*)/((?:\\.|[^\\/])*)/([LU]?))\s*(?:,|$)")
_GROUP_REF = re.compile(r"\$(\d+)")


class NoMatchingRule(ValueError):
    """No ssl.principal.mapping.rules entry applies to a DN."""


@dataclasses.dataclass(frozen=True, slots=True)
class _Rule:
    pattern: re.Pattern | None  # None: DEFAULT
    replacement: str = ""
    case: str = ""

    def apply(self, dn: str) -> str | None:
        if self.pattern is None:
            return dn
        m = self.pattern.fullmatch(dn)
        if m is None:
            return None
        out = m.expand(self.replacement)
        return out.lower() if self.case == "L" else out.upper() if self.case == "U" else out


def parse_rules(text: str) -> tuple[_Rule, ...]:
    """`ssl.principal.mapping.rules` -> rules; ValueError names what is wrong."""
    rules = []
    pos, text = 0, text.strip()
    while pos < len(text):
        m = _RULE.match(text, pos)
        if m is None or m.end() == pos:
            raise ValueError(f"ssl.principal.mapping.rules: cannot parse {text[pos:]!r}")
        if m.group(1):
            rules.append(_Rule(None))
        else:
            try:
                pattern = re.compile(m.group(2))
            except re.error as e:
                raise ValueError(f"ssl.principal.mapping.rules: {m.group(2)!r}: {e}") from None
            # Java's $1 becomes \g<1>; a literal backslash must stay one.
            replacement = _GROUP_REF.sub(r"\\g<\1>", m.group(3).replace("\\", "\\\\"))
            rules.append(_Rule(pattern, replacement, m.group(4)))
        pos = m.end()
    return tuple(rules) or (_Rule(None),)


def subject_dn(der: bytes) -> str:
    """The subject of a DER certificate in RFC 2253 form, as Java's X500Principal
    writes it."""
    return x509.load_der_x509_certificate(der).subject.rfc4514_string()


def principal(der: bytes | None, rules: tuple[_Rule, ...]) -> str:
    """The principal of a client that presented `der` (None: no certificate)."""
    if der is None:
        return ANONYMOUS
    dn = subject_dn(der)
    for rule in rules:
        name = rule.apply(dn)
        if name is not None:
            return f"User:{name}"
    raise NoMatchingRule(f"no ssl.principal.mapping.rules entry matches {dn!r}")

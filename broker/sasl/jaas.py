"""Kafka's `sasl.jaas.config` values: one JAAS login module entry.

    org.apache.kafka.common.security.plain.PlainLoginModule required
        username="admin" password="admin-secret" user_alice="alice-secret";

A module class name, a control flag (required, requisite, sufficient, optional),
options `name=value` where a value is a bare word or a double-quoted string with
backslash escapes, and a final `;`. Exactly one entry, as Kafka requires of this
property. Pure.
"""

from __future__ import annotations

import dataclasses
import re

FLAGS = ("required", "requisite", "sufficient", "optional")
_TOKEN = re.compile(
    r'\s*(?:(?P<quoted>"(?:\\.|[^"\\])*")|(?P<word>[^\s=;"]+)|(?P<punct>[=;]))', re.S
)


class JaasError(ValueError):
    """A malformed sasl.jaas.config; the message says where."""


@dataclasses.dataclass(frozen=True, slots=True)
class JaasEntry:
    module: str
    flag: str
    options: dict[str, str]


def _tokens(text: str) -> list[tuple[str, str]]:
    out, pos = [], 0
    while pos < len(text):
        if text[pos:].strip() == "":
            break
        m = _TOKEN.match(text, pos)
        if m is None:
            raise JaasError(f"unexpected {text[pos:].strip()[:20]!r}")
        pos = m.end()
        if m.group("quoted") is not None:
            body = m.group("quoted")[1:-1]
            out.append(("value", re.sub(r"\\(.)", r"\1", body, flags=re.S)))
        elif m.group("word") is not None:
            out.append(("word", m.group("word")))
        else:
            out.append((m.group("punct"), m.group("punct")))
    return out


def parse(text: str) -> JaasEntry:
    """One login module entry; JaasError when malformed."""
    toks = _tokens(text)
    if len(toks) < 3 or toks[0][0] != "word" or toks[1][0] != "word":
        raise JaasError("expected '<LoginModule class> <flag> name=value ... ;'")
    module, flag = toks[0][1], toks[1][1]
    if flag.lower() not in FLAGS:
        raise JaasError(f"{flag!r} is not a control flag ({', '.join(FLAGS)})")
    options: dict[str, str] = {}
    i = 2
    while i < len(toks) and toks[i][0] != ";":
        if i + 2 >= len(toks) or toks[i][0] != "word" or toks[i + 1][0] != "=":
            raise JaasError(f"expected name=value at {toks[i][1]!r}")
        if toks[i + 2][0] not in ("value", "word"):
            raise JaasError(f"option {toks[i][1]} has no value")
        options[toks[i][1]] = toks[i + 2][1]
        i += 3
    if i >= len(toks):
        raise JaasError("the entry must end with ';'")
    if i != len(toks) - 1:
        raise JaasError("only one login module entry is allowed")
    return JaasEntry(module, flag.lower(), options)

"""Server-side regular expression subscriptions (KIP-848, ConsumerGroupHeartbeat v1
`SubscribedTopicRegex`).

Kafka evaluates them with RE2/J; this broker with RE2 itself (google-re2), so the
syntax is the same: no backreferences nor lookaround, linear-time matching. A topic
is subscribed when the expression matches its whole name (Java's
`Matcher.matches()`, `fullmatch` here). Differences from RE2/J: RE2 takes the
expression as UTF-8 and Python's `re`-style flags are not accepted inline beyond
RE2's own (`(?i)`, `(?s)`, `(?m)`, `(?U)`), exactly those RE2/J accepts. Kafka's
internal topics (`__consumer_offsets`, `__transaction_state`) never match, as the
Java consumer's `exclude.internal.topics` default.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable

import re2

from common.topic_names import is_internal


class InvalidRegex(ValueError):
    """The expression does not compile (INVALID_REGULAR_EXPRESSION)."""


_OPTIONS = re2.Options()
_OPTIONS.log_errors = False  # a client's bad expression is its error, not the broker's log


@functools.lru_cache(maxsize=256)
def _compiled(regex: str):
    try:
        return re2.compile(regex, _OPTIONS)
    except re2.error as e:
        why = e.args[0].decode(errors="replace") if e.args and isinstance(e.args[0], bytes) else e
        raise InvalidRegex(f"SubscribedTopicRegex {regex!r} is not valid RE2: {why}") from None


def check(regex: str) -> None:
    """Raise InvalidRegex unless `regex` compiles."""
    _compiled(regex)


def matching(regex: str, topics: Iterable[str]) -> set[str]:
    """The names of `topics` that `regex` matches entirely, internal topics left out."""
    pattern = _compiled(regex)
    return {t for t in topics if not is_internal(t) and pattern.fullmatch(t) is not None}

"""Topic name rules, as Kafka enforces them.

A legal name is 1-249 characters from [a-zA-Z0-9._-] and is neither "." nor "..".
Such a name can never contain a path separator, so `<data dir>/<topic>-<n>` and
`meta/topics/<topic>.json` always stay inside the data directory.

The internal topics are Kafka's two (their names and `is_internal` in `common.topic_names`): the
coordinators' `__consumer_offsets` and `__transaction_state`. Only the coordinators write them (clients are refused), and
Metadata marks them `is_internal`; other names starting with "__" are ordinary
topics, as in Kafka.
"""

import re

MAX_NAME_LENGTH = 249
_LEGAL = re.compile(r"[a-zA-Z0-9._-]+")


class InvalidTopicName(ValueError):
    """The topic name breaks Kafka's naming rules."""


def validate_topic_name(name: object) -> str:
    """Return `name` if it is a legal topic name, else raise InvalidTopicName."""
    if not isinstance(name, str) or not name:
        raise InvalidTopicName("topic name is empty")
    if name in (".", ".."):
        raise InvalidTopicName(f"topic name cannot be {name!r}")
    if len(name) > MAX_NAME_LENGTH:
        raise InvalidTopicName(f"topic name is longer than {MAX_NAME_LENGTH} characters")
    if not _LEGAL.fullmatch(name):
        raise InvalidTopicName(
            f"topic name {name!r} has characters other than ASCII letters, digits, '.', '_' and '-'"
        )
    return name

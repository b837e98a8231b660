"""`${VAR}` in configuration values, expanded from the environment as Fluent Bit and
Vector do, so that a file can be shared between hosts and keep secrets out of it:

    ${NAME}            the variable's value; an error when NAME is not set
    ${NAME:-default}   `default` when NAME is unset or empty
    $$                 a literal `$` (so `$${NAME}` stays `${NAME}`)

NAME is letters, digits and `_`, not starting with a digit. Any other `$` is kept as
it is. Values are inserted once: a value that itself holds `${...}` is not expanded
again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_REFERENCE = re.compile(r"\$(?:\$|\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\})")


class UnsetVariable(LookupError):
    """`${name}` without a default, and `name` is not in the environment."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


def expand(text: str, environ: Mapping[str, str]) -> str:
    def replace(m: re.Match) -> str:
        name, default = m.group(1), m.group(2)
        if name is None:
            return "$"
        value = environ.get(name)
        if default is not None and not value:
            return default
        if value is None:
            raise UnsetVariable(name)
        return value

    return _REFERENCE.sub(replace, text)

"""`${VAR}` in configuration values, expanded from the environment as Fluent Bit and
Vector do, so that a file can be shared between hosts and keep secrets out of it:

    ${NAME}            the variable's value; an error when NAME is not set
    ${NAME:-default}   `default` when NAME is unset or empty
    ${file:/path}      the content of the file /path, less one trailing newline (a
                       secret kept in a file only the service can read, as systemd's
                       LoadCredential= or a Kubernetes secret volume give it)
    $$                 a literal `$` (so `$${NAME}` stays `${NAME}`)

NAME is letters, digits and `_`, not starting with a digit. Any other `$` is kept as
it is. Values are inserted once: a value that itself holds `${...}` is not expanded
again.
"""

from __future__ import annotations

import re
from collections.abc import Mapping

_REFERENCE = re.compile(r"\$(?:\$|\{file:([^}]+)\}|\{([A-Za-z_][A-Za-z0-9_]*)(?::-([^}]*))?\})")


class UnsetVariable(LookupError):
    """`${name}` without a default, and `name` is not in the environment."""

    def __init__(self, name: str):
        super().__init__(name)
        self.name = name


class UnreadableFile(OSError):
    """`${file:path}` and the file cannot be read; `strerror` says why."""

    def __init__(self, path: str, strerror: str):
        super().__init__(path, strerror)
        self.path, self.reason = path, strerror


def expand(text: str, environ: Mapping[str, str]) -> str:
    def replace(m: re.Match) -> str:
        path, name, default = m.group(1), m.group(2), m.group(3)
        if path is not None:
            return _read_secret(path)
        if name is None:
            return "$"
        value = environ.get(name)
        if default is not None and not value:
            return default
        if value is None:
            raise UnsetVariable(name)
        return value

    return _REFERENCE.sub(replace, text)


def _read_secret(path: str) -> str:
    try:
        with open(path, encoding="utf-8") as f:
            text = f.read()
    except OSError as e:
        raise UnreadableFile(path, e.strerror or str(e)) from None
    except UnicodeDecodeError:
        raise UnreadableFile(path, "not UTF-8 text") from None
    return text.removesuffix("\n").removesuffix("\r")

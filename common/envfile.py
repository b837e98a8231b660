r"""systemd's `EnvironmentFile=` syntax, so that `logflume agent validate --env-file`
sees the values the agent's unit will give it (/etc/logflume/agent.env):

    # a comment; so is a line starting with ;
    LOGFLUME_SASL_USERNAME=web-01
    LOGFLUME_SASL_PASSWORD="with spaces, a \" and a #"
    LOGFLUME_TLS_CA='/etc/logflume/tls/ca.crt'

One `NAME=value` a line, NAME being letters, digits and `_`, not starting with a
digit; blanks around NAME and before the value are dropped, and so are blanks after
an unquoted value. In double quotes `\"`, `\\`, `\$` and `\`` stand for the
character after the backslash and any other backslash stays; single quotes keep
everything as written; in an unquoted value a backslash keeps the character after it
(`\ ` a trailing blank) and is dropped. Nothing is expanded: `$HOME` stays as
written. A later line for a name wins.

Where systemd guesses, this reader refuses, so that a typo cannot leave a setting
silently unset: a line that is not `NAME=value` (systemd skips it; `export NAME=...`
included), a quote left open (systemd goes on reading the next line), text after a
closing quote (systemd glues it on) and a backslash ending the line (systemd's
continuation line) are errors naming the file and line. Error messages never quote
a value: it may be a password.
"""

from __future__ import annotations

import re
from pathlib import Path

NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]*")
BLANKS = " \t"
_LINE_END = re.compile(r"\r\n?|\n")  # as systemd's; str.splitlines also splits at \x1c, \u2028 ...
_ESCAPED_IN_DOUBLE_QUOTES = '"\\`$'


class EnvFileError(ValueError):
    """A file that cannot be read, or a line of it that is no assignment."""

    def __init__(self, filename: str, line: int | None, message: str):
        where = f"{filename}:{line}" if line is not None else filename
        super().__init__(f"{where}: {message}")
        self.filename, self.line, self.message = filename, line, message


class _Malformed(ValueError):
    pass


def parse_env_file(text: str, filename: str = "<env file>") -> dict[str, str]:
    """The variables `text` assigns, {NAME: value}; `filename` names it in errors."""
    values: dict[str, str] = {}
    for number, line in enumerate(_LINE_END.split(text), start=1):
        stripped = line.strip()
        if not stripped or stripped[0] in "#;":
            continue
        name, equals, value = line.partition("=")
        name = name.strip()
        if not equals:
            raise EnvFileError(filename, number, "expected NAME=value (the line has no '=')")
        if not NAME.fullmatch(name):
            raise EnvFileError(
                filename,
                number,
                f"{name!r} is not a variable name (letters, digits and _, "
                "not starting with a digit; no 'export')",
            )
        try:
            values[name] = _value(value.lstrip(BLANKS))
        except _Malformed as e:
            raise EnvFileError(filename, number, f"{name}: {e}") from None
    return values


def read_env_file(path: str | Path) -> dict[str, str]:
    """`parse_env_file` of the file at `path`; a missing or unreadable file is an
    `EnvFileError` too."""
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as e:
        raise EnvFileError(str(path), None, f"cannot read: {e.strerror or e}") from None
    except UnicodeDecodeError:
        raise EnvFileError(str(path), None, "cannot read: not UTF-8 text") from None
    return parse_env_file(text, str(path))


def _value(text: str) -> str:
    if text[:1] in ("'", '"'):
        return _quoted(text)
    out: list[str] = []
    kept = 0  # length of `out` without its unescaped trailing blanks
    chars = iter(text)
    for c in chars:
        if c == "\\":
            escaped = next(chars, None)
            if escaped is None:
                raise _Malformed("a backslash ends the line (continuation lines are not read)")
            out.append(escaped)
            kept = len(out)
        else:
            out.append(c)
            if c not in BLANKS:
                kept = len(out)
    return "".join(out[:kept])


def _quoted(text: str) -> str:
    quote, i = text[0], 1
    out: list[str] = []
    while i < len(text):
        c = text[i]
        if c == quote:
            if text[i + 1 :].strip(BLANKS):
                raise _Malformed(f"text after the closing {quote}")
            return "".join(out)
        if quote == '"' and c == "\\" and i + 1 < len(text):
            following = text[i + 1]
            out.append(following if following in _ESCAPED_IN_DOUBLE_QUOTES else c + following)
            i += 2
        else:
            out.append(c)
            i += 1
    raise _Malformed(f"the {quote} is not closed on this line")

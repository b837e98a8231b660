"""Templates of a sink's topic and record key: `nginx-{host}`, `{status}`.

A template is text with placeholders `{name}`. A placeholder stands for the event's
value of `name`, looked up in one fixed order:

1. the parsed record's top-level field `name`, when the event has a record and the
   field is there and not null: a string as it is, any other value as JSON writes
   it (`200`, `true`, `{"a":1}`);
2. else the event's header `name` (`host`, `source`, `path`, or one that
   `add_fields` set).

A name the event has in neither place is *missing*: `render_all` gives None for
that event, and the kafka sink sends it to its dead-letter topic with the reason.

Names are letters, digits and `_ . - @`. `{` and `}` are always template syntax
(no topic name can hold them). A template without placeholders is a constant:
`constant` holds its text, and a sink that uses it does nothing per event.
"""

from __future__ import annotations

import dataclasses
import re

import orjson

from agent.api import Event

_NAME = re.compile(r"[A-Za-z0-9_.@-]+")


class TemplateError(ValueError):
    """A malformed template; the message says where."""


@dataclasses.dataclass(frozen=True)
class Template:
    """A parsed template: `parts` alternates literal text and placeholder names,
    starting and ending with a literal (`"a{x}b"` is ("a", "x", "b"))."""

    text: str
    parts: tuple[str, ...]

    @property
    def constant(self) -> str | None:
        """The text when there is no placeholder, else None."""
        return self.parts[0] if len(self.parts) == 1 else None

    @property
    def names(self) -> tuple[str, ...]:
        return self.parts[1::2]

    @property
    def literals(self) -> tuple[str, ...]:
        return self.parts[0::2]

    def render(self, event: Event) -> str | None:
        """The text for `event`; None when a name is missing."""
        parts = self.parts
        if len(parts) == 3 and not parts[0] and not parts[2]:  # "{host}": no join
            return value_of(event, parts[1])
        out = []
        for i, part in enumerate(parts):
            text = value_of(event, part) if i % 2 else part
            if text is None:
                return None
            out.append(text)
        return "".join(out)

    def render_all(self, events: list[Event]) -> list[str | None]:
        """`render` of each event. Events without a record that share a headers dict
        (a source gives a run of events one dict) share one rendering."""
        render = self.render
        out = []
        shared, last = None, None
        for e in events:
            if e.record is not None:
                out.append(render(e))
            elif e.headers is shared:
                out.append(last)
            else:
                shared, last = e.headers, render(e)
                out.append(last)
        return out

    def missing(self, event: Event) -> str | None:
        """The first name `event` lacks, or None."""
        return next((n for n in self.names if value_of(event, n) is None), None)


def value_of(event: Event, name: str) -> str | None:
    """`name`'s value for `event`: its record's field, else its header (see above)."""
    record = event.record
    if record is not None:
        value = record.get(name)
        if value is not None:
            return value if isinstance(value, str) else orjson.dumps(value).decode()
    return event.headers.get(name)


def parse(text: str) -> Template:
    """`text` as a Template; TemplateError names the first problem and its column."""
    parts: list[str] = []
    literal: list[str] = []
    i, n = 0, len(text)
    while i < n:
        c = text[i]
        if c == "}":
            raise TemplateError(f'"}}" without "{{" at column {i + 1} of {text!r}')
        if c != "{":
            literal.append(c)
            i += 1
            continue
        end = text.find("}", i + 1)
        if end < 0:
            raise TemplateError(f'"{{" not closed, at column {i + 1} of {text!r}')
        name = text[i + 1 : end]
        if not _NAME.fullmatch(name):
            raise TemplateError(
                f"placeholder {{{name}}} at column {i + 1} of {text!r}: a name is "
                "letters, digits and _ . - @"
            )
        parts += ["".join(literal), name]
        literal = []
        i = end + 1
    parts.append("".join(literal))
    return Template(text, tuple(parts))

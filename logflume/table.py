"""The tables the admin commands print: columns aligned as Kafka's tools print them,
or, with `--output json`, one JSON array for the whole command with an object per
row, keyed by the column names in snake_case (`LOG-END-OFFSET` -> `log_end_offset`,
`#PARTITIONS` -> `partitions`, `TransactionalId` -> `transactional_id`,
`Duration(min)` -> `duration_min`). A cell
given as a number is a JSON number; a missing one (None) is null, and prints as the
command's own placeholder (`-` in kafka-consumer-groups' tables, `None` in
kafka-transactions'). What is not flat rows (kafka-topics' topics with their
partitions, kafka-configs' entities with their configs) goes out through
`print_json`, the same way."""

from __future__ import annotations

import re
import sys
from collections.abc import Sequence
from typing import TextIO

import orjson

FORMATS = ("text", "json")
Cell = str | int | None


def add_output_argument(parser, help: str | None = None) -> None:
    """`--output text|json`; `help` says what it applies to when not to a table."""
    parser.add_argument(
        "--output",
        dest="output_format",
        choices=FORMATS,
        default="text",
        help=help
        or "text: columns, as Kafka's tools print them (the default); json: an array "
        "of objects, one per row",
    )


def print_json(value: object, out: TextIO | None = None) -> None:
    """`--output json`: `value` (the command's one array) on stdout, indented."""
    (out or sys.stdout).write(orjson.dumps(value, option=orjson.OPT_INDENT_2).decode() + "\n")


def column_key(name: str) -> str:
    """`LOG-END-OFFSET` -> `log_end_offset`, `TransactionalId` -> `transactional_id`."""
    if not name.isupper():
        name = re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "_", name)
    return re.sub(r"[^a-z0-9]+", "_", name.lower()).strip("_")


class Table:
    """Rows under a header, printed once all are in. A command that prints one text
    table per item (kafka-consumer-groups: per group) adds every item's rows to one
    Table for JSON, so that its output is one array."""

    def __init__(self, header: Sequence[str], missing: str = "-", sep: str = " "):
        self.header = list(header)
        self.missing, self.sep = missing, sep
        self.rows: list[list[Cell]] = []

    def add(self, *cells: Cell) -> None:
        assert len(cells) == len(self.header), (cells, self.header)
        self.rows.append(list(cells))

    def to_json(self) -> list[dict]:
        keys = [column_key(h) for h in self.header]
        return [dict(zip(keys, row, strict=True)) for row in self.rows]

    def print(self, output_format: str = "text", out: TextIO | None = None) -> None:
        out = out or sys.stdout
        if output_format == "json":
            print_json(self.to_json(), out)
            return
        text = [self.header] + [[self._text(c) for c in row] for row in self.rows]
        widths = [max(len(r[i]) for r in text) for i in range(len(self.header))]
        for r in text:
            line = self.sep.join(c.ljust(w) for c, w in zip(r, widths, strict=True))
            print(line.rstrip(), file=out)

    def _text(self, cell: Cell) -> str:
        return self.missing if cell is None else str(cell)

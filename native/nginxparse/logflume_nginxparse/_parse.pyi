"""Types of the C extension built from _parse.c, for the type check."""

from typing import Any

def parse_combined(events: list[Any], timed: bool, /) -> list[int]: ...

"""Helpers shared by the agent's sources: line framing and event headers.

`LineSplitter` turns a byte stream into lines in bulk (one `rfind` and one `split`
per chunk, not a loop per byte), caps line length and keeps track of the stream
offset that ends the last complete line, which the tail source uses as the position
it may acknowledge. Modules whose name starts with `_` are helpers, not plugins.
"""

from __future__ import annotations

from common.hostname import this_host


def base_headers(source_name: str, add_host: bool) -> dict[str, str]:
    headers = {"source": source_name}
    if add_host:
        headers["host"] = this_host()
    return headers


class LineSplitter:
    """Splits a byte stream into lines without their newline, capping line length.

    A line longer than `max_line` is cut to `max_line` bytes and emitted as soon as
    the cap is passed; the rest of it is skipped up to its newline, so one huge line
    never holds the stream up or grows memory. `offset` is the absolute stream offset
    just after the newline of the last complete line (including skipped ones): the
    first byte not yet fully consumed. `truncated` counts cut lines (`take_truncated`
    reads and resets it).

    Owned by one reader (one file or one connection); not shared across tasks.
    """

    __slots__ = ("max_line", "offset", "truncated", "_pending", "_partial", "_skipping")

    def __init__(self, max_line: int, offset: int = 0):
        self.max_line = max_line
        self.offset = offset
        self.truncated = 0
        self._pending = b""  # bytes of the current incomplete line
        self._partial = 0  # bytes consumed by the current incomplete line
        self._skipping = False  # inside the unread rest of a truncated line

    @property
    def exact(self) -> bool:
        """False while inside a truncated line (line starts are then not exact)."""
        return not self._skipping

    def feed(self, data: bytes) -> list[bytes]:
        """Complete lines in `data` (and a truncated head of an over-long line)."""
        if self._skipping:
            idx = data.find(b"\n")
            if idx < 0:
                self._partial += len(data)
                return []
            self.offset += self._partial + idx + 1
            self._partial = 0
            self._skipping = False
            data = data[idx + 1 :]
        idx = data.rfind(b"\n")
        if idx < 0:
            lines: list[bytes] = []
            self._hold(data, lines)
            return lines
        # split the chunk as it is (no copy of it without its tail); the last piece
        # is what follows the last newline, the start of a line still incomplete
        lines = data.split(b"\n")
        rest = lines.pop()
        complete = len(self._pending) + idx  # bytes of the complete lines, newlines between
        if self._pending:
            lines[0] = self._pending + lines[0]
            self._pending = b""
        self.offset += self._partial + idx + 1
        self._partial = 0
        if complete > self.max_line:
            cap = self.max_line
            for i, line in enumerate(lines):
                if len(line) > cap:
                    lines[i] = line[:cap]
                    self.truncated += 1
        if rest:
            self._hold(rest, lines)
        return lines

    def take_truncated(self) -> int:
        """Lines cut since the last call (for a metric); resets the count."""
        cut, self.truncated = self.truncated, 0
        return cut

    def _hold(self, data: bytes, out: list[bytes]) -> None:
        if not data:
            return
        pending = self._pending + data if self._pending else data
        self._partial += len(data)
        if len(pending) > self.max_line:
            out.append(pending[: self.max_line])
            self.truncated += 1
            self._pending = b""
            self._skipping = True
        else:
            self._pending = pending

    def flush(self) -> bytes | None:
        """End of stream: the unterminated last line (None if there is none)."""
        line = None if self._skipping or not self._pending else self._pending
        self.offset += self._partial
        self._pending, self._partial, self._skipping = b"", 0, False
        return line

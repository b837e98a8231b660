"""The `file` sink: events appended to rolling files, one per line.

Files are named `<prefix>-<UTC yyyymmdd-HHMMSS>-<seq>.log` in `directory`; the
current file rolls when it reaches `roll_size` bytes or is `roll_interval` old. A
take batch is committed after its lines were written and flushed (and fsynced when
`fsync: true`), so a crash can repeat a batch but never lose one.
"""

from __future__ import annotations

import asyncio
import dataclasses
import os
import time

from agent.api import Channel, Duration, Sink, Size, register
from agent.delivery import Format, SinkCounters, encoder, simple_loop


@register("sink", "file")
class FileSink(Sink):
    """Owns its open file; runs on the agent's loop, writes in a worker thread."""

    @dataclasses.dataclass
    class Config:
        directory: str  # where the files are written (created if missing)
        prefix: str = "events"  # start of file names: `<prefix>-<UTC time>-<seq>.log`
        format: Format = "auto"  # auto: JSON if parsed, else the line; raw: the line; json: JSON
        roll_size: Size = Size(128 << 20)  # the current file rolls once it is this big
        roll_interval: Duration = Duration(3600)  # the current file rolls once it is this old
        fsync: bool = False  # fsync each batch before committing it (survives a host crash)
        batch_events: int = 5000  # most events taken from the channel per write

    @classmethod
    def validate(cls, config) -> list[str]:
        d = config.directory
        probe = d if os.path.isdir(d) else os.path.dirname(os.path.abspath(d))
        if not os.path.isdir(probe) or not os.access(probe, os.W_OK | os.X_OK):
            return [f"directory: {d!r} is not a writable directory (nor can it be created)"]
        if config.roll_size < 1:
            return ["roll_size: must be positive"]
        return []

    def __init__(self, config, context):
        super().__init__(config, context)
        self._file = None
        self._opened = 0.0
        self._seq = 0

    def _roll_if_needed(self) -> None:
        cfg = self.config
        if self._file is not None and (
            self._file.tell() >= cfg.roll_size or time.time() - self._opened >= cfg.roll_interval
        ):
            self._file.close()
            self._file = None
        if self._file is None:
            os.makedirs(cfg.directory, exist_ok=True)
            stamp = time.strftime("%Y%m%d-%H%M%S", time.gmtime())
            while True:
                self._seq += 1
                path = os.path.join(cfg.directory, f"{cfg.prefix}-{stamp}-{self._seq}.log")
                if not os.path.exists(path):
                    break
            self._file = open(path, "ab")
            self._opened = time.time()

    def _write(self, data: bytes) -> None:
        self._roll_if_needed()
        file = self._file
        assert file is not None  # _roll_if_needed opens one
        file.write(data)
        file.flush()
        if self.config.fsync:
            os.fsync(file.fileno())

    async def run(self, channel: Channel) -> None:
        encode = encoder(self.config.format)

        async def deliver(events) -> None:
            await asyncio.to_thread(self._write, b"".join(encode(e) + b"\n" for e in events))

        try:
            await simple_loop(
                channel, self.config.batch_events, deliver, SinkCounters(self.context)
            )
        finally:
            if self._file is not None:
                self._file.close()

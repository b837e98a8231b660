"""Subprocess for the SIGKILL test: puts batches into a file channel forever and
prints `acked <i>` once batch i's Ack settled (the put is durable)."""

import asyncio
import logging
import sys

from agent.api import Ack, Context, Event
from agent.channels.file import FileChannel
from agent.metrics import Registry


async def main(directory: str) -> None:
    ctx = Context("t", "wal", Registry(), directory, logging.getLogger("wal"))
    ch = FileChannel(FileChannel.Config(segment_bytes=64 << 10), ctx)
    await ch.open()
    i = 0
    while True:
        ack = Ack(lambda i=i: print(f"acked {i}", flush=True), copies=100)
        await ch.put([Event(f"b{i}-{j}".encode(), ack=ack) for j in range(100)])
        i += 1
        if i % 10 == 0:
            await asyncio.sleep(0)
        if i % 7 == 0:  # a sink commits now and then, so the checkpoint moves
            batch = await ch.take(150, 0)
            print(f"committed {len(batch.events)}", flush=True)
            await batch.commit()


if __name__ == "__main__":
    asyncio.run(main(sys.argv[1]))

import asyncio
import logging
import os
import signal
import subprocess
import sys

from agent.api import Event
from agent.channels import wal
from agent.channels.file import FileChannel
from common.aio import within
from tests.agent.helpers import context, events


async def opened(tmp_path, **cfg):
    ch = FileChannel(FileChannel.Config(**cfg), context(tmp_path, "fc"))
    await ch.open()
    return ch


async def drain(ch):
    out = []
    while True:
        batch = await ch.take(1000, 0.05)
        if not batch.events:
            return out
        out += [e.body for e in batch.events]
        await batch.commit()


async def test_put_settles_when_durable_take_rollback_commit(tmp_path):
    settled = []
    ch = await opened(tmp_path)
    await ch.put(events(5, settled=settled))
    for _ in range(100):
        if len(settled) == 5:
            break
        await asyncio.sleep(0.01)
    assert len(settled) == 5  # settled by the durable put, before any sink commit
    batch = await ch.take(10, 0.1)
    assert all(e.ack is None for e in batch.events)
    await batch.rollback()
    batch = await ch.take(10, 0.1)
    assert [e.body[:2] for e in batch.events] == [b"e0", b"e1", b"e2", b"e3", b"e4"]
    await batch.commit()
    assert ch.pending() == 0
    await ch.close()


async def test_restart_returns_uncommitted_and_rolled_back_events(tmp_path):
    ch = await opened(tmp_path, segment_bytes=300)
    for i in range(10):
        await ch.put(events(10, prefix=f"b{i}-"))
    first = await ch.take(30, 0.1)
    await first.commit()
    second = await ch.take(20, 0.1)  # in flight when we "crash"
    await ch.close()
    assert len(second.events) == 20
    ch = await opened(tmp_path, segment_bytes=300)
    bodies = await drain(ch)
    assert len(bodies) == 70 and bodies[0].startswith(b"b3-0")
    await ch.close()
    ch = await opened(tmp_path, segment_bytes=300)
    assert ch.pending() == 0
    segments = [n for n in os.listdir(tmp_path) if n.startswith("wal-")]
    assert len(segments) == 1  # committed segments were deleted
    await ch.close()


async def test_bounded_on_disk_put_waits(tmp_path):
    ch = await opened(tmp_path, capacity=20)
    for _ in range(4):
        await ch.put(events(5))
    assert not ch.offer(events(1))
    blocked = asyncio.create_task(ch.put(events(5)))
    await asyncio.sleep(0.05)
    assert not blocked.done()
    batch = await ch.take(10, 0.1)
    await batch.commit()
    await within(blocked, 1)
    assert ch.pending() == 15
    await ch.close()


async def test_corrupt_tail_is_cut_and_quarantined_with_a_log_line(tmp_path, caplog):
    ch = await opened(tmp_path)
    for i in range(3):
        await ch.put(events(10, prefix=f"b{i}-"))
    await ch.close()
    (segment,) = [tmp_path / n for n in os.listdir(tmp_path) if n.startswith("wal-")]
    good_size = segment.stat().st_size
    torn = wal.encode_record(30, events(10, prefix="torn"))[:-7]  # a torn write
    segment.write_bytes(segment.read_bytes() + torn)
    with caplog.at_level(logging.WARNING):
        ch = await opened(tmp_path)
    assert "truncated record" in caplog.text and "quarantined" in caplog.text
    assert segment.stat().st_size == good_size
    assert os.listdir(tmp_path / "quarantine")
    await ch.put(events(5, prefix="after"))
    bodies = await drain(ch)
    assert len(bodies) == 35 and bodies[-1].startswith(b"after4")
    await ch.close()


async def test_flipped_byte_in_the_middle_keeps_the_good_prefix(tmp_path, caplog):
    ch = await opened(tmp_path)
    for i in range(4):
        await ch.put(events(10, prefix=f"b{i}-"))
    await ch.close()
    (segment,) = [tmp_path / n for n in os.listdir(tmp_path) if n.startswith("wal-")]
    data = bytearray(segment.read_bytes())
    records = wal.scan(str(segment), 0, 0).records
    data[records[2].offset + 20] ^= 0xFF
    segment.write_bytes(bytes(data))
    with caplog.at_level(logging.WARNING):
        ch = await opened(tmp_path)
    assert "CRC mismatch" in caplog.text
    bodies = await drain(ch)
    assert len(bodies) == 20  # records 0 and 1 survive; 2 and 3 are quarantined
    await ch.close()


def test_sigkill_mid_write_loses_no_acknowledged_event(tmp_path):
    proc = subprocess.Popen(
        [sys.executable, "-m", "tests.agent.channels.wal_writer", str(tmp_path)],
        stdout=subprocess.PIPE,
        text=True,
    )
    acked, committed = set(), 0
    for line in proc.stdout:
        word, n = line.split()
        if word == "acked":
            acked.add(int(n))
        else:
            committed += int(n)
        if len(acked) >= 300:
            break
    proc.send_signal(signal.SIGKILL)
    proc.wait(10)
    ch = asyncio.run(_reopen_and_drain(tmp_path))
    present = {}
    for body in ch:
        batch, j = body.decode()[1:].split("-")
        present.setdefault(int(batch), set()).add(int(j))
    # every acknowledged batch is fully present, unless a sink committed part of it
    first_uncommitted = committed // 100
    for i in acked:
        if i > first_uncommitted:
            assert present.get(i) == set(range(100)), i


async def _reopen_and_drain(path):
    ch = FileChannel(FileChannel.Config(segment_bytes=64 << 10), context(path, "wal"))
    await ch.open()
    bodies = await drain(ch)
    await ch.close()
    return bodies


def test_a_record_keeps_its_events_headers_record_and_time():
    sent = [
        Event(b"plain"),
        Event(b"timed", time=1_700_000_000_123),
        Event(b"all", {"host": "web-1"}, {"status": 200}, None, 5),
    ]
    back = wal.decode_record(wal.encode_record(7, sent))
    assert [(e.body, e.headers, e.record, e.time) for e in back] == [
        (b"plain", {}, None, None),
        (b"timed", {}, None, 1_700_000_000_123),
        (b"all", {"host": "web-1"}, {"status": 200}, 5),
    ]


async def test_events_taken_from_the_cache_keep_their_time(tmp_path):
    ch = await opened(tmp_path)
    await ch.put([Event(b"x", time=42)])
    batch = await ch.take(10, 0.1)
    assert [e.time for e in batch.events] == [42]
    await batch.commit()
    await ch.close()

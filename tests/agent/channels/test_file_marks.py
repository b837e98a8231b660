"""Source marks in the file channel: stored with the events, handed back at a restart."""

import asyncio
import os

from agent.api import Ack, Event
from agent.channels import wal
from agent.channels.file import FileChannel
from tests.agent.helpers import context


def batch(n, mark, prefix=b"e"):
    ack = Ack(lambda: None, n, mark)
    return [Event(prefix + b"%d" % i, ack=ack) for i in range(n)]


async def opened(tmp_path, **cfg):
    ch = FileChannel(FileChannel.Config(**cfg), context(tmp_path, "fc"))
    await ch.open()
    return ch


async def until_durable(ch, source, key, value):
    for _ in range(200):
        if ch.held_marks(source).get(key) == value:
            return
        await asyncio.sleep(0.01)
    raise AssertionError(ch.held_marks(source))


def test_record_with_marks_round_trips_and_scans(tmp_path):
    events = batch(3, ("tail", "1:2", [30, 8, 99, "/x"]))
    record = wal.encode_record(7, events)
    assert record[0] == wal.MAGIC_MARKS
    assert [e.body for e in wal.decode_record(record)] == [b"e0", b"e1", b"e2"]
    plain = wal.encode_record(10, [Event(b"p")])  # no marks: the old record format
    assert plain[0] == wal.MAGIC
    path = tmp_path / wal.segment_name(7)
    path.write_bytes(record + plain)
    result = wal.scan(str(path), 7, 7)
    assert result.problem is None and [r.first_seq for r in result.records] == [7, 10]
    assert result.marks == [(7, [["tail", "1:2", [30, 8, 99, "/x"]]])]


def test_marks_keep_the_last_by_sequence_per_source_and_key():
    marks = wal.Marks()
    marks.add(10, [["s", "k", 2], ["t", "k", 5]])
    marks.add(4, [["s", "k", 1]])  # older (from a checkpoint or an earlier segment)
    marks.add(12, [["s", "j", 3]])
    assert marks.of("s") == {"k": 2, "j": 3} and marks.of("t") == {"k": 5}
    assert wal.Marks(marks.to_json()).last == marks.last


def test_marks_are_bounded():
    marks = wal.Marks()
    for i in range(wal.MAX_MARKS + 1):
        marks.add(i, [["s", str(i), i]])
    assert len(marks.last) <= wal.MAX_MARKS
    assert marks.of("s")[str(wal.MAX_MARKS)] == wal.MAX_MARKS  # the newest stay


async def test_held_marks_survive_a_crash_and_deleted_segments(tmp_path):
    ch = await opened(tmp_path, segment_bytes=200, checkpoint_interval=0.02)
    for i in range(1, 6):
        await ch.put(batch(10, ("tail", "1:2", [i * 100, 8, 99, "/x"])))
    await until_durable(ch, "tail", "1:2", [500, 8, 99, "/x"])
    while ch.pending():  # a sink delivers all: the floor passes old segments
        b = await ch.take(100, 0.1)
        await b.commit()
    await asyncio.sleep(0.1)  # a checkpoint with the marks; old segments deleted
    assert len([n for n in os.listdir(tmp_path) if n.startswith("wal-")]) < 5
    for task in ch._tasks:  # a "crash": no close, nothing more written
        task.cancel()
    again = await opened(tmp_path, segment_bytes=200)
    assert again.held_marks("tail") == {"1:2": [500, 8, 99, "/x"]}
    assert again.held_marks("other") == {}
    await again.close()
    await ch.close()


async def test_marks_count_only_once_durable(tmp_path):
    ch = await opened(tmp_path)
    ch._sync_wanted = asyncio.Event()  # the syncer never hears of this put
    await ch.put(batch(2, ("tail", "1:2", [10, 8, 99, "/x"])))
    assert ch.held_marks("tail") == {}  # written, not fsynced: not held yet
    await ch.close()  # close syncs
    assert ch.held_marks("tail") == {"1:2": [10, 8, 99, "/x"]}

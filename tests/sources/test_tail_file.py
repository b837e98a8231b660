"""The tailed file's lifecycle on its own (no source, no loop): states, transitions,
events and positions, copy takeover, multiline hold."""

import ast
import os
import re
from pathlib import Path

import pytest

from sources._tail_file import (
    TRANSITIONS,
    FileState,
    Framing,
    IllegalTransition,
    PendingEvent,
    TailedFile,
)
from sources._tail_positions import FP_MAX, SavedPosition
from tests.sources.harness import FakeMetric


def framing(multiline: str | None = None, batch_size: int = 1000) -> Framing:
    return Framing(
        headers={"source": "src"},
        max_line=1000,
        batch_size=batch_size,
        multiline=None if multiline is None else re.compile(multiline.encode()),
        multiline_timeout=0.5,
        lines=FakeMetric(),
        truncated=FakeMetric(),
    )


def opened(path: Path, fr: Framing, offset: int = 0) -> TailedFile:
    st = os.stat(path)
    key = (st.st_dev, st.st_ino)
    fd = os.open(path, os.O_RDONLY)
    f = TailedFile(key, str(path), offset, fr)
    f.open(fd, None, str(path), os.pread(fd, FP_MAX, 0), key)
    return f


def emitted(batches) -> list:
    return [e for batch in batches for e in batch]


def test_every_state_has_a_row_and_dropped_is_final():
    assert set(TRANSITIONS) == set(FileState)
    assert TRANSITIONS[FileState.DROPPED] == frozenset()
    for targets in TRANSITIONS.values():
        assert FileState.NEW not in targets


def test_illegal_transition_raises_and_changes_nothing(tmp_path):
    f = TailedFile((1, 2), "x.log", 0, framing())
    with pytest.raises(IllegalTransition, match="new -> gone"):
        f.rotate()  # a file never opened cannot have been rotated
    assert f.state is FileState.NEW

    log = tmp_path / "a.log"
    log.write_bytes(b"one\ntwo\n")
    f = opened(log, framing())
    f.close(FileState.SEALED)
    for illegal in (f.rotate, f.close, lambda: f.close(FileState.IDLE)):
        with pytest.raises(IllegalTransition):
            illegal()
        assert f.state is FileState.SEALED and f.fd is None


def test_only_a_copy_hands_over_and_only_to_its_original(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b"x" * 200 + b"\n")
    other = TailedFile((1, 1), "other", 0, framing())
    f = opened(log, framing())
    with pytest.raises(IllegalTransition):
        other.take_over(f)  # f is no copy of `other`
    assert f.state is FileState.OPEN and other.state is FileState.NEW
    f.close()


def test_read_events_acks_and_close_to_a_ghost(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b"a\nbb\nccc\npartial")
    fr = framing(batch_size=2)
    f = opened(log, fr)
    assert f.state is FileState.OPEN and f.headers == {"source": "src", "path": str(log)}
    data = f.read(1 << 16)
    assert f.read_offset == len(data) and f.read(1 << 16) == b""
    batches = list(f.events(data))
    assert [[e.body for e in b] for b in batches] == [[b"a", b"bb"], [b"ccc"]]
    assert fr.lines.value == 3
    batches[1][0].settle()  # out of order: nothing delivered yet
    assert f.tracker.delivered == 0
    for e in batches[0]:
        e.settle()
    assert f.tracker.delivered == len(b"a\nbb\nccc\n")

    f.rotate()
    assert f.state is FileState.GONE
    last = emitted(f.last_events())
    assert [e.body for e in last] == [b"partial"]
    f.close()
    assert f.state is FileState.CLOSED and f.fd is None and f.splitter is None
    assert f.read_offset == len(b"a\nbb\nccc\npartial")
    last[0].settle()
    pos = f.position()
    assert pos.offset == f.read_offset and pos.path == str(log)

    ghost = TailedFile.from_saved(SavedPosition.from_json(pos_json(pos)), fr)
    assert ghost.state is FileState.CLOSED and ghost.matches_head(log.read_bytes())


def pos_json(pos: SavedPosition) -> dict:
    return {f: getattr(pos, f) for f in pos.__dataclass_fields__}


def test_idle_ghost_stays_closed_until_it_grows(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b"line\n")
    f = opened(log, framing())
    emitted(f.events(f.read(100)))
    f.close(FileState.IDLE)
    assert f.stays_closed(5, compressed=False)
    assert not f.stays_closed(6, compressed=False)


def test_multiline_event_is_held_and_a_close_resumes_at_its_start(tmp_path):
    log = tmp_path / "a.log"
    content = b"ERR one\n  at a\nERR two\n  at b\n"
    log.write_bytes(content)
    f = opened(log, framing(multiline=r"^\S"))
    out = emitted(f.events(f.read(1000)))
    assert [e.body for e in out] == [b"ERR one\n  at a"]
    assert isinstance(f.held, PendingEvent)
    assert f.held.lines == [b"ERR two", b"  at b"] and f.held.start == len(b"ERR one\n  at a\n")
    assert emitted(f.expired(f.held.updated)) == []  # its timeout has not passed
    for e in out:
        e.settle()
    f.close()
    assert f.read_offset == len(b"ERR one\n  at a\n") == f.tracker.delivered


def test_truncation_makes_a_new_generation_on_the_same_descriptor(tmp_path):
    log = tmp_path / "a.log"
    log.write_bytes(b"old line\n" * 20)
    f = opened(log, framing())
    emitted(f.events(f.read(1 << 16)))
    with open(log, "wb") as fh:
        fh.write(b"new\n")
    head = os.pread(f.fd, FP_MAX, 0)
    assert f.is_replaced(os.stat(log).st_size, head)
    nxt = f.next_generation(head)
    assert f.state is FileState.CLOSED and f.fd is None and f.read_offset == 180
    assert nxt.state is FileState.OPEN and nxt.read_offset == 0 and nxt.key == f.key
    assert [e.body for e in emitted(nxt.events(nxt.read(100)))] == [b"new"]
    nxt.close()


def test_copy_takeover_reads_on_from_the_original_position(tmp_path):
    content = b"".join(b"line %04d\n" % i for i in range(30))
    log, copy_path = tmp_path / "a.log", tmp_path / "a.log.1"
    log.write_bytes(content)
    fr = framing()
    orig = opened(log, fr)
    emitted(orig.events(orig.read(100)))  # read 10 lines of 30
    copy_path.write_bytes(content)
    st = os.stat(copy_path)
    copy = TailedFile((st.st_dev, st.st_ino), str(copy_path), 0, fr)
    copy.wait_for(orig, os.open(copy_path, os.O_RDONLY), None)
    os.truncate(log, 0)
    orig.close()  # truncated: this generation ends
    orig.take_over(copy)
    assert copy.state is FileState.DROPPED and copy.fd is None
    assert orig.state is FileState.OPEN and orig.key == (st.st_dev, st.st_ino)
    rest = emitted(orig.events(orig.read(1 << 16)))
    assert [e.body for e in rest] == [b"line %04d" % i for i in range(10, 30)]
    assert rest[0].headers["path"] == str(copy_path)
    orig.close()


def test_only_the_tailed_file_writes_its_fields():
    """The source and the file table change a TailedFile only through its methods."""
    fields = set(TailedFile.__slots__)
    root = Path(__file__).resolve().parents[2] / "sources"
    for name in ("tail.py", "_tail_scan.py", "_tail_positions.py"):
        tree = ast.parse((root / name).read_text())
        for node in ast.walk(tree):
            if isinstance(node, ast.Call) and getattr(node.func, "id", None) == "setattr":
                pytest.fail(f"{name}:{node.lineno}: setattr")
            targets = []
            if isinstance(node, ast.Assign):
                targets = node.targets
            elif isinstance(node, ast.AugAssign | ast.AnnAssign):
                targets = [node.target]
            for target in targets:
                for t in ast.walk(target):
                    if (
                        isinstance(t, ast.Attribute)
                        and isinstance(t.ctx, ast.Store)
                        and t.attr in fields
                        and not (isinstance(t.value, ast.Name) and t.value.id == "self")
                    ):
                        pytest.fail(f"{name}:{t.lineno}: writes .{t.attr} of another object")


def test_truncated_generation_finishes_in_its_copy_and_is_saved_as_a_copy(tmp_path):
    content = b"".join(b"line %04d\n" % i for i in range(30))
    log, copy_path = tmp_path / "a.log", tmp_path / "a.log.1"
    log.write_bytes(content)
    fr = framing()
    orig = opened(log, fr)
    emitted(orig.events(orig.read(105)))  # 10 lines and half of the 11th
    orig.firm_up(os.pread(orig.fd, FP_MAX, 0), len(content))
    copy_path.write_bytes(content)
    os.truncate(log, 0)
    nxt = orig.next_generation(b"")
    assert orig.state is FileState.CLOSED and orig.read_offset == 100  # a line start
    assert orig.seen_size == len(content)  # what would be abandoned without the copy
    st = os.stat(copy_path)
    fd = os.open(copy_path, os.O_RDONLY)
    orig.finish_in(fd, str(copy_path), content[:FP_MAX], (st.st_dev, st.st_ino))
    assert orig.state is FileState.GONE and orig.key == (st.st_dev, st.st_ino)
    rest = emitted(orig.events(orig.read(1 << 16)))
    assert [e.body for e in rest] == [b"line %04d" % i for i in range(10, 30)]
    pos = orig.position()
    assert pos.copy and pos.path == str(copy_path)
    assert SavedPosition.from_json(pos_json(pos)) == pos
    assert TailedFile.from_saved(pos, fr).is_copy
    orig.close()
    nxt.close()

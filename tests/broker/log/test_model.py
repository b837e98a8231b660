"""Random appends, reads, rolls, retention, truncation and reopenings of a
PartitionLog, checked against a plain list of batches."""

import shutil
import tempfile
from pathlib import Path

from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, invariant, precondition, rule

from broker.log import LogConfig, OffsetOutOfRangeError, PartitionLog
from broker.protocol.records import Codec, iter_batches
from tests.broker.log.util import make_batch

CONFIG = LogConfig(segment_bytes=3000, index_interval_bytes=300, retention_ms=-1)


class LogModel(RuleBasedStateMachine):
    def __init__(self):
        super().__init__()
        self.tmp = Path(tempfile.mkdtemp())
        self.log = PartitionLog(self.tmp / "m-0", CONFIG)
        self.batches: list[tuple[int, int, bytes]] = []  # (base, last, bytes from offset 16)

    def teardown(self):
        self.log.close()
        shutil.rmtree(self.tmp)

    @rule(
        n=st.integers(1, 3),
        count=st.integers(1, 6),
        size=st.integers(1, 700),
        codec=st.sampled_from([Codec.NONE, Codec.LZ4, Codec.GZIP]),
    )
    def append(self, n, count, size, codec):
        raw = [
            make_batch(count, size=size, codec=codec, tag=b"%d" % len(self.batches))
            for _ in range(n)
        ]
        info = self.log.append(b"".join(raw))
        offset = info.first_offset
        for r in raw:
            self.batches.append((offset, offset + count - 1, r[16:]))
            offset += count

    @rule()
    def roll(self):
        self.log.roll()

    @rule(retention=st.integers(0, 8000))
    def retention_by_size(self, retention):
        self.log.update_config(LogConfig(**{**CONFIG.__dict__, "retention_bytes": retention}))
        self.log.delete_old_segments()
        self.batches = [b for b in self.batches if b[0] >= self.log.log_start_offset]

    @precondition(lambda self: self.batches)
    @rule(data=st.data())
    def truncate(self, data):
        i = data.draw(st.integers(0, len(self.batches) - 1))
        base = self.batches[i][0]
        self.log.truncate_to(base)
        del self.batches[i:]
        if not self.batches:
            assert self.log.log_end_offset == base

    @rule(clean=st.booleans())
    def reopen(self, clean):
        if clean:
            self.log.close()
            self.log = PartitionLog(self.tmp / "m-0", CONFIG, clean_shutdown=True)
        else:
            self.log.flush()
            rp = self.log.recovery_point
            self.log = PartitionLog(self.tmp / "m-0", CONFIG, recovery_point=rp)

    @rule(data=st.data(), max_bytes=st.integers(1, 5000), bound=st.booleans())
    def read(self, data, max_bytes, bound):
        log = self.log
        offset = data.draw(st.integers(log.log_start_offset - 2, log.log_end_offset + 2))
        max_offset = (
            data.draw(st.integers(log.log_start_offset, log.log_end_offset)) if bound else None
        )
        if offset < log.log_start_offset or offset > log.log_end_offset:
            try:
                log.read(offset, max_bytes, max_offset)
            except OffsetOutOfRangeError:
                return
            raise AssertionError("expected OffsetOutOfRangeError")
        piece = log.read(offset, max_bytes, max_offset)
        expected = [
            b for b in self.batches if b[1] >= offset and (max_offset is None or b[0] < max_offset)
        ]
        if not expected or (max_offset is not None and offset >= max_offset):
            assert piece is None
            return
        got = list(iter_batches(piece.read_bytes()))
        assert got, "a read with data available returned nothing"
        assert [(b.base_offset, b.last_offset, bytes(b.raw())[16:]) for b in got] == expected[
            : len(got)
        ]
        assert len(got) == 1 or piece.length <= max_bytes
        assert piece.end_offset == got[-1].last_offset + 1  # appends leave no gaps
        if len(got) < len(expected):
            nxt = expected[len(got)]
            seg_bases = [s.base_offset for s in log.segments]
            same_segment = max(x for x in seg_bases if x <= nxt[0]) == max(
                x for x in seg_bases if x <= got[0].base_offset
            )
            assert piece.length + len(nxt[2]) + 16 > max_bytes or not same_segment

    @invariant()
    def ends_agree(self):
        log = self.log
        if self.batches:
            assert log.log_end_offset == self.batches[-1][1] + 1
            assert log.log_start_offset <= self.batches[0][0]
        assert log.size_bytes == sum(s.size for s in log.segments)
        assert log.recovery_point <= log.log_end_offset


LogModel.TestCase.settings = settings(max_examples=60, stateful_step_count=40, deadline=None)
TestLogModel = LogModel.TestCase

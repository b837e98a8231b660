"""broker/log/segments.py: the ordered segments and the one floor(offset) lookup."""

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from broker.log import LogConfig, PartitionLog
from broker.log.segments import LogSegments
from tests.broker.log.util import make_batch


class Seg:
    """What LogSegments reads of a segment, for the pure tests."""

    def __init__(self, base_offset: int):
        self.base_offset = base_offset

    def __repr__(self):
        return f"Seg({self.base_offset})"


def floor_model(bases: list[int], offset: int) -> int:
    below = [i for i, b in enumerate(bases) if b <= offset]
    return below[-1] if below else 0


@settings(max_examples=100, deadline=None)
@given(
    bases=st.lists(st.integers(0, 10_000), min_size=1, max_size=30, unique=True).map(sorted),
    offsets=st.lists(st.integers(-5, 10_100), max_size=30),
)
def test_floor_is_the_last_segment_starting_at_or_below(bases, offsets):
    segments = LogSegments([Seg(b) for b in bases])
    for offset in offsets:
        i = floor_model(bases, offset)
        assert segments.floor_index(offset) == i
        assert segments.floor(offset) is segments[i]
        assert segments.from_floor(offset) == list(segments)[i:]


ops = st.lists(
    st.one_of(
        st.tuples(st.just("add"), st.integers(1, 50)),
        st.tuples(st.just("remove_first"), st.just(0)),
        st.tuples(st.just("remove_last"), st.just(0)),
        st.tuples(st.just("replace"), st.integers(0, 100)),
        st.tuples(st.just("reset"), st.integers(0, 1000)),
    ),
    max_size=40,
)


@settings(max_examples=100, deadline=None)
@given(ops=ops, probes=st.lists(st.integers(0, 3000), min_size=1, max_size=10))
def test_the_base_offsets_stay_in_step_with_the_segments(ops, probes):
    model = [Seg(0)]
    segments = LogSegments(model)
    for op, arg in ops:
        if op == "add":
            seg = Seg(model[-1].base_offset + arg)
            segments.add(seg)
            model.append(seg)
        elif op == "remove_first" and len(model) > 1:
            assert segments.remove_first() is model.pop(0)
        elif op == "remove_last" and len(model) > 1:
            assert segments.remove_last() is model.pop()
        elif op == "replace":
            i = arg % len(model)
            seg = Seg(model[i].base_offset)
            assert segments.replace(i, seg) is model[i]
            model[i] = seg
        elif op == "reset":
            model = [Seg(arg)]
            segments.reset(model[0])
        assert list(segments) == model and len(segments) == len(model)
        assert segments.active is model[-1] and segments.first is model[0]
        for offset in probes:
            assert (
                segments.floor(offset) is model[floor_model([s.base_offset for s in model], offset)]
            )


def test_a_segment_must_follow_the_last_and_a_replacement_keep_its_base():
    segments = LogSegments([Seg(0), Seg(10)])
    with pytest.raises(ValueError):
        segments.add(Seg(10))
    with pytest.raises(ValueError):
        segments.replace(1, Seg(11))


def test_batches_from_walks_every_segment_from_the_one_holding_the_offset(tmp_path):
    log = PartitionLog(tmp_path / "t-0", LogConfig(segment_bytes=300))
    for i in range(12):
        log.append(make_batch(2, tag=b"%d" % i))
    assert len(log.segments) > 3
    for offset in (0, 5, 11, 23):
        pairs = list(log.segments.batches_from(offset))
        assert pairs[0][1].base_offset <= offset <= pairs[0][1].last_offset
        assert [b.base_offset for _, b in pairs] == list(range(offset - offset % 2, 24, 2))
        for seg, b in pairs:
            assert seg is log.segments.floor(b.base_offset)
    assert list(log.segments.batches_from(24)) == []
    log.close()

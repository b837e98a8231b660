"""broker/cluster/partition.py: the high watermark and the ISR check on append (the
seams replication uses)."""

import pytest

from broker.cluster.partition import Partition, PartitionError
from broker.protocol import ErrorCode
from tests.broker.cluster.fakes import FakeLog


def test_high_watermark_is_min_leo_of_isr():
    changes = []
    p = Partition("t", 0, FakeLog(), 0, [0, 1], min_insync_replicas=2, on_change=changes.append)
    p.isr = {0, 1}
    p.append_as_leader(b"abc", required_acks=-1)
    assert p.log_end_offset == 3 and p.high_watermark == 0
    assert p.enough_replicas_for(3) == (False, ErrorCode.NONE)
    p.update_follower_leo(1, 2)
    assert p.high_watermark == 2
    p.update_follower_leo(1, 3)
    assert p.high_watermark == 3 and p.enough_replicas_for(3) == (True, ErrorCode.NONE)
    assert len(changes) == 3
    p.isr = {0}
    with pytest.raises(PartitionError) as e:
        p.append_as_leader(b"x", required_acks=-1)
    assert e.value.code == ErrorCode.NOT_ENOUGH_REPLICAS
    p.append_as_leader(b"x", required_acks=1)
    assert p.high_watermark == 4

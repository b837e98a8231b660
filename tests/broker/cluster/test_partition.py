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


def test_last_stable_offset_follows_transactions_and_the_high_watermark(tmp_path):
    from broker.log.config import LogConfig
    from broker.log.partition import PartitionLog
    from tests.broker.log.test_transactions import plain_batch, txn_batch

    log = PartitionLog(tmp_path / "t-0", LogConfig())
    changes = []
    p = Partition("t", 0, log, 0, [0, 1], on_change=changes.append)
    p.isr = {0, 1}
    p.append_as_leader(plain_batch(b"a", b"b"), required_acks=1)  # 0-1
    p.append_as_leader(txn_batch(0, b"t1", b"t2"), required_acks=1)  # 2-3, pid 7
    p.append_as_leader(plain_batch(b"c"), required_acks=1)  # 4
    p.update_follower_leo(1, 5)
    assert p.high_watermark == 5 and p.last_stable_offset == 2
    p.append_txn_marker(7, 0, commit=True, coordinator_epoch=0)  # 5
    # The marker is not below the HW yet: still unstable.
    assert p.last_stable_offset == 2
    before = len(changes)
    p.update_follower_leo(1, 6)
    assert len(changes) == before + 1  # a waiting read_committed fetch re-reads
    assert p.high_watermark == 6 and p.last_stable_offset == 6
    assert p.read(0, 1 << 20, max_offset=p.last_stable_offset).end_offset == 6
    log.close()


def test_last_stable_offset_is_never_below_the_log_start(tmp_path):
    from broker.log.config import LogConfig
    from broker.log.partition import PartitionLog
    from tests.broker.log.test_transactions import plain_batch, txn_batch

    log = PartitionLog(tmp_path / "t-0", LogConfig())
    p = Partition("t", 0, log, 0, [0])
    p.append_as_leader(txn_batch(0, b"t1"), required_acks=1)  # 0, stays open
    p.append_as_leader(plain_batch(b"a", b"b"), required_acks=1)  # 1-2
    assert p.last_stable_offset == 0
    log.delete_records_before(2)
    assert p.last_stable_offset == 2
    log.close()


def test_a_joining_follower_holds_the_high_watermark_until_zookeeper_settles_it():
    """KIP-497's maximal ISR: once the leader writes a follower into the ISR, the
    controller may elect it, so nothing is committed that the follower lacks."""
    p = Partition("t", 0, FakeLog(), 0, [0, 1])
    p.zk_version = 4
    p.append_as_leader(b"abc", required_acks=1)
    p.update_follower_leo(1, 3)
    assert p.high_watermark == 3 and p.can_join_isr(1)
    p.joining = 1  # the ISR manager is writing ISR [0, 1]
    p.append_as_leader(b"de", required_acks=1)
    assert p.high_watermark == 3
    p.update_follower_leo(1, 4)
    assert p.high_watermark == 4
    p.update_isr([0], 4)  # the same version again (a watch): nothing settled
    assert p.joining == 1
    p.update_isr([0, 1], 5)  # ZooKeeper took it
    assert p.joining is None and p.isr == {0, 1} and p.high_watermark == 4
    p.update_follower_leo(1, 5)
    assert p.high_watermark == 5


def test_following_ends_an_expansion():
    p = Partition("t", 0, FakeLog(), 0, [0, 1])
    p.joining = 1
    p.become_follower(1, 1, [0, 1], 6)
    assert p.joining is None

"""End-transaction markers appended by a coordinator: control batches in the log."""

from broker.log.config import LogConfig
from broker.log.partition import PartitionLog
from broker.protocol.control import ControlType, control_type, coordinator_epoch_of
from broker.protocol.records import BatchBuilder, iter_batches


def test_marker_is_one_control_record_after_the_data(tmp_path):
    log = PartitionLog(tmp_path / "t-0", LogConfig())
    b = BatchBuilder(producer_id=7, producer_epoch=2, base_sequence=0, is_transactional=True)
    b.append(b"v1")
    b.append(b"v2")
    log.append(b.build(), leader_epoch=3)
    info = log.append_txn_marker(7, 2, commit=True, coordinator_epoch=5, leader_epoch=3)
    assert (info.first_offset, info.last_offset) == (2, 2)
    assert log.log_end_offset == 3
    batches = list(iter_batches(log.read(0, 1 << 20).read_bytes()))
    log.close()
    assert [b.is_control for b in batches] == [False, True]
    marker = batches[1]
    assert (marker.producer_id, marker.producer_epoch, marker.partition_leader_epoch) == (7, 2, 3)
    assert marker.is_transactional and marker.base_offset == 2
    (record,) = marker.records()
    assert control_type(record.key) == ControlType.COMMIT
    assert coordinator_epoch_of(record.value) == 5

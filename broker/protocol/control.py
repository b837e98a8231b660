"""Control records: the end-transaction markers a coordinator writes (KIP-98).

A marker is a batch of its own with the transactional and control attributes set,
the producer id and epoch of the transaction it ends, base sequence -1 and exactly
one record:

    key    version int16 = 0, type int16 (0 ABORT, 1 COMMIT)
    value  version int16 = 0, coordinator_epoch int32

Consumers never see control records as data; read_committed consumers use them (and
the aborted-transactions list of a fetch) to drop the records of aborted
transactions.
"""

from __future__ import annotations

import enum
import struct
import time

from broker.protocol.records import BatchBuilder

_KEY = struct.Struct(">hh")
_VALUE = struct.Struct(">hi")


class ControlType(enum.IntEnum):
    ABORT = 0
    COMMIT = 1


def end_txn_marker_batch(
    producer_id: int,
    producer_epoch: int,
    commit: bool,
    coordinator_epoch: int,
    timestamp_ms: int | None = None,
) -> bytes:
    """The bytes of one end-transaction marker batch at base offset 0."""
    b = BatchBuilder(
        producer_id=producer_id,
        producer_epoch=producer_epoch,
        is_transactional=True,
        is_control=True,
    )
    kind = ControlType.COMMIT if commit else ControlType.ABORT
    b.append(
        _VALUE.pack(0, coordinator_epoch),
        key=_KEY.pack(0, kind),
        timestamp_ms=int(time.time() * 1000) if timestamp_ms is None else timestamp_ms,
    )
    return b.build()


def control_type(key: bytes | None) -> ControlType:
    """The type of a control record from its key; ValueError if it is not a marker."""
    if key is None or len(key) < _KEY.size:
        raise ValueError("control record key too short")
    _version, kind = _KEY.unpack_from(key)
    return ControlType(kind)


def coordinator_epoch_of(value: bytes | None) -> int:
    """The coordinator epoch of an end-transaction marker's value."""
    if value is None or len(value) < _VALUE.size:
        raise ValueError("end transaction marker value too short")
    return _VALUE.unpack_from(value)[1]

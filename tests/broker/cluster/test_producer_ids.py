"""Producer-id blocks (broker/cluster/producer_ids.py): unique across restarts with
the single node's file store, and one reservation at a time."""

import asyncio

from broker.cluster.producer_ids import FileBlockStore, ProducerIdBlocks


def _ids(tmp_path, block_size=1000) -> ProducerIdBlocks:
    """What a (re)started single node hands ids out of."""
    return ProducerIdBlocks(FileBlockStore.in_data_dir(tmp_path).reserve, block_size)


def _next(ids: ProducerIdBlocks, n: int = 1) -> list[int]:
    async def take():
        return [await ids.next_id() for _ in range(n)]

    return asyncio.run(take())


def test_ids_are_unique_across_restarts(tmp_path):
    seen = set()
    for _ in range(3):  # each "restart" builds new blocks on the same data dir
        for pid in _next(_ids(tmp_path, block_size=10), 25):
            assert pid not in seen
            seen.add(pid)
    assert (tmp_path / "meta" / "producer-id-block").read_text().strip() == "90"


def test_restart_skips_the_rest_of_a_block(tmp_path):
    assert _next(_ids(tmp_path, block_size=100), 3) == [0, 1, 2]
    assert _next(_ids(tmp_path, block_size=100)) == [100]


def test_corrupt_pointer_continues_above_every_earlier_id(tmp_path, caplog):
    [first] = _next(_ids(tmp_path))
    (tmp_path / "meta" / "producer-id-block").write_text("\x00garbage")
    [pid] = _next(_ids(tmp_path))
    assert pid > first + 10**12
    assert "unreadable" in caplog.text
    assert _next(_ids(tmp_path)) > [pid]


def test_concurrent_callers_share_one_reservation_per_block():
    reserved = []

    async def reserve(size: int) -> int:
        reserved.append(size)
        await asyncio.sleep(0)  # a ZooKeeper round trip
        return 1000 * len(reserved)

    async def main():
        ids = ProducerIdBlocks(reserve, block_size=4)
        return await asyncio.gather(*(ids.next_id() for _ in range(6)))

    assert sorted(asyncio.run(main())) == [1000, 1001, 1002, 1003, 2000, 2001]
    assert reserved == [4, 4]

from broker.groups.producer_ids import ProducerIdManager


def test_ids_are_unique_across_restarts(tmp_path):
    seen = set()
    for _ in range(3):  # each "restart" builds a new manager on the same data dir
        ids = ProducerIdManager.for_data_dir(tmp_path, block_size=10)
        for _ in range(25):
            pid = ids.next_id()
            assert pid not in seen
            seen.add(pid)
    assert (tmp_path / "meta" / "producer-id-block").read_text().strip() == "90"


def test_restart_skips_the_rest_of_a_block(tmp_path):
    a = ProducerIdManager.for_data_dir(tmp_path, block_size=100)
    assert [a.next_id() for _ in range(3)] == [0, 1, 2]
    b = ProducerIdManager.for_data_dir(tmp_path, block_size=100)
    assert b.next_id() == 100


def test_corrupt_pointer_continues_above_every_earlier_id(tmp_path, caplog):
    a = ProducerIdManager.for_data_dir(tmp_path)
    first = a.next_id()
    (tmp_path / "meta" / "producer-id-block").write_text("\x00garbage")
    pid = ProducerIdManager.for_data_dir(tmp_path).next_id()
    assert pid > first + 10**12
    assert "unreadable" in caplog.text
    assert ProducerIdManager.for_data_dir(tmp_path).next_id() > pid

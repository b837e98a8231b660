from broker.log import OffsetIndex, TimeIndex


def test_offset_index_lookups_and_truncation(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 100, 8 * 1000, active=True)
    assert idx.lookup(150) == (100, 0)
    for i in range(1, 200):
        idx.append(100 + i * 10, i * 1000)
    assert idx.lookup(99) == (100, 0)
    assert idx.lookup(100 + 55) == (150, 5000)
    assert idx.lookup(10**9) == (100 + 1990, 199_000)
    assert idx.lookup_position(5999) == (150, 5000)
    idx.truncate_to(160)
    assert idx.entries == 5 and idx.last_entry() == (150, 5000)
    idx.trim()
    assert (tmp_path / "0.index").stat().st_size == 40
    idx.close()
    again = OffsetIndex(tmp_path / "0.index", 100, 8 * 1000, active=False)
    assert again.entries == 5 and again.lookup(152) == (150, 5000)
    again.sanity_check(10_000)
    again.close()


def test_offset_index_full(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 0, 8 * 3, active=True)
    for i in range(3):
        idx.append(i + 1, i)
    assert idx.is_full
    idx.close()


def test_time_index(tmp_path):
    idx = TimeIndex(tmp_path / "0.timeindex", 1000, 12 * 100, active=True)
    assert idx.lookup(5) == (-1, 1000)
    idx.maybe_append(50, 1001)
    idx.maybe_append(40, 1002)  # not above the last timestamp: skipped
    idx.maybe_append(60, 1005)
    idx.maybe_append(90, 1009)
    assert idx.entries == 3
    assert idx.lookup(70) == (60, 1005)
    assert idx.lookup(49) == (-1, 1000)
    idx.truncate_to(1005)
    assert idx.last_entry() == (50, 1001)
    idx.close()

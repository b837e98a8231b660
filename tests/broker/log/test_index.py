import pytest

from broker.log import OffsetIndex, TimeIndex
from broker.log.index import CorruptIndexError


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
    """A full index refuses entries (the segment rolls before that happens), keeps
    the ones it has and the file's length, and still answers lookups."""
    idx = OffsetIndex(tmp_path / "0.index", 0, 8 * 3, active=True)
    for i in range(3):
        idx.append(i + 1, i * 100)
    assert idx.is_full
    with pytest.raises(CorruptIndexError, match="full"):
        idx.append(4, 300)
    with pytest.raises(CorruptIndexError, match="full"):
        idx.append_unchecked(4, 300)
    assert idx.entries == 3 and idx.last_entry() == (3, 200)
    idx.write_pending()
    assert (tmp_path / "0.index").stat().st_size == 24
    assert idx.lookup(2) == (2, 100)
    assert idx.lookup(10**6) == (3, 200)
    assert idx.lookup_position(150) == (2, 100)
    idx.truncate_to_position(200)
    assert not idx.is_full and idx.last_entry() == (2, 100)
    idx.append(5, 400)
    assert idx.lookup(10**6) == (5, 400)
    idx.close()


def test_offset_index_truncate_to_position(tmp_path):
    idx = OffsetIndex(tmp_path / "0.index", 10, 8 * 10, active=True)
    for i in range(5):
        idx.append(10 + i * 3, i * 100)
    idx.truncate_to_position(201)  # entries before position 201 stay
    assert idx.last_entry() == (16, 200)
    idx.truncate_to_position(200)  # the entry at 200 points at the cut: it goes
    assert idx.last_entry() == (13, 100)
    idx.truncate_to_position(0)
    assert idx.entries == 0 and idx.lookup(50) == (10, 0)
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


def test_active_entries_reach_the_file_when_written_and_at_trim(tmp_path):
    """The active index is in memory: a flush leaves its file alone, `write_pending`
    (a roll's or a close's first step) writes the new entries, trim cuts the file to
    the entries (a truncation may have left more), and a trimmed index made active
    again reads them back."""
    path = tmp_path / "0.index"
    idx = OffsetIndex(path, 0, 8 * 100, active=True)
    for i in range(10):
        idx.append_unchecked(i + 1, i * 100)
    idx.flush()
    assert path.stat().st_size == 0
    idx.write_pending()
    assert path.stat().st_size == 80
    idx.truncate_to(5)  # entries for offsets 1..4 stay
    assert idx.entries == 4 and idx.lookup(100) == (4, 300)
    idx.append(7, 700)
    idx.trim()
    assert path.read_bytes()[32:] == (7).to_bytes(4, "big") + (700).to_bytes(4, "big")
    assert idx.lookup(100) == (7, 700)  # now through the mapping
    idx.truncate_to(7)
    idx.activate()
    assert idx.entries == 4 and idx.last_entry() == (4, 300)
    idx.append(9, 900)
    idx.trim()
    assert path.stat().st_size == 40
    idx.close()
    again = OffsetIndex(path, 0, 8 * 100, active=False)
    assert again.entries == 5 and again.lookup(8) == (4, 300) and again.lookup(9) == (9, 900)
    again.sanity_check(1000)
    again.close()

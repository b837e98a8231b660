"""Position bookkeeping: when the tracker asks for a save, and what a restart resumes from."""

from sources._tail_positions import FP_MAX, DeliveryTracker, SavedPosition, resume_positions


def pos(offset, fp_len=FP_MAX, fp_crc=7, dev=1, ino=2, path="/l/a.log"):
    return SavedPosition(dev, ino, fp_len, fp_crc, offset, path, 100.0, size=offset)


def never(dev, ino, path):
    return False


def test_tracker_tells_only_when_the_delivered_offset_moves():
    told = []
    t = DeliveryTracker(0, lambda: told.append(t.delivered))
    first, second, third = t.slot(10), t.slot(20), t.slot(30)
    second()  # out of order: the prefix is not done, nothing to save
    assert told == [] and t.delivered == 0
    first()  # 10 and 20 done at once: one notice
    assert told == [20]
    third()
    assert told == [20, 30]


def test_resume_takes_the_higher_of_saved_and_held():
    saved = [pos(100)]
    held = [{"1:2": [500, FP_MAX, 7, "/l/a.log"]}]
    assert resume_positions(saved, held, never, 0)[0].offset == 500
    behind = [{"1:2": [50, FP_MAX, 7, "/l/a.log"]}]  # the position file went further
    assert resume_positions(saved, behind, never, 0)[0].offset == 100


def test_resume_needs_every_channel_and_takes_the_least():
    saved = [pos(100)]
    a = {"1:2": [500, FP_MAX, 7, "/l/a.log"]}
    b = {"1:2": [300, FP_MAX, 7, "/l/a.log"]}
    assert resume_positions(saved, [a, b], never, 0)[0].offset == 300
    assert resume_positions(saved, [a, {}], never, 0)[0].offset == 100


def test_resume_stays_within_one_generation():
    other = [{"1:2": [500, FP_MAX, 8, "/l/a.log"]}]  # same inode, other content
    assert resume_positions([pos(100)], other, never, 0)[0].offset == 100
    firmer = [{"1:2": [500, FP_MAX, 8, "/l/a.log"]}]  # the saved fingerprint was provisional
    got = resume_positions([pos(100, fp_len=40, fp_crc=3)], firmer, never, 0)[0]
    assert (got.offset, got.fp_len, got.fp_crc) == (500, FP_MAX, 8)


def test_resume_adds_a_file_found_after_the_last_save_only_if_still_there():
    held = [{"1:9": [70, FP_MAX, 5, "/l/new.log"]}]
    assert resume_positions([pos(100)], held, never, 0) == [pos(100)]
    got = resume_positions([pos(100)], held, lambda d, i, p: (d, i, p) == (1, 9, "/l/new.log"), 5)
    assert got[1] == SavedPosition(1, 9, FP_MAX, 5, 70, "/l/new.log", 5, size=70)


def test_resume_without_held_marks_changes_nothing():
    assert resume_positions(None, [], never, 0) is None  # first run: start_at applies
    assert resume_positions(None, [{}], never, 0) is None
    assert resume_positions([pos(1)], [], never, 0) == [pos(1)]

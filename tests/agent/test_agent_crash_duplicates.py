"""Under crashes: an agent SIGKILLed 5 times at random moments (seeded) while a file
grows at 5,000 lines/s loses no line; at-least-once delivers none three times,
exactly-once none twice (read committed). bench/bench_duplicates.py measures the same
with more rounds."""

import pytest

from bench.bench_duplicates import run


@pytest.mark.parametrize("channel", ["memory", "file"])
def test_sigkill_x5_under_load_loses_nothing_and_never_triples(tmp_path, broker, channel):
    copies = run(tmp_path, broker.bootstrap, channel, seconds=20, kills=5, seed=7)
    assert copies.lost == 0, copies
    assert copies.thrice == 0, copies


@pytest.mark.soak
@pytest.mark.parametrize("channel", ["memory", "file"])
@pytest.mark.parametrize("seed", range(5))
def test_sigkill_x5_soak(tmp_path, broker, channel, seed):
    copies = run(tmp_path, broker.bootstrap, channel, seconds=60, kills=5, seed=seed)
    assert copies.lost == 0 and copies.thrice == 0, copies


@pytest.mark.parametrize("channel", ["memory", "file"])
def test_exactly_once_sigkill_x5_under_load_neither_loses_nor_duplicates(tmp_path, broker, channel):
    copies = run(
        tmp_path, broker.bootstrap, channel, seconds=20, kills=5, seed=7, delivery="exactly_once"
    )
    assert (copies.lost, copies.twice, copies.thrice) == (0, 0, 0), copies

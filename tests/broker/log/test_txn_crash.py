"""A process writing transactions is SIGKILLed at random moments: after each
recovery the transaction index and the ongoing transactions match what the
surviving log says (a model replayed from its batches)."""

import random
import signal
import subprocess
import sys
import time
from pathlib import Path

from broker.log import LogManager
from broker.log.producer_state import marker_of
from broker.log.txn_index import AbortedTxn
from tests.broker.log.txn_crash_writer import CONFIG
from tests.broker.log.util import read_all

REPO = Path(__file__).resolve().parents[3]


def model_of(log) -> tuple[list[AbortedTxn], dict[int, int]]:
    """Aborted transactions and ongoing ones (pid -> first offset) from the batches."""
    ongoing: dict[int, int] = {}
    aborted: list[AbortedTxn] = []
    for b in read_all(log):
        if not b.is_control:
            ongoing.setdefault(b.producer_id, b.base_offset)
            continue
        commit, _ = marker_of(b)
        first = ongoing.pop(b.producer_id, None)
        if first is not None and not commit:
            lso = min(ongoing.values(), default=b.base_offset + 1)
            aborted.append(AbortedTxn(b.producer_id, first, b.base_offset, lso))
    return aborted, ongoing


def test_txn_index_and_ongoing_transactions_survive_sigkill(tmp_path):
    rng = random.Random(98)
    data_dir = tmp_path / "data"
    for round in range(4):
        proc = subprocess.Popen(
            [sys.executable, "-m", "tests.broker.log.txn_crash_writer", str(data_dir), "11"],
            cwd=REPO,
            stdout=subprocess.PIPE,
            text=True,
        )
        lines = [proc.stdout.readline() for _ in range(rng.randint(2, 30))]
        time.sleep(rng.uniform(0, 0.2))
        proc.send_signal(signal.SIGKILL)
        proc.wait(10)
        proc.stdout.close()
        assert all(line.strip() for line in lines), "writer died early"
        manager = LogManager(data_dir, CONFIG)
        log = manager.get("txcrash", 0)
        assert log.log_end_offset >= int(lines[-1])
        aborted, ongoing = model_of(log)
        assert aborted, "the workload aborts transactions"
        assert log.collect_aborted(0, log.log_end_offset + 1) == aborted
        assert sorted(log.producer_state.ongoing.items()) == sorted(
            (first, pid) for pid, first in ongoing.items()
        )
        if round % 2:
            manager.close()
        else:
            for plog in manager.all_logs():
                plog.close()

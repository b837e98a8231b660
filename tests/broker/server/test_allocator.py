"""The broker's malloc thresholds (broker/server/allocator.py), each check in a Python
process of its own so that the test process keeps its allocator as it was."""

import json
import platform
import subprocess
import sys

# A produce request's life, 40 times: its frame, its decompressed records (a bytes
# object, as the lz4 decompressor returns), a few small objects that outlive it.
# Minor page faults of the loop: with the default thresholds every request's
# buffers are fresh pages; with the broker's, the first request's are reused.
REQUESTS = """
import json, resource, sys
from broker.server import allocator

took = allocator.tune() if sys.argv[1] == "tune" else None
def faults():
    return resource.getrusage(resource.RUSAGE_SELF).ru_minflt
kept = []
before = faults()
for _ in range(40):
    frame = bytearray(1 << 20)
    records = bytes(bytearray(3 << 20))
    kept.append(bytes(100))
    del records, frame
print(json.dumps({"took": took, "faults": faults() - before}))
"""
PAGES_PER_REQUEST = (4 << 20) // 4096


def requests(mode: str) -> dict:
    out = subprocess.run(
        [sys.executable, "-c", REQUESTS, mode], capture_output=True, text=True, check=True
    ).stdout
    return json.loads(out)


def test_glibc_takes_the_thresholds_and_nothing_else_is_touched():
    assert requests("tune")["took"] is (platform.libc_ver()[0] == "glibc")


def test_with_the_thresholds_requests_reuse_the_memory_of_the_ones_before():
    tuned = requests("tune")
    if tuned["took"]:
        assert tuned["faults"] < 3 * PAGES_PER_REQUEST
        assert requests("default")["faults"] > 10 * PAGES_PER_REQUEST

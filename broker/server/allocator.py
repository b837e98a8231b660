"""The C allocator's settings of a broker process (glibc's malloc).

Every produce request passes through buffers of its own size (a request of a few
MB: the frame, the decompressed records of its batches). glibc serves an allocation
above its mmap threshold (128 KiB at first, raised to the largest block freed) with
a fresh mmap, and hands back to the kernel free memory at the top of the heap above
its trim threshold; either way the next request's buffers are new pages, and each
4 KiB of them costs a page fault and a zeroed page: ~70,000 faults per million
100-byte records produced (bench_broker's load), half or more of the broker's CPU per
record. With both thresholds high, freed buffers stay in the heap and the next
request reuses them (~200 faults per million records): a broker keeps up to
`TRIM_THRESHOLD` bytes of freed memory at the top of its heap, and only allocations
above `MMAP_THRESHOLD` (far above the default `message.max.bytes`) get pages of
their own.

Anything but glibc (musl, macOS) keeps its own allocator's behaviour.
"""

from __future__ import annotations

import ctypes
import logging

log = logging.getLogger(__name__)

# mallopt parameters (glibc's malloc.h)
_M_TRIM_THRESHOLD = -1
_M_MMAP_THRESHOLD = -3

#: requests up to this size come from the heap (glibc's largest: 32 MiB on 64-bit)
MMAP_THRESHOLD = 32 << 20
#: freed memory at the top of the heap kept for reuse, at most
TRIM_THRESHOLD = 16 << 20


def tune() -> bool:
    """Set the thresholds in this process; whether the allocator is glibc's and took them."""
    try:
        libc = ctypes.CDLL(None)
    except OSError:
        return False
    if not hasattr(libc, "gnu_get_libc_version"):  # not glibc: another mallopt, or none
        return False
    mallopt = libc.mallopt
    mallopt.argtypes = (ctypes.c_int, ctypes.c_int)
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(
        mallopt(_M_TRIM_THRESHOLD, TRIM_THRESHOLD)
    )
    if not ok:
        log.debug("malloc thresholds not taken; the allocator's defaults stay")
    return ok

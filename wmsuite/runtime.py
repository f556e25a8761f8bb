"""Process-wide settings that make model inference on a CPU faster; the CLI applies them to every command.

`keep_freed_memory()`: glibc's malloc hands every block above a sliding threshold (128 KiB at first)
straight back to the kernel when it is freed, so a rollout that allocates and frees the same
tens-of-megabyte activations at every step pays for fresh, zero-filled pages each time (page faults
and kernel time, not arithmetic). Raising the mmap threshold to its maximum and the trim threshold
far above it keeps freed blocks in the heap for the next step, as jemalloc or tcmalloc would. The
cost is that the process keeps its peak heap until it exits. Set WMSUITE_KEEP_FREED_MEMORY=0 to
leave malloc as it is; elsewhere than Linux with glibc this does nothing.
"""

from __future__ import annotations

import ctypes
import os
import platform

M_TRIM_THRESHOLD, M_MMAP_THRESHOLD = -1, -3  # mallopt parameters, <malloc.h>
MMAP_THRESHOLD = 32 << 20
"""Blocks up to this size come from the heap: glibc's largest allowed value on 64-bit systems."""
TRIM_THRESHOLD = 1 << 30
"""Free memory at the top of the heap kept for reuse instead of being returned to the kernel."""


def keep_freed_memory() -> bool:
    """Keep freed blocks up to MMAP_THRESHOLD in the heap for reuse (module docstring). Returns True
    when malloc took the settings, False where they do not apply (not glibc, or turned off by
    WMSUITE_KEEP_FREED_MEMORY=0)."""
    if os.environ.get("WMSUITE_KEEP_FREED_MEMORY", "1") == "0" or platform.system() != "Linux":
        return False
    if platform.libc_ver()[0] != "glibc":
        return False
    libc = ctypes.CDLL(None)  # the process's own symbols, glibc's mallopt among them (no library search)
    # mallopt returns 1 on success; the mmap threshold first, as the trim threshold is read against it
    return bool(libc.mallopt(M_MMAP_THRESHOLD, MMAP_THRESHOLD)) and bool(libc.mallopt(M_TRIM_THRESHOLD, TRIM_THRESHOLD))

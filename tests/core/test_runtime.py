"""keep_freed_memory: after it, a large block comes from the heap (reused after free), not from a fresh
mmap; read back through glibc's own accounting (mallinfo2) in a clean subprocess."""

from __future__ import annotations

import json
import os
import platform
import subprocess
import sys

import pytest

pytestmark = pytest.mark.skipif(platform.system() != "Linux" or platform.libc_ver()[0] != "glibc",
                                reason="mallopt is glibc's")

PROBE = r"""
import ctypes, json
from wmsuite.runtime import keep_freed_memory

class MallInfo2(ctypes.Structure):
    _fields_ = [(name, ctypes.c_size_t) for name in
                ("arena", "ordblks", "smblks", "hblks", "hblkhd", "usmblks", "fsmblks", "uordblks", "fordblks",
                 "keepcost")]

libc = ctypes.CDLL("libc.so.6")
libc.mallinfo2.restype = MallInfo2
libc.malloc.restype = ctypes.c_void_p
took = keep_freed_memory()
before = libc.mallinfo2().hblkhd
block = libc.malloc(16 << 20)  # the size of one step's activations
mapped = libc.mallinfo2().hblkhd - before
libc.free(ctypes.c_void_p(block))
print(json.dumps({"took": took, "mapped": mapped, "arena_free": libc.mallinfo2().fordblks}))
"""


def probe(**env: str) -> dict:
    out = subprocess.run([sys.executable, "-c", PROBE], env={**os.environ, **env}, capture_output=True, text=True,
                         check=True)
    return json.loads(out.stdout)


def test_large_blocks_come_from_the_heap_and_stay_there_after_free():
    kept = probe(WMSUITE_KEEP_FREED_MEMORY="1")
    assert kept["took"] is True
    assert kept["mapped"] == 0  # not a fresh mapping ...
    assert kept["arena_free"] >= 16 << 20  # ... and after free it stays in the heap for the next step


def test_turned_off_leaves_malloc_alone():
    default = probe(WMSUITE_KEEP_FREED_MEMORY="0")
    assert default["took"] is False
    assert default["mapped"] >= 16 << 20  # glibc's default: a block this large gets its own mapping

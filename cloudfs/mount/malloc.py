"""glibc malloc settings that keep a mount within its memory budget.

A mount moves multi-MiB ``bytes`` blocks through many worker threads. With
glibc's defaults each thread gets its own malloc arena (up to 8 per core) and
the mmap threshold grows to 32 MiB after the first large free, so freed blocks
stay in the arenas: measured, a mount with a 64 MiB memory tier grew by ~100 MiB
per 256 MiB file read (620 MiB after six). Two arenas and a fixed 1 MiB mmap
threshold (blocks are mmap'd and given back on free) keep it flat at ~300 MiB.
Other C libraries are left alone.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import logging

log = logging.getLogger(__name__)

_M_MMAP_THRESHOLD = -3
_M_ARENA_MAX = -8


def bound_malloc(arenas: int = 2, mmap_threshold: int = 1024 * 1024) -> bool:
    """Apply the settings (call before worker threads start); False where not glibc."""
    name = ctypes.util.find_library("c")
    if name is None:
        return False
    try:
        mallopt = ctypes.CDLL(name).mallopt
    except (OSError, AttributeError):
        return False
    mallopt.argtypes = [ctypes.c_int, ctypes.c_int]
    mallopt.restype = ctypes.c_int
    ok = bool(mallopt(_M_ARENA_MAX, arenas)) and bool(mallopt(_M_MMAP_THRESHOLD, mmap_threshold))
    if not ok:
        log.info("mallopt refused the memory settings; memory may grow past the budget")
    return ok

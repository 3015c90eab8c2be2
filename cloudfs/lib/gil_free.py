"""``copy``: a slice of a large buffer as new ``bytes``, copied with the GIL released.

A cold block reaches the caches as ``bytes`` through one or two copies: out of the
read-ahead stream's reused buffer (``data/body.py``), out of obstore's answer
(``ufs/s3_native.py``), out of one GET of several blocks into one ``bytes`` each
(``data/loader.py``). ``bytes(view)`` holds the GIL for the memcpy and for the page
faults of the fresh memory it fills (blocks are mmap'd: ``mount/malloc.py``): about
0.45 s per GiB on these VMs, during which the FUSE loop cannot run a line of Python
(RESULTS-cold-cost.md).

Here the new object is made uninitialized (``PyBytes_FromStringAndSize(NULL, n)``, the
C API's own way to build a ``bytes``, legal to fill while nothing else holds it), and
filled by libc's ``memmove`` through ctypes, which releases the GIL for a foreign call.
Buffers are reached through ``PyObject_GetBuffer``, so any buffer will do (``bytes``,
a ``bytearray``, a ``memoryview``, obstore's ``Bytes``) and is held while it is read.
The layout is checked once at import; where the check fails (another interpreter),
``copy`` is plain ``bytes(view)``. Below ``SMALL`` bytes the plain copy is cheaper than
the hand-off of the GIL, and is used too.
"""

from __future__ import annotations

import ctypes
import logging
from typing import Any

log = logging.getLogger(__name__)

SMALL = 256 * 1024
_PYBUF_SIMPLE = 0


class _PyBuffer(ctypes.Structure):  # Py_buffer, as Include/pybuffer.h declares it
    _fields_ = [
        ("buf", ctypes.c_void_p),
        ("obj", ctypes.py_object),
        ("len", ctypes.c_ssize_t),
        ("itemsize", ctypes.c_ssize_t),
        ("readonly", ctypes.c_int),
        ("ndim", ctypes.c_int),
        ("format", ctypes.c_char_p),
        ("shape", ctypes.c_void_p),
        ("strides", ctypes.c_void_p),
        ("suboffsets", ctypes.c_void_p),
        ("internal", ctypes.c_void_p),
    ]


_api = ctypes.pythonapi
_new_bytes = _api.PyBytes_FromStringAndSize
_new_bytes.restype = ctypes.py_object
_new_bytes.argtypes = [ctypes.c_void_p, ctypes.c_ssize_t]
_as_string = _api.PyBytes_AsString
_as_string.restype = ctypes.c_void_p
_as_string.argtypes = [ctypes.py_object]
_get_buffer = _api.PyObject_GetBuffer
_get_buffer.restype = ctypes.c_int
_get_buffer.argtypes = [ctypes.py_object, ctypes.POINTER(_PyBuffer), ctypes.c_int]
_release_buffer = _api.PyBuffer_Release
_release_buffer.restype = None
_release_buffer.argtypes = [ctypes.POINTER(_PyBuffer)]
_memmove = ctypes.memmove  # a foreign call: the GIL is released while it runs


def _copy_outside(source: Any, start: int, stop: int) -> bytes:
    view = _PyBuffer()
    if _get_buffer(source, ctypes.byref(view), _PYBUF_SIMPLE) != 0:
        raise BufferError("no buffer")
    try:
        if not 0 <= start <= stop <= view.len:
            raise ValueError(f"[{start}:{stop}] outside a buffer of {view.len} bytes")
        out: bytes = _new_bytes(None, stop - start)
        _memmove(_as_string(out), view.buf + start, stop - start)
        return out
    finally:
        _release_buffer(ctypes.byref(view))


def _works() -> bool:
    try:
        probe = bytes(range(256)) * 4
        return _copy_outside(bytearray(probe), 3, 1000) == probe[3:1000]
    except Exception as exc:  # not CPython's C API: plain copies
        log.info("copies keep the GIL (%r)", exc)
        return False


_AVAILABLE = _works()


def copy(source: Any, start: int = 0, stop: int | None = None) -> bytes:
    """``bytes(memoryview(source)[start:stop])``, the GIL released for a large one.

    ``source``: anything with the buffer protocol, one byte per item."""
    view = memoryview(source)
    end = view.nbytes if stop is None else min(stop, view.nbytes)
    if not _AVAILABLE or end - start < SMALL or view.itemsize != 1 or not view.contiguous:
        return bytes(view[start:end])
    return _copy_outside(source, start, end)

"""gil_free.copy: the same bytes as a plain slice, from any buffer, the GIL let go."""

from __future__ import annotations

import ctypes
import os
import threading
from collections.abc import Callable

import pytest

from cloudfs.lib import gil_free

BIG = os.urandom(3 * gil_free.SMALL + 17)


@pytest.mark.parametrize("make", [bytes, bytearray, memoryview], ids=["bytes", "bytearray", "view"])
@pytest.mark.parametrize(
    "span", [(0, None), (5, len(BIG) - 3), (gil_free.SMALL, 2 * gil_free.SMALL + 1), (7, 9)]
)
def test_a_copy_is_the_slice(make: type, span: tuple[int, int | None]) -> None:
    start, stop = span
    out = gil_free.copy(make(BIG), start, stop)
    assert type(out) is bytes and out == BIG[start:stop]


def test_a_copy_of_a_slice_of_a_view_and_past_the_end() -> None:
    view = memoryview(bytearray(BIG))[100 : 100 + 2 * gil_free.SMALL]
    assert gil_free.copy(view) == BIG[100 : 100 + 2 * gil_free.SMALL]
    assert gil_free.copy(BIG, 10, len(BIG) + 50) == BIG[10:]


def test_the_native_copy_is_in_use_and_lets_the_gil_go() -> None:
    assert gil_free._AVAILABLE  # CPython: the check at import passed
    # ctypes releases the GIL around every foreign call not made through pythonapi.
    assert not ctypes.memmove._flags_ & ctypes._FUNCFLAG_PYTHONAPI  # type: ignore[attr-defined]


def test_another_thread_runs_python_during_a_large_copy() -> None:
    source = bytearray(os.urandom(1 << 20)) * 96  # 96 MiB: tens of ms per copy
    ticks = 0
    stop = threading.Event()

    def spin() -> None:
        nonlocal ticks
        while not stop.is_set():
            ticks += 1

    def progress(copy: Callable[[], bytes]) -> int:
        """How far the spinner got during the slowest of three copies."""
        during = []
        for _ in range(3):
            before = ticks
            copy()
            during.append(ticks - before)
        return max(during)

    spinner = threading.Thread(target=spin)
    spinner.start()
    try:
        held = progress(lambda: bytes(memoryview(source)))  # the spinner gets one switch slice
        let_go = progress(lambda: gil_free.copy(source))  # it runs throughout
    finally:
        stop.set()
        spinner.join()
    assert let_go > 3 * held, (held, let_go)  # about 10x here

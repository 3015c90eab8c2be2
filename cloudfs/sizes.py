"""Parsing of human-friendly sizes and durations (the command line, job specs, Kubernetes
annotations), and their display."""

from __future__ import annotations

import math
import re
from fractions import Fraction

from cloudfs.errors import UsageError

_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([kmgt]?)(?:i?b)?\s*$", re.IGNORECASE | re.ASCII)
MAX_SIZE = 1 << 62  # 4 EiB: past anything real, within every int64 it is passed on as


def parse_size(text: str) -> int:
    """'4M', '4MiB', '10G', '1048576' -> bytes (binary units)."""
    m = _SIZE.match(text)
    if not m:
        raise UsageError(f"invalid size {text!r} (examples: 4M, 512MiB, 10G)")
    size = int(Fraction(m.group(1)) * _UNITS[m.group(2).lower()])  # exact: no float overflow
    if size > MAX_SIZE:
        raise UsageError(f"invalid size {text!r}: larger than 4 EiB")
    return size


def parse_quantity(text: str) -> int:
    """A size as Kubernetes spells it too: '20Gi', '512Mi' (binary), or as ``parse_size``."""
    text = text.strip()
    return parse_size(text + "B" if text[-1:] in ("i", "I") else text)


def format_quantity(nbytes: int) -> str:
    """Bytes as a Kubernetes quantity in whole MiB, rounded up: 1.5 GiB -> '1536Mi'."""
    return f"{max(1, -(-nbytes // (1 << 20)))}Mi"


def parse_mode(text: str) -> int:
    try:
        mode = int(text, 8)
    except ValueError:
        raise UsageError(f"invalid mode {text!r} (octal, like 0644)") from None
    if not 0 <= mode <= 0o7777:
        raise UsageError(f"invalid mode {text!r} (octal, at most 7777)")
    return mode


def parse_seconds(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise UsageError(f"invalid duration {text!r} (seconds)") from None
    if not math.isfinite(value):
        raise UsageError(f"invalid duration {text!r} (a number of seconds)")
    if value < 0:
        raise UsageError(f"invalid duration {text!r}: negative")
    return value


def format_size(nbytes: float) -> str:
    """1536 -> '1.5 KiB' (binary units, as ``parse_size`` reads them)."""
    value = float(nbytes)
    for unit in ("B", "KiB", "MiB", "GiB", "TiB"):
        if abs(value) < 1024 or unit == "TiB":
            return f"{value:.0f} {unit}" if unit == "B" else f"{value:.1f} {unit}"
        value /= 1024
    raise AssertionError("unreachable")

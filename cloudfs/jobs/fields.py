"""Reading validated fields out of parsed YAML, with the field's path in every message."""

from __future__ import annotations

import errno
from collections.abc import Mapping
from typing import Any

from cloudfs.errors import FsError, UsageError
from cloudfs.sizes import parse_size


class SpecError(FsError):
    """A job spec or scheduler config field is wrong: ``path: what is expected``."""

    errno = errno.EINVAL


def mapping(value: Any, path: str) -> Mapping[str, Any]:
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise SpecError(f"{path}: must be a mapping")
    return value


def no_unknown(value: Mapping[str, Any], known: set[str], path: str) -> None:
    for key in value:
        if key not in known:
            where = f"{path}.{key}" if path else str(key)
            raise SpecError(f"{where}: unknown field (known: {', '.join(sorted(known))})")


def string(value: Any, path: str, *, default: str | None = None) -> str:
    if value is None:
        if default is None:
            raise SpecError(f"{path}: required")
        return default
    if not isinstance(value, str) or not value.strip():
        raise SpecError(f"{path}: must be a non-empty string")
    return value


def whole(value: Any, path: str, *, default: int | None = None, minimum: int = 0) -> int:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise SpecError(f"{path}: must be a whole number ≥ {minimum}")
    return value


def number(value: Any, path: str, *, default: float | None = None, minimum: float = 0) -> float:
    if value is None and default is not None:
        return default
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < minimum:
        raise SpecError(f"{path}: must be a number ≥ {minimum:g}")
    return float(value)


def size(value: Any, path: str, *, default: int | None = None) -> int:
    """Bytes: a whole number or a size like ``4G``."""
    if value is None and default is not None:
        return default
    if isinstance(value, int) and not isinstance(value, bool) and value >= 0:
        return value
    if isinstance(value, str):
        try:
            return parse_size(value)
        except UsageError:
            pass
    raise SpecError(f"{path}: must be a size in bytes like 512M or 4G")


def string_list(value: Any, path: str) -> list[str]:
    if value is None:
        return []
    if not isinstance(value, list) or not all(isinstance(v, str) and v for v in value):
        raise SpecError(f"{path}: must be a list of non-empty strings")
    return list(value)

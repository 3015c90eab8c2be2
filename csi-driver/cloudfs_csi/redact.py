"""Requests as log text, with every secret taken out.

Fields the spec marks ``(csi_secret) = true`` are replaced whole, and the
values of ``mount_flags`` (the spec says they MAY be sensitive) are masked.
"""

from __future__ import annotations

import json
from typing import Any

from google.protobuf.descriptor import FieldDescriptor
from google.protobuf.message import Message

from cloudfs_csi.csi.v1 import csi_pb2 as csi

STRIPPED = "***stripped***"


def _is_secret(field: FieldDescriptor) -> bool:
    return bool(field.GetOptions().Extensions[csi.csi_secret])


def _mask_flag(flag: str) -> str:
    return ",".join(
        part.partition("=")[0] + ("=***" if "=" in part else "") for part in flag.split(",")
    )


def redacted(message: Message) -> dict[str, Any]:
    """The set fields of ``message`` as plain data, secrets replaced."""
    out: dict[str, Any] = {}
    for field, value in message.ListFields():
        if _is_secret(field):
            out[field.name] = STRIPPED
        elif field.name == "mount_flags":
            out[field.name] = [_mask_flag(f) for f in value]
        elif field.message_type is not None and field.message_type.GetOptions().map_entry:
            out[field.name] = dict(value)
        elif field.type == FieldDescriptor.TYPE_MESSAGE:
            repeated = field.is_repeated
            out[field.name] = [redacted(v) for v in value] if repeated else redacted(value)
        elif field.is_repeated:
            out[field.name] = list(value)
        else:
            out[field.name] = value
    return out


def to_log(message: Message) -> str:
    return json.dumps(redacted(message), sort_keys=True, default=str)


def scrub(text: str, secrets: dict[str, str]) -> str:
    """``text`` (a child process's error output) with any secret value masked.

    A value of several lines (a PEM key) is masked whole, and each of its long lines
    alone too (an error may quote one line of it).
    """
    parts = [v for value in secrets.values() for v in (value, *_long_lines(value))]
    for value in sorted(parts, key=len, reverse=True):
        if len(value) >= 4:
            text = text.replace(value, STRIPPED)
    return text


def _long_lines(value: str) -> list[str]:
    lines = [line.strip() for line in value.splitlines()]
    return [line for line in lines if len(line) >= 16] if len(lines) > 1 else []

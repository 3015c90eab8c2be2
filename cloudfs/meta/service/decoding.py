"""Request bodies that are not the message their RPC takes.

gRPC's own handling of a deserializer that raises is to log the protobuf
error with a traceback and answer INTERNAL ("Exception deserializing
request!"): a status that says the server broke, for what is the client's
mistake (a truncated message, a string field that is not UTF-8). The
handlers' deserializer (``decoder``) hands such a body on as ``Undecodable``
instead, and the handler answers INVALID_ARGUMENT.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import grpc
from google.protobuf.message import DecodeError


@dataclass(frozen=True, slots=True)
class Undecodable:
    """A body that did not decode as ``type_name``; ``error`` says why."""

    type_name: str
    error: str


def decoder(request_type: Any) -> Callable[[bytes], Any]:
    """A request deserializer for ``request_type`` that never raises."""

    def decode(body: bytes) -> Any:
        try:
            return request_type.FromString(body)
        except DecodeError as exc:
            return Undecodable(request_type.DESCRIPTOR.full_name, str(exc))

    return decode


def refuse_undecodable(request: Any, context: grpc.ServicerContext) -> None:
    """Abort the call with INVALID_ARGUMENT if ``request`` did not decode."""
    if isinstance(request, Undecodable):
        context.abort(
            grpc.StatusCode.INVALID_ARGUMENT, f"not a {request.type_name}: {request.error}"
        )

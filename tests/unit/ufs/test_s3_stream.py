"""S3ReadStream.readinto: the body goes from the socket into the caller's buffer."""

from __future__ import annotations

import http.client
import io

import pytest
from botocore.response import StreamingBody
from urllib3.response import HTTPResponse

from cloudfs.errors import RemoteIOError
from cloudfs.ufs.s3_stream import S3ReadStream


class FakeSocket:
    def __init__(self, raw: bytes) -> None:
        self._file = io.BytesIO(raw)

    def makefile(self, mode: str) -> io.BytesIO:
        return self._file


def body(payload: bytes, *, declared: int | None = None, decode: bool = False) -> StreamingBody:
    length = len(payload) if declared is None else declared
    raw = b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n" % length + payload
    response = http.client.HTTPResponse(FakeSocket(raw))  # type: ignore[arg-type]
    response.begin()
    headers = dict(response.headers.items())
    urllib3_response = HTTPResponse(
        body=response, preload_content=False, decode_content=decode, headers=headers
    )
    return StreamingBody(urllib3_response, length)


@pytest.mark.parametrize("decode", [False, True])
def test_readinto_fills_the_buffer_and_is_short_only_at_the_end(decode: bool) -> None:
    payload = bytes(range(256)) * 40
    stream = S3ReadStream(body(payload, decode=decode), "k")
    buffer = bytearray(4000)
    got = bytearray()
    while n := stream.readinto(buffer):
        assert n == 4000 or len(got) + n == len(payload)
        got += buffer[:n]
    assert bytes(got) == payload


def test_a_body_cut_short_is_a_remote_io_error() -> None:
    stream = S3ReadStream(body(b"x" * 100, declared=1000), "k")
    with pytest.raises(RemoteIOError):
        stream.readinto(bytearray(1000))

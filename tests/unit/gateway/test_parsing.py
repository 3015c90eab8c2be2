"""Keys, ranges, chunked bodies and XML: what the gateway parses before touching a volume."""

from __future__ import annotations

import io

import pytest

from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.keys import parse_key
from cloudfs.gateway.objects import _range
from cloudfs.gateway.transfer import ChunkedBody
from cloudfs.gateway.xmlio import parse_complete, parse_delete


def test_keys() -> None:
    assert parse_key("a/b/c.txt").parts == (b"a", b"b", b"c.txt")
    marker = parse_key("a/b/")
    assert marker.is_dir_marker and marker.parts == (b"a", b"b")
    for bad, code in [
        ("a//b", "InvalidArgument"),
        ("./a", "InvalidArgument"),
        ("a/..", "InvalidArgument"),
        ("/a", "InvalidArgument"),
        ("a\0b", "InvalidArgument"),
        ("k" * 1025, "KeyTooLongError"),
        ("é" * 513, "KeyTooLongError"),
        ("n" * 256, "KeyTooLongError"),
    ]:
        with pytest.raises(S3Error) as e:
            parse_key(bad)
        assert e.value.code == code, bad


def test_ranges() -> None:
    assert _range("bytes=0-9", 100, "") == (0, 10)
    assert _range("bytes=90-", 100, "") == (90, 100)
    assert _range("bytes=-10", 100, "") == (90, 100)
    assert _range("bytes=-500", 100, "") == (0, 100)
    assert _range("bytes=50-500", 100, "") == (50, 100)
    for ignored in (None, "", "bytes=x-y", "bytes=5-1", "bytes=0-1,3-4", "items=0-1", "bytes=-"):
        assert _range(ignored, 100, "") is None
    for unsatisfiable in ("bytes=100-", "bytes=-0"):
        with pytest.raises(S3Error) as e:
            _range(unsatisfiable, 100, "")
        assert e.value.status == 416


def test_chunked_body() -> None:
    body = ChunkedBody(
        io.BytesIO(b"5;ext=1\r\nhello\r\n6\r\n world\r\n0\r\nx-trailer: 1\r\n\r\nNEXT")
    )
    assert body.read(3) == b"hel"
    assert body.read() == b"lo world"
    assert body.read() == b""
    with pytest.raises(S3Error):
        ChunkedBody(io.BytesIO(b"zz\r\n")).read()
    with pytest.raises(S3Error):
        ChunkedBody(io.BytesIO(b"10\r\nshort")).read()


def test_xml_documents() -> None:
    ns = 'xmlns="http://s3.amazonaws.com/doc/2006-03-01/"'
    parts = parse_complete(
        f'<CompleteMultipartUpload {ns}><Part><PartNumber>1</PartNumber><ETag>"ab"</ETag></Part>'
        "</CompleteMultipartUpload>".encode()
    )
    assert [(p.number, p.etag) for p in parts] == [(1, "ab")]
    request = parse_delete(b"<Delete><Quiet>true</Quiet><Object><Key>a</Key></Object></Delete>")
    assert request.quiet and request.keys == ["a"]
    for bad in (b"", b"<Delete>", b"<Delete/>", b'<!DOCTYPE x [<!ENTITY a "b">]><Delete/>'):
        with pytest.raises(S3Error) as e:
            parse_delete(bad)
        assert e.value.code == "MalformedXML"

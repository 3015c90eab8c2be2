"""The S3 gateway's numeric fields on any text: a value or an ``S3Error`` (a 4xx), never
another exception (a superscript digit passes ``str.isdigit`` and then fails ``int``,
which the gateway answered 500 with a traceback)."""

from __future__ import annotations

from hypothesis import example, given
from hypothesis import strategies as st

from cloudfs.gateway.errors import S3Error
from cloudfs.gateway.exchange import Request
from cloudfs.gateway.multipart import _part_number
from cloudfs.gateway.xmlio import parse_complete
from tests.fuzz.strategies import FUZZ

NUMBERS = st.one_of(
    st.text(max_size=12),
    st.text(alphabet="0123456789 \u00b2\u0663\uff11-+", max_size=8),
)


@FUZZ
@given(text=NUMBERS)
@example(text="\u00b2")
def test_part_numbers(text: str) -> None:
    req = Request("PUT", "b", "k", {"partNumber": text}, None, None, None)  # type: ignore[arg-type]
    try:
        assert 1 <= _part_number(req) <= 10_000
    except S3Error as e:
        assert 400 <= e.status < 500


@FUZZ
@given(text=NUMBERS)
@example(text="\u00b2")
def test_complete_upload_part_numbers(text: str) -> None:
    body = (
        "<CompleteMultipartUpload><Part><PartNumber>"
        + text.replace("<", "").replace("&", "")
        + '</PartNumber><ETag>"e"</ETag></Part></CompleteMultipartUpload>'
    ).encode()
    try:
        parse_complete(body)
    except S3Error as e:
        assert 400 <= e.status < 500

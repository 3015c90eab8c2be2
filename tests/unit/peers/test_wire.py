"""wire.py: a block's query string round-trips any key, and what a worker refuses."""

from __future__ import annotations

import errno
from http import HTTPStatus

import pytest

from cloudfs.peers import wire


@pytest.mark.parametrize("key", ["a b", "a+b", "100%", "%2B+%20", "日本語/ü+%&=?#", ""])
def test_a_query_round_trips_any_key(key: str) -> None:
    query = wire.Query("s3://b/p q", key, "e+t", 10, 65536, 0, fill=True)
    target = query.target()
    assert target.startswith(wire.BLOCK_PATH + "?") and " " not in target
    assert wire.Query.parse(target.partition("?")[2]) == query


@pytest.mark.parametrize(
    "text",
    [
        "",
        "store_uri=s&key=k&etag=e&object_size=1&block_size=2",  # no index
        "store_uri=s&key=k&etag=e&object_size=1&block_size=2&index=x",
        "store_uri=s&key=k&etag=e&object_size=-1&block_size=2&index=0",
        "store_uri=s&key=k&key=j&etag=e&object_size=1&block_size=2&index=0",
        "store_uri=s&key=%FF&etag=e&object_size=1&block_size=2&index=0",  # not UTF-8
    ],
)
def test_a_query_that_names_no_block_is_a_value_error(text: str) -> None:
    with pytest.raises(ValueError):
        wire.Query.parse(text)


def test_errnos_map_to_statuses_and_the_rest_is_503() -> None:
    assert wire.status_of(errno.ENOENT) == HTTPStatus.NOT_FOUND
    assert wire.status_of(errno.ESTALE) == HTTPStatus.PRECONDITION_FAILED
    assert wire.status_of(errno.EILSEQ) == HTTPStatus.BAD_REQUEST
    assert wire.status_of(errno.EPERM) == HTTPStatus.FORBIDDEN
    assert wire.status_of(errno.EISDIR) == HTTPStatus.CONFLICT
    assert wire.status_of(errno.ENOSPC) == HTTPStatus.SERVICE_UNAVAILABLE

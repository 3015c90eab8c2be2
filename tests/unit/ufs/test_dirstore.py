"""dirstore: the key rules and listing pages of the local and pyarrow stores."""

from __future__ import annotations

import pytest

from cloudfs.errors import InvalidArgument
from cloudfs.types import ObjectInfo
from cloudfs.ufs.dirstore import (
    DIRECTORY,
    TMP_NAME_LEN,
    Described,
    key_parts,
    list_page,
    sorted_after,
    tmp_name,
)

# name -> what it is: "d" a directory, "f" a file, "x" something not listed
ENTRIES = {"b": "f", "a": "d", tmp_name(): "f", "c": "x", "e": "f", "d": "d"}


def describe(key: str, kind: str) -> Described:
    if kind == "d":
        return DIRECTORY
    if kind == "f":
        return ObjectInfo(key=key, size=1, mtime_ns=0, etag="e")
    return None


def test_pages_skip_temporary_and_unlisted_entries_without_counting_them() -> None:
    pages = []
    token: str | None = None
    while True:
        page, rest = list_page("dir", sorted_after(ENTRIES.items(), token), 2, describe)
        pages.append(([o.key for o in page.objects], page.prefixes, page.next_token))
        assert bool(rest) == (page.next_token is not None)
        token = page.next_token
        if token is None:
            break
    assert pages == [
        (["dir/b"], ["dir/a"], "b"),  # the temporary file sorts first: never listed
        (["dir/e"], ["dir/d"], None),  # "c" is looked at, neither listed nor counted
    ]


def test_root_listing_keys_have_no_slash() -> None:
    page, _ = list_page("", sorted_after(ENTRIES.items(), None), 10, describe)
    assert page.prefixes == ["a", "d"]
    assert [o.key for o in page.objects] == ["b", "e"]


def test_key_parts() -> None:
    assert key_parts("") == []
    assert key_parts("a/b.txt") == ["a", "b.txt"]
    for bad in ("/a", "a/", "a//b", "./a", "a/../b", "a\0b"):
        with pytest.raises(InvalidArgument):
            key_parts(bad)
    assert len(tmp_name()) == TMP_NAME_LEN

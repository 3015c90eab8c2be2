"""ChangeLog: journaled changes and reserved numbers survive a restart; a torn last line
(a crash mid-append, never answered) is dropped; compaction keeps only what is left."""

from __future__ import annotations

from pathlib import Path

from cloudfs.meta.client.change_log import ChangeLog
from cloudfs.meta.client.listings import Listings
from cloudfs.types import InodeId


def test_what_was_journaled_is_read_back_after_a_restart(tmp_path: Path) -> None:
    path = str(tmp_path / "tree-changes.log")
    log = ChangeLog(path)
    log.add_numbers(100, 4)
    assert log.take_number() == 100
    made = log.add("create", parent=1, name=b"a".hex(), mode=0o100644, uid=0, gid=0,
                   inode=100, made=True)  # fmt: skip
    renamed = log.add("rename", parent=1, name=b"a".hex(), new_parent=1,
                      new_name=b"b".hex(), inode=100)  # fmt: skip
    log.done(made)
    log.close()
    with open(path, "a") as f:
        f.write('{"k":"change","seq":9,"op":"unl')  # torn by a crash
    again = ChangeLog(path)
    assert [c.seq for c in again.pending] == [renamed.seq]
    assert list(again.numbers) == [101, 102, 103]
    again.done(again.pending[0])
    again.compact()
    again.close()
    assert Path(path).read_text() == '{"k":"numbers","first":101,"count":3}\n'
    third = ChangeLog(path)
    assert not third.pending and list(third.numbers) == [101, 102, 103]
    assert third.add("unlink", parent=1, name="00", inode=7).seq == 1
    third.close()


def test_a_listing_read_to_its_end_says_which_names_are_free() -> None:
    listings = Listings()
    d = InodeId(5)
    listings.page(d, None, 2, [b"a", b"b"])
    assert not listings.lacks(d, b"zz")  # not read to its end yet
    listings.page(d, b"b", 2, [b"c"])
    assert listings.lacks(d, b"zz") and not listings.lacks(d, b"c")
    listings.added(d, b"zz")
    listings.removed(d, b"a")
    assert listings.names(d) == [b"b", b"c", b"zz"]
    other = InodeId(6)
    listings.page(other, None, 2, [b"a", b"b"])
    listings.page(other, b"x", 2, [b"y"])  # not the next page: nothing known
    assert listings.names(other) is None

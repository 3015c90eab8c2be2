"""cloudfs.mountinfo: fields, optional fields, the kernel's escapes, and a real mountinfo."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudfs import mountinfo
from cloudfs.mountinfo import Mount


def test_a_line_from_proc5() -> None:
    line = b"36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 - ext3 /dev/root rw,errors=continue\n"
    assert mountinfo.parse_line(line) == Mount(
        mount_id=36,
        parent_id=35,
        major=98,
        minor=0,
        root="/mnt1",
        mount_point="/mnt/parent",
        options=("rw", "noatime"),
        optional_fields=("master:1",),
        fs_type="ext3",
        source="/dev/root",
        super_options=("rw", "errors=continue"),
    )


def test_optional_fields_none_or_several() -> None:
    none = mountinfo.parse_line(b"22 27 0:21 / /proc rw,relatime - proc proc rw")
    assert none.optional_fields == () and none.fs_type == "proc" and none.device == "0:21"
    several = mountinfo.parse_line(
        b"40 30 0:45 / /mnt/x ro,nosuid shared:7 master:2 propagate_from:1 unbindable"
        b" - fuse.cloudfs s3://bucket/prefix rw,user_id=0,group_id=0"
    )
    assert several.optional_fields == ("shared:7", "master:2", "propagate_from:1", "unbindable")
    assert several.fs_type == "fuse.cloudfs" and several.source == "s3://bucket/prefix"
    assert several.read_only and not none.read_only


@pytest.mark.parametrize(
    ("escaped", "name"),
    [
        (rb"/mnt/with\040space", "/mnt/with space"),
        (rb"/mnt/tab\011here", "/mnt/tab\there"),
        (rb"/mnt/new\012line", "/mnt/new\nline"),
        (rb"/mnt/back\134slash", "/mnt/back\\slash"),
        # A name holding the text "\040": its backslash is escaped, the digits are not.
        (rb"/mnt/literal\134040", "/mnt/literal\\040"),
        (rb"/mnt/all\040\011\012\134\134", "/mnt/all \t\n\\\\"),
        (b"/mnt/caf\xc3\xa9", "/mnt/café"),
        (b"/mnt/not-utf8-\xff", os.fsdecode(b"/mnt/not-utf8-\xff")),
        (b"/mnt/-", "/mnt/-"),
    ],
)
def test_escaped_names(escaped: bytes, name: str) -> None:
    line = b"50 1 0:60 " + escaped + b" " + escaped + b" rw shared:3 - fuse.cloudfs " + escaped
    mount = mountinfo.parse_line(line + b" rw\n")
    assert mount.root == mount.mount_point == mount.source == name


def test_super_options_may_escape_commas() -> None:
    mount = mountinfo.parse_line(rb"1 0 0:1 / / rw - tmpfs none rw,label=a\054b,x\075y")
    assert mount.super_options == ("rw", "label=a,b", "x=y")


@pytest.mark.parametrize(
    "line",
    [
        b"36 35 98:0 /mnt1 /mnt/parent rw,noatime master:1 ext3 /dev/root rw",  # no " - "
        b"36 35 98:0 /mnt1 /mnt/parent rw - ext3 /dev/root",  # no super options
        b"36 35 98:0 /mnt1 - ext3 /dev/root rw",  # too few fields before " - "
        b"x 35 98:0 / /mnt rw - ext3 /dev/root rw",
        b"36 35 98 / /mnt rw - ext3 /dev/root rw",
    ],
)
def test_malformed_lines(line: bytes) -> None:
    with pytest.raises(ValueError):
        mountinfo.parse_line(line)


def test_topmost_is_the_last_mount_at_a_path(tmp_path: Path) -> None:
    info = tmp_path / "mountinfo"
    info.write_bytes(
        b"30 1 0:40 / /mnt rw - tmpfs tmpfs rw\n"
        b"31 30 0:41 / /mnt/a\\040b rw - ext4 /dev/sdb rw\n"
        b"\n"
        b"32 31 0:42 / /mnt/a\\040b rw - fuse.cloudfs file:///d rw\n"
    )
    mounts = mountinfo.read(str(info))
    assert [m.mount_id for m in mounts] == [30, 31, 32]
    top = mountinfo.topmost(mounts, "/mnt/a b")
    assert top is not None and top.mount_id == 32 and top.device == "0:42"
    assert mountinfo.topmost(mounts, "/mnt/a\\040b") is None
    assert mountinfo.topmost(mounts, "/elsewhere") is None


def test_this_process_mountinfo() -> None:
    if not os.path.exists(mountinfo.PROC_MOUNTINFO):
        pytest.skip("no /proc/self/mountinfo")
    mounts = mountinfo.read()
    assert mounts and len({m.mount_id for m in mounts}) == len(mounts)
    ids = {m.mount_id for m in mounts}
    assert any(m.parent_id in ids for m in mounts)
    proc = mountinfo.topmost(mounts, "/proc")
    if proc is None:
        pytest.skip("/proc is not a mount point here")
    assert proc.fs_type == "proc"
    dev = os.stat("/proc").st_dev
    assert (proc.major, proc.minor) == (os.major(dev), os.minor(dev))

"""Special files (fifo, unix socket, mknod) and special names (spaces, non-UTF-8 bytes)."""

from __future__ import annotations

import errno
import os
import socket
import stat
import threading
from pathlib import Path

import pytest

# --- fifos and sockets -------------------------------------------------------------


def test_mkfifo_creates_fifo(mnt: Path) -> None:
    os.mkfifo(mnt / "p", 0o640)
    st = os.stat(mnt / "p")
    assert stat.S_ISFIFO(st.st_mode)
    assert stat.S_IMODE(st.st_mode) == 0o640 & ~_umask()
    assert st.st_size == 0
    assert os.listdir(mnt) == ["p"]


def _umask() -> int:
    old = os.umask(0)
    os.umask(old)
    return old


def test_fifo_passes_data(mnt: Path) -> None:
    os.mkfifo(mnt / "p")
    reader = os.open(mnt / "p", os.O_RDONLY | os.O_NONBLOCK)
    try:
        writer = os.open(mnt / "p", os.O_WRONLY)
        try:
            os.write(writer, b"through the pipe")
        finally:
            os.close(writer)
        os.set_blocking(reader, True)
        assert os.read(reader, 100) == b"through the pipe"
        assert os.read(reader, 100) == b""
    finally:
        os.close(reader)


def test_fifo_blocking_open_with_thread(mnt: Path) -> None:
    os.mkfifo(mnt / "p")
    received: list[bytes] = []

    def read_side() -> None:
        with open(mnt / "p", "rb") as f:
            received.append(f.read())

    t = threading.Thread(target=read_side)
    t.start()
    with open(mnt / "p", "wb") as f:
        f.write(b"x" * 100_000)
    t.join(timeout=30)
    assert not t.is_alive()
    assert received == [b"x" * 100_000]


def test_mknod_fifo_and_regular(mnt: Path) -> None:
    os.mknod(mnt / "p", stat.S_IFIFO | 0o600)
    os.mknod(mnt / "r", stat.S_IFREG | 0o600)
    assert stat.S_ISFIFO(os.stat(mnt / "p").st_mode)
    st = os.stat(mnt / "r")
    assert stat.S_ISREG(st.st_mode)
    assert st.st_size == 0
    (mnt / "r").write_bytes(b"regular")
    assert (mnt / "r").read_bytes() == b"regular"


def test_unlink_and_rename_fifo(mnt: Path) -> None:
    os.mkfifo(mnt / "p")
    os.rename(mnt / "p", mnt / "q")
    assert stat.S_ISFIFO(os.stat(mnt / "q").st_mode)
    os.chmod(mnt / "q", 0o600)
    assert stat.S_IMODE(os.stat(mnt / "q").st_mode) == 0o600
    os.unlink(mnt / "q")
    assert os.listdir(mnt) == []


def test_unix_socket_bind_and_connect(mnt: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # sun_path holds only 108 bytes; a relative name keeps the mount path out of it
    monkeypatch.chdir(mnt)
    server = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        server.bind("sock")
        server.listen(1)
        st = os.stat(mnt / "sock")
        assert stat.S_ISSOCK(st.st_mode)
        with os.scandir(mnt) as it:
            entry = next(it)
        assert entry.name == "sock"
        assert stat.S_ISSOCK(entry.stat(follow_symlinks=False).st_mode)
        client = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            client.connect("sock")
            conn, _ = server.accept()
            with conn:
                client.sendall(b"ping")
                assert conn.recv(10) == b"ping"
        finally:
            client.close()
    finally:
        server.close()
    # the socket file outlives the socket until it is unlinked
    assert stat.S_ISSOCK(os.stat(mnt / "sock").st_mode)
    os.unlink(mnt / "sock")
    assert os.listdir(mnt) == []


def test_unix_socket_bind_on_existing_name_is_eaddrinuse(
    mnt: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(mnt)
    (mnt / "taken").write_bytes(b"")
    s = socket.socket(socket.AF_UNIX, socket.SOCK_DGRAM)
    try:
        with pytest.raises(OSError) as info:
            s.bind("taken")
        assert info.value.errno == errno.EADDRINUSE
    finally:
        s.close()
    assert (mnt / "taken").read_bytes() == b""


# --- special names ------------------------------------------------------------------

NAMES = [
    b"with space",
    b" leading and trailing ",
    b"caf\xc3\xa9 x",
    b"\xe6\x97\xa5\xe6\x9c\xac\xe8\xaa\x9e",  # 日本語
    b"\xf0\x9f\x98\x80 emoji",
    b"\xff\xfe\x80 not utf-8",
    b"\x80",
    b"\x01control\x7f",
    b"new\nline",
    b"tab\there",
    b"back\\slash",
    b"-leading-dash",
    b"...",
    b".hidden",
    b"percent%2Fencoded",
    b"question?star*",
    b"colon:semi;",
    b"quote\"'",
    b"plus+equals=",
    b"#hash&amp",
]


MOTO_UNROUTABLE = "moto's server answers 404 to object keys with a newline (real S3 takes them)"


def _s3_can_hold(name: bytes) -> bool:
    try:
        name.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def _portable(names: list[bytes], ufs_kind: str) -> list[bytes]:
    if ufs_kind != "s3":
        return names
    return [n for n in names if _s3_can_hold(n) and b"\n" not in n]


@pytest.mark.parametrize("name", NAMES, ids=[repr(n)[2:-1] for n in NAMES])
def test_special_name_round_trips(mnt: Path, name: bytes, ufs_kind: str) -> None:
    root = os.fsencode(mnt)
    path = os.path.join(root, name)
    if ufs_kind == "s3" and not _s3_can_hold(name):
        with pytest.raises(OSError) as e:
            open(path, "wb").close()
        assert e.value.errno == errno.EILSEQ  # S3 keys must be UTF-8: refused at create
        assert os.listdir(root) == []
        return
    if ufs_kind == "s3" and b"\n" in name:
        pytest.skip(MOTO_UNROUTABLE)
    with open(path, "wb") as f:
        f.write(name)
    assert os.listdir(root) == [name]
    with open(path, "rb") as f:
        assert f.read() == name
    assert os.stat(path).st_size == len(name)
    d = os.path.join(root, b"dir " + name)
    os.mkdir(d)
    renamed = os.path.join(d, name + b" renamed")
    os.rename(path, renamed)
    assert os.listdir(d) == [name + b" renamed"]
    with os.scandir(d) as it:
        entries = [(e.name, e.is_file()) for e in it]
    assert entries == [(name + b" renamed", True)]
    os.symlink(name, os.path.join(d, b"link"))
    assert os.readlink(os.path.join(d, b"link")) == name
    os.unlink(renamed)
    os.unlink(os.path.join(d, b"link"))
    os.rmdir(d)
    assert os.listdir(root) == []


def test_all_special_names_in_one_dir(mnt: Path, ufs_kind: str) -> None:
    root = os.fsencode(mnt)
    names = _portable(NAMES, ufs_kind)
    for name in names:
        with open(os.path.join(root, name), "wb") as f:
            f.write(name)
    assert sorted(os.listdir(root)) == sorted(names)
    for name in names:
        with open(os.path.join(root, name), "rb") as f:
            assert f.read() == name


def test_str_paths_with_surrogateescape(mnt: Path, ufs_kind: str) -> None:
    raw = b"\xffraw\xfe"
    name = os.fsdecode(raw)
    if ufs_kind == "s3":
        with pytest.raises(OSError) as e:
            (mnt / name).write_bytes(b"x")
        assert e.value.errno == errno.EILSEQ
        return
    (mnt / name).write_bytes(b"x")
    assert os.listdir(mnt) == [name]
    assert os.listdir(os.fsencode(mnt)) == [raw]


def test_unicode_normalisation_forms_are_distinct(mnt: Path) -> None:
    """Linux compares names as bytes: NFC and NFD spellings are two files."""
    nfc = b"caf\xc3\xa9"
    nfd = b"cafe\xcc\x81"
    root = os.fsencode(mnt)
    with open(os.path.join(root, nfc), "wb") as f:
        f.write(b"nfc")
    with open(os.path.join(root, nfd), "wb") as f:
        f.write(b"nfd")
    assert sorted(os.listdir(root)) == sorted([nfc, nfd])
    with open(os.path.join(root, nfd), "rb") as f:
        assert f.read() == b"nfd"


def test_names_are_case_sensitive(mnt: Path) -> None:
    (mnt / "Name").write_bytes(b"upper")
    (mnt / "name").write_bytes(b"lower")
    assert sorted(os.listdir(mnt)) == ["Name", "name"]
    assert (mnt / "Name").read_bytes() == b"upper"


def test_file_and_dir_prefix_names_do_not_collide(mnt: Path) -> None:
    """Object stores have no directories; 'a', 'a.txt', 'a/b' and 'a-b' must all stay apart."""
    os.mkdir(mnt / "a")
    (mnt / "a" / "b").write_bytes(b"inside")
    (mnt / "a.txt").write_bytes(b"dot")
    (mnt / "a-b").write_bytes(b"dash")
    (mnt / "a0").write_bytes(b"zero")
    assert sorted(os.listdir(mnt)) == ["a", "a-b", "a.txt", "a0"]
    assert os.listdir(mnt / "a") == ["b"]
    os.rename(mnt / "a", mnt / "z")
    assert (mnt / "z" / "b").read_bytes() == b"inside"
    assert (mnt / "a-b").read_bytes() == b"dash"
    assert sorted(os.listdir(mnt)) == ["a-b", "a.txt", "a0", "z"]


def test_empty_directories_persist_in_listing(mnt: Path) -> None:
    os.makedirs(mnt / "x" / "y" / "z")
    assert os.listdir(mnt / "x") == ["y"]
    assert os.listdir(mnt / "x" / "y") == ["z"]
    assert os.listdir(mnt / "x" / "y" / "z") == []

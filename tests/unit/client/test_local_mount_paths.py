"""Where a mount serves its blocks to the node (``paths.local_blocks_socket``), how a
client finds it by the volume's salt alone, ``--no-local-blocks``, and how often a
client without a mount looks for one (``LocalMount``'s probe interval)."""

from __future__ import annotations

import argparse
import os
from pathlib import Path

import pytest

from cloudfs.cli.mount import add_parser, config_from_args
from cloudfs.client.local_mount import LocalMount
from cloudfs.control import paths
from cloudfs.data.blocks import ObjectRef
from cloudfs.metrics import Metrics


def test_sockets_are_found_by_salt_newest_first(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(paths, "runtime_dir", lambda: tmp_path)
    a = paths.local_blocks_socket("salt-1", "/mnt/a")
    b = paths.local_blocks_socket("salt-1", "/mnt/b")
    other = paths.local_blocks_socket("salt-2", "/mnt/a")
    assert len({a, b, other}) == 3 and a.parent == tmp_path
    assert a.name.startswith("blocks-") and a.name.endswith(".sock")
    for i, p in enumerate((a, b, other)):
        p.touch()
        os.utime(p, (1000 + i, 1000 + i))
    assert paths.local_blocks_sockets("salt-1") == [b, a]
    assert paths.local_blocks_sockets("salt-3") == []


def test_no_local_blocks_spellings() -> None:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    for extra, want in (
        ([], True),
        (["--no-local-blocks"], False),
        (["-o", "ro,no_local_blocks"], False),
    ):
        args = parser.parse_args(["mount", "grpc://127.0.0.1:1/vol", "/tmp/x", *extra])
        assert config_from_args(args).local_blocks is want


def test_no_mount_is_looked_for_again_only_after_the_probe_interval() -> None:
    now = [0.0]
    looked: list[float] = []

    def find() -> list[Path]:
        looked.append(now[0])
        return []

    local = LocalMount(
        "salt", "s3://b", 65536, Metrics(), find=find, probe_seconds=5.0, clock=lambda: now[0]
    )
    ref = ObjectRef("k", "etag", 100)
    for t in (0.0, 1.0, 4.9, 5.0, 6.0, 10.5):
        now[0] = t
        assert local.get(ref, 0) is None
    assert looked == [0.0, 5.0, 10.5]

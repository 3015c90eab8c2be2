"""Fixtures of the fsspec tests: one real tree service (``cloudfs meta serve``) for the
run, able to reach the test S3 server, and fresh volumes on it."""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import fsspec
import pytest

from cloudfs.fsspec import CloudFileSystem
from testkit.mounts import world_traversable_tmpdir
from testkit.servers import S3Server
from testkit.tree_server import TreeServer, running_tree_server


@dataclass
class Volume:
    name: str
    uri: str  # grpc://HOST:PORT/NAME, as a mount names it
    local_dir: Path | None = None  # the UFS of a file:// volume


@pytest.fixture(scope="session")
def tree(s3_server: S3Server) -> Iterator[TreeServer]:
    with running_tree_server(env=s3_server.env()) as server:
        yield server


@pytest.fixture(scope="session", autouse=True)
def cloudfs_protocol() -> None:
    """``cloudfs://`` for fsspec.open/pandas/pyarrow: what the ``fsspec.specs`` entry point
    gives an installed package (this checkout may not be the installed one)."""
    fsspec.register_implementation("cloudfs", CloudFileSystem, clobber=True)


def new_local_volume(tree: TreeServer) -> Volume:
    data = world_traversable_tmpdir("cloudfs-fsspec-")
    uri = tree.new_volume(f"file://{data}")
    return Volume(uri.rsplit("/", 1)[1], uri, data)


@pytest.fixture
def volume(tree: TreeServer) -> Iterator[Volume]:
    """A fresh volume over a local directory."""
    vol = new_local_volume(tree)
    yield vol
    assert vol.local_dir is not None
    shutil.rmtree(vol.local_dir, ignore_errors=True)


@pytest.fixture
def cfs(tree: TreeServer) -> Iterator[CloudFileSystem]:
    """A filesystem object of its own (not fsspec's cached instance)."""
    fs = CloudFileSystem(meta_server=tree.address, skip_instance_cache=True)
    yield fs
    fs.close()

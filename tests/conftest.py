"""Fixtures shared by every test layer."""

from __future__ import annotations

import itertools
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.support.meta_world import WORLD_KINDS, MetaWorld, make_world
from tests.support.servers import S3Server, running_s3_server

_bucket_names = itertools.count()


@pytest.fixture(scope="session")
def s3_server() -> Iterator[S3Server]:
    """One moto server for the whole run; tests use fresh buckets, not resets."""
    with running_s3_server() as server:
        yield server


@pytest.fixture
def s3_bucket(s3_server: S3Server) -> str:
    """A new, empty bucket on the shared S3 server."""
    name = f"test-bucket-{next(_bucket_names)}"
    s3_server.client().create_bucket(Bucket=name)
    return name


@pytest.fixture(params=WORLD_KINDS)
def w(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetaWorld]:
    """A Meta implementation over one engine and store (the Meta suites' fixture)."""
    world = make_world(request.param, str(tmp_path))
    yield world
    world.meta.close()

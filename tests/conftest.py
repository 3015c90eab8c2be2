"""Fixtures shared by every test layer."""

from __future__ import annotations

import itertools
import os
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, settings

from testkit.certs import Certs, make_certs
from testkit.etcd import EtcdCluster, require_etcd, running_etcd
from testkit.meta_world import WORLD_KINDS, MetaWorld, open_world
from testkit.servers import S3Server, running_s3_server

_bucket_names = itertools.count()

# Property tests on a shared, loaded machine (CI runs mounts and servers beside them):
# slow input generation is the machine's, not a defect of the strategy, so it must not fail
# a run; the examples themselves are unchanged.
# In CI (``CI=true``, as ``.ci/run`` runs) the examples are the same on every run
# (``derandomize``: seeded from each test), so a red run can be reproduced and a green
# one is not luck; run elsewhere, each run explores new examples, and what they find
# becomes a named test.
settings.register_profile(
    "cloudfs",
    settings.get_profile("default"),
    suppress_health_check=[HealthCheck.too_slow],
    derandomize=os.environ.get("CI") == "true",
)
settings.load_profile("cloudfs")


@pytest.fixture(scope="session")
def certs(tmp_path_factory: pytest.TempPathFactory) -> Certs:
    """A CA, server and client certificates signed by it, and a CA that signed none,
    for every TLS test of the run (``testkit.certs``)."""
    return make_certs(tmp_path_factory.mktemp("certs"))


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


@pytest.fixture
def aws_env(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Hermetic AWS settings: test keys, no profile, no config files, no endpoint override."""
    for var in list(os.environ):
        if var.startswith("AWS_") and var != "AWS_CA_BUNDLE":
            monkeypatch.delenv(var)
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", "testing")
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", "testing")
    monkeypatch.setenv("AWS_DEFAULT_REGION", "us-east-1")
    monkeypatch.setenv("AWS_CONFIG_FILE", str(tmp_path / "no-aws-config"))
    monkeypatch.setenv("AWS_SHARED_CREDENTIALS_FILE", str(tmp_path / "no-aws-credentials"))


@pytest.fixture(scope="session")
def etcd(tmp_path_factory: pytest.TempPathFactory) -> Iterator[EtcdCluster]:
    """One etcd member for the whole run (skipped without etcd, failed under CI);
    tests keep apart by key prefix (``etcd_prefix``)."""
    binary = require_etcd()
    with running_etcd(tmp_path_factory.mktemp("etcd"), binary=binary) as cluster:
        yield cluster


@pytest.fixture
def etcd_prefix() -> bytes:
    """A key prefix no other test uses, for an ``EtcdKV`` on the shared etcd."""
    return f"test-{uuid.uuid4().hex}/".encode()


@pytest.fixture(params=WORLD_KINDS)
def w(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[MetaWorld]:
    """A Meta implementation over one engine and store (the Meta suites' fixture)."""
    yield from open_world(request, tmp_path)

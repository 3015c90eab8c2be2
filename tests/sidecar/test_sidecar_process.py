"""Sidecar mode end to end without a cluster: the injected sidecar's command as a process.

The pod goes through the real webhook (``pods.inject``); its sidecar's command
runs in a mount namespace of its own over a shared directory, as kubelet runs
it over a ``Bidirectional`` emptyDir (``pods.running_sidecar``), against a moto
S3 server behind the faults proxy, with the credentials and endpoint the
injected ``secretKeyRef`` environment carries. An "app" process, in a mount
namespace that only receives (``HostToContainer``), reads a seeded object and
writes files through it. Then SIGTERM, as kubelet ends a sidecar after the app
containers:

* write-back pending: the drain puts every closed byte in the bucket before the
  sidecar exits 0;
* the drain runs out of ``--drain-timeout`` (the store stops answering): exit 1
  with one line that says so, within the drain and not the store's timeouts, and
  the mount is gone; the next sidecar over the same cache puts the files;
* a read-only volume: nothing to drain, it exits 0 at once.
"""

from __future__ import annotations

import errno
import hashlib
import itertools
import json
import os
import random
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from cloudfs.sidecar.settings import DRAIN_TIMEOUT
from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.servers import ACCESS_KEY, REGION, SECRET_KEY, S3Server
from tests.sidecar.pods import (
    REPO,
    Injected,
    Sidecar,
    base_env,
    in_own_namespace,
    inject,
    is_fuse,
    require_namespaces,
    running_sidecar,
    topmost,
)

pytestmark = [pytest.mark.fuse, pytest.mark.timeout(120)]  # ~10 s in all: not slow

MiB = 1 << 20
PREFIX = "team/train"  # the volume is s3://BUCKET/team/train
SEED = "seed/labels.bin"
SEED_BYTES = random.Random(0).randbytes(300 * 1024 + 7)
WRITES = {  # name in the volume -> (random seed, size): ~3.8 MiB in 5 files, one empty
    "out/ckpt-0001.bin": (1, 2 * MiB + 3),
    "out/ckpt-0002.bin": (2, MiB + 17),
    "out/log/metrics.jsonl": (3, 4096 + 5),
    "out/empty.txt": (4, 0),
    "report.bin": (5, 700 * 1024),
}
DRAIN_LINE = "not uploaded within --drain-timeout"

_buckets = itertools.count()

# The app container: reads the seeded object, writes and closes each file (the bytes of
# random.Random(seed).randbytes(size), in 1 MiB writes) and reads it back; prints sha256s.
APP = r"""
import hashlib, json, os, random, sys
spec = json.loads(sys.argv[1])
root = spec["root"]
with open(os.path.join(root, spec["read"]), "rb") as f:
    read = hashlib.sha256(f.read()).hexdigest()
written = {}
for name, (seed, size) in spec["write"].items():
    data = random.Random(seed).randbytes(size)
    path = os.path.join(root, name)
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        for i in range(0, len(data), 1 << 20):
            f.write(data[i : i + (1 << 20)])
    with open(path, "rb") as f:
        assert f.read() == data, name
    written[name] = hashlib.sha256(data).hexdigest()
print(json.dumps({"read": read, "written": written}))
"""


def expected(writes: dict[str, tuple[int, int]]) -> dict[str, bytes]:
    return {name: random.Random(seed).randbytes(size) for name, (seed, size) in writes.items()}


def sha256(data: bytes) -> str:
    return hashlib.sha256(data).hexdigest()


@dataclass
class World:
    """A bucket with a seeded object on the moto server, the proxy the sidecar talks to."""

    s3: S3Server
    bucket: str
    proxy: FaultsProxy

    def secret(self) -> dict[str, str]:
        """The volume's Secret: keys, region and endpoint, all the mount gets as environment."""
        return {
            "AWS_ACCESS_KEY_ID": ACCESS_KEY,
            "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
            "AWS_DEFAULT_REGION": REGION,
            "AWS_ENDPOINT_URL_S3": self.proxy.endpoint,
        }

    def inject(
        self,
        mount_options: list[str],
        *,
        access_modes: tuple[str, ...] = ("ReadWriteMany",),
        annotations: dict[str, str] | None = None,
    ) -> Injected:
        return inject(
            f"s3://{self.bucket}/{PREFIX}", mount_options, self.secret(),
            access_modes=access_modes, annotations=annotations,
        )  # fmt: skip

    def objects(self) -> dict[str, bytes]:
        """The volume's files in the bucket (directory markers and the seed left out)."""
        client = self.s3.client()
        found: dict[str, bytes] = {}
        pages = client.get_paginator("list_objects_v2").paginate(
            Bucket=self.bucket, Prefix=PREFIX + "/"
        )
        for page in pages:
            for item in page.get("Contents", []):
                name = item["Key"][len(PREFIX) + 1 :]
                if name and not name.endswith("/") and name != SEED:
                    body = client.get_object(Bucket=self.bucket, Key=item["Key"])["Body"]
                    found[name] = bytes(body.read())
        return found

    def uploads(self) -> list[str]:
        """The targets of the PUTs and POSTs of files the proxy saw (a directory's marker,
        put at mkdir, is none)."""
        requests = self.proxy.requests
        return [t for m, t in requests if m in ("PUT", "POST") and not t.endswith("/")]


@pytest.fixture
def world(s3_server: S3Server) -> Iterator[World]:
    why = require_namespaces()
    if why is not None:
        pytest.skip(f"a sidecar in a mount namespace of its own {why}")
    bucket = f"sidecar-{os.getpid()}-{next(_buckets)}"
    client = s3_server.client()
    client.create_bucket(Bucket=bucket)
    client.put_object(Bucket=bucket, Key=f"{PREFIX}/{SEED}", Body=SEED_BYTES)
    with running_proxy(s3_server.endpoint) as proxy:
        yield World(s3_server, bucket, proxy)


def run_app(sidecar: Sidecar, writes: dict[str, tuple[int, int]]) -> dict[str, Any]:
    """The app container: its own mount namespace, a slave of the test's (HostToContainer)."""
    spec = {"root": str(sidecar.mountpoint), "read": SEED, "write": writes}
    command = [sys.executable, "-c", APP, json.dumps(spec)]
    done = subprocess.run(
        in_own_namespace("slave", command, keep=(sidecar.mountpoint,)),
        env=base_env(), cwd=REPO, capture_output=True, text=True, timeout=120,
    )  # fmt: skip
    assert done.returncode == 0, f"app: {done.stderr}\nsidecar:\n{sidecar.log()}"
    result: dict[str, Any] = json.loads(done.stdout)
    assert result["read"] == sha256(SEED_BYTES)
    assert result["written"] == {name: sha256(d) for name, d in expected(writes).items()}
    return result


def flag(command: list[str], name: str) -> str | None:
    return command[command.index(name) + 1] if name in command else None


def assert_unmounted(sidecar: Sidecar) -> None:
    top = topmost(sidecar.mountpoint)
    assert top is None or not is_fuse(top), f"still mounted after exit: {top}"


def test_sigterm_drains_every_closed_byte_into_the_bucket_before_exit(
    world: World, tmp_path: Path
) -> None:
    injected = world.inject(
        ["write_mode=back", "upload_delay=600"], annotations={DRAIN_TIMEOUT: "60"}
    )
    assert flag(injected.command, "--drain-timeout") == "60"
    assert injected.pod["spec"]["terminationGracePeriodSeconds"] >= 60
    with running_sidecar(injected, tmp_path) as sidecar:
        run_app(sidecar, WRITES)
        # closed, and owed: upload_delay holds every upload back until the drain
        assert world.objects() == {}, world.uploads()
        assert world.uploads() == [], world.uploads()
        code = sidecar.terminate(timeout=120)
        in_bucket_at_exit = world.objects()
        assert code == 0, sidecar.log()
        assert_unmounted(sidecar)
    assert topmost(sidecar.mountpoint) is None  # the shared bind mount is undone too
    assert in_bucket_at_exit == expected(WRITES)
    assert len(world.uploads()) >= len(WRITES)
    assert DRAIN_LINE not in sidecar.log()


def test_a_drain_that_runs_out_of_time_exits_1_with_one_line(world: World, tmp_path: Path) -> None:
    injected = world.inject(
        ["write_mode=back", "upload_delay=600"], annotations={DRAIN_TIMEOUT: "1"}
    )
    assert flag(injected.command, "--drain-timeout") == "1"
    with running_sidecar(injected, tmp_path) as sidecar:
        run_app(sidecar, WRITES)
        world.proxy.mode = "blackhole"  # the store stops answering: no upload can end
        code = sidecar.terminate(timeout=60)
        log = sidecar.log()
        assert code == 1, log
        lines = [line for line in log.splitlines() if DRAIN_LINE in line]
        assert len(lines) == 1, log
        assert f"{len(WRITES)} closed file(s)" in lines[0], lines[0]
        assert [line for line in log.splitlines() if " ERROR " in line] == lines, log
        # within the drain, not the store's timeouts: the pod's grace is the drain + 30 s
        assert sidecar.exited_after is not None and sidecar.exited_after < 1 + 5, log
        assert_unmounted(sidecar)
    world.proxy.mode = "forward"
    assert world.objects() == {}
    # The files stay owed in the journal of the cache directory (a node directory, with
    # cloudfs.io/cache-host-path): the next sidecar over it puts them in the bucket.
    again = world.inject(["write_mode=back", "upload_delay=600"], annotations={DRAIN_TIMEOUT: "60"})
    with running_sidecar(again, tmp_path, "next") as sidecar:
        assert sidecar.terminate(timeout=120) == 0, sidecar.log()
    assert world.objects() == expected(WRITES)


def test_a_read_only_sidecar_exits_at_once(world: World, tmp_path: Path) -> None:
    injected = world.inject([], access_modes=("ReadOnlyMany",))
    assert "--read-only" in injected.command
    assert flag(injected.command, "--drain-timeout") is None
    assert "terminationGracePeriodSeconds" not in injected.pod["spec"]
    with running_sidecar(injected, tmp_path) as sidecar:
        run_app(sidecar, {})
        with pytest.raises(OSError) as refused:
            (sidecar.mountpoint / "new.bin").write_bytes(b"x")
        assert refused.value.errno == errno.EROFS
        code = sidecar.terminate(timeout=30)
        assert code == 0, sidecar.log()
        assert sidecar.exited_after is not None and sidecar.exited_after < 5, sidecar.log()
        assert_unmounted(sidecar)
    assert world.uploads() == []

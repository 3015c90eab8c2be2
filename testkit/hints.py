"""Helpers for tests of announced read orders (``cloudfs.hints``) through real mounts.

What the S3 server was asked for (``object_gets``: GETs of object bodies by
key, from a counting ``FaultsProxy``), a mount's metrics and pid over its
control socket (what ``cloudfs stats --json`` reads), its ``cloudfs_job_*``
series (and whether a job has ended: its series stay a while, marked finished),
and a raw line-level client of the hints socket for malformed requests.
"""

from __future__ import annotations

import json
import random
import socket
import subprocess
import sys
import urllib.parse
from collections import Counter
from typing import Any

from cloudfs.control import client, paths
from testkit.faults_proxy import FaultsProxy
from testkit.mounts import Backing, MntBacking, Mount
from testkit.prometheus import Scrape, parse

JOB_PREFIX = "cloudfs_job_"
FINISHED = "cloudfs_job_finished"


def object_gets(proxy: FaultsProxy, bucket: str) -> Counter[str]:
    """GETs of object bodies so far, by key (LIST pages and HEADs left out)."""
    prefix = f"/{bucket}/"
    with proxy._lock:  # the proxy's own thread appends to ``requests``
        requests = list(proxy.requests)
    return Counter(
        urllib.parse.unquote(target[len(prefix) :])
        for method, target in requests
        if method == "GET" and target.startswith(prefix) and "?" not in target
    )


def mountpoint(mount: Mount) -> str:
    """The mount's path as /proc/self/mountinfo spells it (what its sockets are named by)."""
    return client.mountpoint_of(str(mount.root))


def control(mount: Mount) -> dict[str, Any]:
    """The mount's ``metrics`` answer: its Prometheus text and facts (pid, options)."""
    return client.result(mountpoint(mount), {"op": "metrics"}, timeout=30)


def metrics(mount: Mount) -> Scrape:
    return parse(str(control(mount)["text"]))


def mount_pid(mount: Mount) -> int:
    return int(control(mount)["pid"])


def job_series(scrape: Scrape, job: str) -> dict[tuple[str, str], float]:
    """The job's ``cloudfs_job_*`` samples, keyed by (sample name, rank)."""
    out = {}
    for (name, labels), value in scrape.samples.items():
        tags = dict(labels)
        if name.startswith(JOB_PREFIX) and tags.get("job") == job:
            out[(name, tags["rank"])] = value
    return out


def job_value(scrape: Scrape, name: str, job: str, rank: int = 0) -> float:
    """One sample of the job (``name`` in full, e.g. ``cloudfs_job_read_files_total``)."""
    return scrape.value(name, job=job, rank=str(rank))


def job_finished(scrape: Scrape, job: str) -> bool:
    """Whether the job has ended: it has series, and every rank's are marked finished."""
    marks = [v for (name, _rank), v in job_series(scrape, job).items() if name == FINISHED]
    return bool(marks) and all(v == 1 for v in marks)


def jobs(scrape: Scrape) -> set[tuple[str, str]]:
    """The (job, rank) pairs that have series."""
    return {
        (dict(labels)["job"], dict(labels)["rank"])
        for (name, labels) in scrape.samples
        if name == "cloudfs_job_epoch"
    }


def write_files(
    backing: Backing, prefix: str, count: int, sizes: tuple[int, int], seed: int = 0
) -> dict[str, bytes]:
    """``count`` objects ``prefix/f00000``... of random sizes in ``sizes`` (inclusive);
    returns them by key."""
    rng = random.Random(seed)
    files = {f"{prefix}/f{i:05d}": rng.randbytes(rng.randint(*sizes)) for i in range(count)}
    MntBacking(backing, prefix).put_many(
        {key.split("/", 1)[1]: data for key, data in files.items()}, threads=8
    )
    return files


class RawHints:
    """One connection to a mount's hints socket, speaking raw lines."""

    def __init__(self, mount: Mount, timeout: float = 10.0) -> None:
        self._sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self._sock.settimeout(timeout)
        self._sock.connect(str(paths.hints_socket(mountpoint(mount))))
        self._lines = self._sock.makefile("rb")

    def send(self, *lines: bytes | dict[str, Any]) -> None:
        """Each line as given (bytes, newline added) or a JSON object."""
        for line in lines:
            data = json.dumps(line).encode() if isinstance(line, dict) else line
            self._sock.sendall(data + b"\n")

    def answer(self) -> dict[str, Any]:
        """The next line from the mount, decoded (AssertionError if it hung up)."""
        line = self._lines.readline()
        assert line, "the mount closed the connection without an answer"
        value: dict[str, Any] = json.loads(line)
        return value

    def final(self) -> dict[str, Any]:
        """The mount's last line: the first that carries ``done`` or ``error``."""
        while True:
            message = self.answer()
            if "done" in message or "error" in message:
                return message

    def close(self) -> None:
        self._lines.close()
        self._sock.close()

    def __enter__(self) -> RawHints:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


def stats_json(mount: Mount) -> dict[str, Any]:
    """``cloudfs stats MOUNT --json``, decoded (what a user sees)."""
    result = subprocess.run(
        [sys.executable, "-m", "cloudfs.cli.main", "stats", str(mount.root), "--json"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert result.returncode == 0, result.stderr
    doc: dict[str, Any] = json.loads(result.stdout)
    return doc


def stats_jobs(mount: Mount) -> list[dict[str, Any]]:
    """The ``jobs`` rows (running jobs) of ``cloudfs stats MOUNT --json``."""
    rows: list[dict[str, Any]] = stats_json(mount)["jobs"]
    return rows

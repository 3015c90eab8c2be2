"""Real etcd for tests: one member or a small cluster of ``etcd`` processes on loopback.

Debian's ``etcd-server`` (3.4) is started with random free ports, its data in
a test directory, and the limits the etcd engine documents as required
(``--max-txn-ops``, ``--max-request-bytes``; see ``cloudfs.meta.engine.kv_etcd``).
Elections are tuned fast (50 ms heartbeats) so that a cluster losing its
leader recovers in about a second. Every wait is bounded; every process
started is killed on exit.
"""

from __future__ import annotations

import json
import os
import shutil
import ssl
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path

from testkit.binaries import require_binary
from testkit.certs import Certs
from testkit.servers import free_port

ETCD_BIN = "/usr/bin/etcd"
MAX_TXN_OPS = 65536
MAX_REQUEST_BYTES = 16 * 1024 * 1024
START_TIMEOUT = 30.0


def etcd_binary() -> str | None:
    if os.access(ETCD_BIN, os.X_OK):
        return ETCD_BIN
    return shutil.which("etcd")


@dataclass
class EtcdMember:
    name: str
    client_url: str
    peer_url: str
    data_dir: Path
    log_path: Path
    proc: subprocess.Popen[bytes] | None = None
    command: list[str] = field(default_factory=list)  # how ``start`` runs it
    tls: ssl.SSLContext | None = None  # how this test reaches an https:// client URL

    def start(self) -> None:
        """Start (again) this member's process, on its data directory and ports."""
        if self.proc is not None and self.proc.poll() is None:
            return
        with open(self.log_path, "ab") as log:
            self.proc = subprocess.Popen(self.command, stdout=log, stderr=subprocess.STDOUT)

    @property
    def running(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def status(self) -> dict[str, object] | None:
        """This member's ``/v3/maintenance/status``, or ``None`` when it does not answer."""
        request = urllib.request.Request(
            f"{self.client_url}/v3/maintenance/status", data=b"{}", method="POST"
        )
        try:
            with urllib.request.urlopen(request, timeout=2, context=self.tls) as resp:
                status: dict[str, object] = json.loads(resp.read())
                return status
        except (OSError, ValueError):
            return None

    def healthy(self) -> bool:
        """Whether this member answers ``/health`` with a leader elected."""
        try:
            health = f"{self.client_url}/health"
            with urllib.request.urlopen(health, timeout=2, context=self.tls) as resp:
                return bool(json.loads(resp.read()).get("health") == "true")
        except (OSError, ValueError):
            return False

    def kill(self) -> None:
        if self.proc is not None and self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait(timeout=10)


@dataclass
class EtcdCluster:
    members: list[EtcdMember] = field(default_factory=list)

    @property
    def endpoints(self) -> list[str]:
        return [m.client_url for m in self.members]

    def log_tail(self, lines: int = 20) -> str:
        parts = []
        for m in self.members:
            text = m.log_path.read_text(errors="replace") if m.log_path.exists() else ""
            parts.append(f"--- {m.name}\n" + "\n".join(text.splitlines()[-lines:]))
        return "\n".join(parts)

    def leader_index(self, timeout: float = 10.0) -> int:
        """The index of the member that is the leader now (waits for an election)."""
        deadline = time.monotonic() + timeout
        while True:
            for index, member in enumerate(self.members):
                status = member.status() if member.running else None
                header = status.get("header") if status else None
                if status and isinstance(header, dict) and status["leader"] == header["member_id"]:
                    return index
            if time.monotonic() > deadline:
                raise RuntimeError(f"no etcd leader within {timeout} s\n{self.log_tail()}")
            time.sleep(0.1)

    def wait_healthy(self, timeout: float = START_TIMEOUT) -> None:
        deadline = time.monotonic() + timeout
        while not all(m.healthy() for m in self.members if m.proc and m.proc.poll() is None):
            dead = [m.name for m in self.members if m.proc and m.proc.poll() is not None]
            if dead or time.monotonic() > deadline:
                raise RuntimeError(
                    f"etcd not healthy after {timeout} s (exited: {dead})\n{self.log_tail()}"
                )
            time.sleep(0.1)


def _command(binary: str, member: EtcdMember, initial_cluster: str, tls: Certs | None) -> list[str]:
    client_tls = (
        [
            f"--cert-file={tls.server_cert}",
            f"--key-file={tls.server_key}",
            f"--trusted-ca-file={tls.ca}",
            "--client-cert-auth",
        ]
        if tls is not None
        else []
    )
    return [
        binary,
        *client_tls,
        f"--name={member.name}",
        f"--data-dir={member.data_dir}",
        f"--listen-client-urls={member.client_url}",
        f"--advertise-client-urls={member.client_url}",
        f"--listen-peer-urls={member.peer_url}",
        f"--initial-advertise-peer-urls={member.peer_url}",
        f"--initial-cluster={initial_cluster}",
        "--initial-cluster-state=new",
        "--initial-cluster-token=cloudfs-test",
        f"--max-txn-ops={MAX_TXN_OPS}",
        f"--max-request-bytes={MAX_REQUEST_BYTES}",
        "--heartbeat-interval=50",
        "--election-timeout=500",
        "--log-level=warn",
    ]


@contextmanager
def running_etcd(
    tmp_dir: Path,
    members: int = 1,
    binary: str | None = None,
    *,
    in_memory: bool = True,
    tls: Certs | None = None,
) -> Iterator[EtcdCluster]:
    """An etcd cluster of ``members`` processes on 127.0.0.1, healthy; killed on exit.

    ``tls``: clients reach the members over TLS (``https://`` client URLs, the
    server certificate of ``tls``) and must present a certificate its CA signed
    (``--client-cert-auth``); the members talk to each other in plaintext.

    ``in_memory``: the members' data directories on tmpfs (/dev/shm, where there is
    one), as tests want: a raft write costs an fsync of the WAL, which on this kind of
    machine's disk makes etcd the busiest process of a FUSE test. Restarted members
    find their data again all the same. Benchmarks pass False: disks as deployed.
    """
    binary = binary or etcd_binary()
    if binary is None:
        raise RuntimeError("etcd is not installed (apt-get install etcd-server)")
    data_root = tmp_dir
    if in_memory and _tmpfs_room("/dev/shm"):
        data_root = Path(tempfile.mkdtemp(prefix="cloudfs-etcd-", dir="/dev/shm"))
    cluster = EtcdCluster()
    scheme = "https" if tls is not None else "http"
    for i in range(members):
        name = f"m{i}"
        cluster.members.append(
            EtcdMember(
                name=name,
                client_url=f"{scheme}://127.0.0.1:{free_port()}",
                peer_url=f"http://127.0.0.1:{free_port()}",
                data_dir=data_root / f"{name}.etcd",
                log_path=tmp_dir / f"{name}.log",
                tls=_client_context(tls) if tls is not None else None,
            )
        )
    initial = ",".join(f"{m.name}={m.peer_url}" for m in cluster.members)
    try:
        for m in cluster.members:
            m.command = _command(binary, m, initial, tls)
            m.log_path.write_bytes(b"")
            m.start()
        cluster.wait_healthy()
        yield cluster
    finally:
        for m in cluster.members:
            with suppress(Exception):
                m.kill()
        if data_root != tmp_dir:
            shutil.rmtree(data_root, ignore_errors=True)


def _client_context(tls: Certs) -> ssl.SSLContext:
    context = ssl.create_default_context(cafile=str(tls.ca))
    context.load_cert_chain(str(tls.client_cert), str(tls.client_key))
    return context


def _tmpfs_room(path: str) -> bool:
    """Whether ``path`` can take members' data (each WAL preallocates 64 MiB; a
    container's /dev/shm is often 64 MiB in all)."""
    try:
        return os.access(path, os.W_OK) and shutil.disk_usage(path).free > 1 << 30
    except OSError:
        return False


def require_etcd() -> str:
    """The etcd binary; without one, skip the test, or fail it under CI (``CI`` set)."""
    return require_binary(etcd_binary(), "etcd-server")

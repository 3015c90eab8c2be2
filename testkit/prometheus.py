"""Prometheus for tests: scrape an exposition endpoint, or run a real Prometheus server.

``scrape`` reads a ``/metrics`` endpoint (a mount's ``--metrics`` address) with
prometheus_client's own parser. ``running_prometheus`` starts the Debian
``prometheus`` binary on 127.0.0.1 with its storage in a test directory,
scraping the given targets every second, and stops it on exit; every wait is
bounded.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from prometheus_client.parser import text_string_to_metric_families

from testkit.binaries import require_binary
from testkit.servers import free_port

PROMETHEUS_BIN = "/usr/bin/prometheus"

Labels = frozenset[tuple[str, str]]


@dataclass(frozen=True)
class Scrape:
    """One scrape: every sample, keyed by sample name and labels."""

    samples: dict[tuple[str, Labels], float]

    def value(self, name: str, **labels: str) -> float:
        """The sample ``name{labels}`` exactly; 0 when the series does not exist (yet)."""
        return self.samples.get((name, frozenset(labels.items())), 0.0)

    def total(self, name: str, **labels: str) -> float:
        """Sum of every series of ``name`` whose labels include ``labels`` (PromQL ``sum``)."""
        want = set(labels.items())
        return sum(v for (n, ls), v in self.samples.items() if n == name and want <= ls)

    def series(self, name: str) -> dict[Labels, float]:
        return {ls: v for (n, ls), v in self.samples.items() if n == name}


def parse(text: str) -> Scrape:
    samples: dict[tuple[str, Labels], float] = {}
    for family in text_string_to_metric_families(text):
        for s in family.samples:
            samples[(s.name, frozenset(s.labels.items()))] = float(s.value)
    return Scrape(samples)


def scrape(address: str, timeout: float = 10.0) -> Scrape:
    """Scrape ``http://ADDRESS/metrics`` once."""
    with urllib.request.urlopen(f"http://{address}/metrics", timeout=timeout) as resp:
        return parse(resp.read().decode())


def wait_for(what: str, check: Callable[[], bool], timeout: float, interval: float = 0.2) -> None:
    """Poll ``check`` until it is true; AssertionError naming ``what`` after ``timeout`` s."""
    deadline = time.monotonic() + timeout
    while not check():
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out after {timeout} s waiting for {what}")
        time.sleep(interval)


def prometheus_binary() -> str | None:
    if os.access(PROMETHEUS_BIN, os.X_OK):
        return PROMETHEUS_BIN
    return shutil.which("prometheus")


def require_prometheus() -> str:
    """The prometheus binary; the test skips without one (fails under CI, which installs it)."""
    return require_binary(prometheus_binary(), "prometheus")


class QueryError(AssertionError):
    """Prometheus answered a query with an error (a PromQL syntax error, say)."""


@dataclass
class PrometheusServer:
    url: str
    proc: subprocess.Popen[bytes]
    log_path: Path

    def _get(self, path: str, params: dict[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        try:
            with urllib.request.urlopen(f"{self.url}{path}{query}", timeout=10) as resp:
                return json.loads(resp.read())
        except urllib.error.HTTPError as e:  # 400/422: the API explains in its JSON body
            body = e.read().decode(errors="replace")
            raise QueryError(f"GET {path} {params}: HTTP {e.code}: {body}") from None

    def query(self, expr: str) -> list[dict[str, Any]]:
        """An instant query (``/api/v1/query`` at now); the result vector's elements."""
        answer = self._get("/api/v1/query", {"query": expr})
        if answer.get("status") != "success":
            raise QueryError(f"query {expr!r}: {answer}")
        data = answer["data"]
        if data["resultType"] == "scalar":
            return [{"metric": {}, "value": data["result"]}]
        return list(data["result"])

    def targets(self) -> list[dict[str, Any]]:
        return list(self._get("/api/v1/targets")["data"]["activeTargets"])

    def wait_target_up(self, address: str, timeout: float = 30.0) -> dict[str, Any]:
        """Wait until the target ``address`` has been scraped successfully; its labels."""
        found: dict[str, Any] = {}

        def up() -> bool:
            for t in self.targets():
                if t["scrapeUrl"].startswith(f"http://{address}/") and t["health"] == "up":
                    found.update(t["labels"])
                    return True
            return False

        wait_for(f"Prometheus to scrape {address} ({self.log_tail()})", up, timeout)
        return found

    def log_tail(self, lines: int = 5) -> str:
        try:
            return " | ".join(self.log_path.read_text().splitlines()[-lines:])
        except OSError:
            return "no log"


@contextmanager
def running_prometheus(
    binary: str, workdir: Path, targets: list[str], *, timeout: float = 60.0
) -> Iterator[PrometheusServer]:
    """A Prometheus server on 127.0.0.1 scraping ``targets`` (HOST:PORT) every second."""
    workdir.mkdir(parents=True, exist_ok=True)
    config = workdir / "prometheus.yml"
    config.write_text(
        "global:\n"
        "  scrape_interval: 1s\n"
        "  scrape_timeout: 1s\n"
        "  evaluation_interval: 1s\n"
        "scrape_configs:\n"
        "  - job_name: cloudfs\n"
        "    static_configs:\n"
        f"      - targets: {json.dumps(targets)}\n"
    )
    port = free_port()
    log_path = workdir / "prometheus.log"
    with open(log_path, "wb") as log:
        proc = subprocess.Popen(
            [
                binary,
                f"--config.file={config}",
                f"--storage.tsdb.path={workdir / 'data'}",
                f"--web.listen-address=127.0.0.1:{port}",
                "--storage.tsdb.retention.time=1h",
            ],
            stdout=log,
            stderr=subprocess.STDOUT,
            start_new_session=True,
        )
    server = PrometheusServer(f"http://127.0.0.1:{port}", proc, log_path)
    try:

        def ready() -> bool:
            if proc.poll() is not None:
                raise AssertionError(
                    f"prometheus exited with {proc.returncode}: {server.log_tail(20)}"
                )
            try:
                with urllib.request.urlopen(f"{server.url}/-/ready", timeout=2) as resp:
                    return bool(resp.status == 200)
            except OSError:
                return False

        wait_for("Prometheus to be ready", ready, timeout)
        yield server
    finally:
        _stop(proc)


def _stop(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        os.killpg(proc.pid, signal.SIGTERM)
        try:
            proc.wait(timeout=15)
        except subprocess.TimeoutExpired:
            os.killpg(proc.pid, signal.SIGKILL)
            proc.wait(timeout=15)

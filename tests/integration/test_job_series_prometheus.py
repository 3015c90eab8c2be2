"""A finished job's final figures, as a real Prometheus and ``cloudfs stats`` see them.

A short job on a real mount (moto S3 behind a delaying proxy, ``--metrics``),
over before the Prometheus scraping the mount every second has scraped it
(its first scrape comes some 5 s after it starts): half its files were read
before the job announced its order (hits), the other half are fetched while
it reads (stalls), and it ends by closing its announcement. Prometheus then
still answers the job's final stall and hit totals, marked
``cloudfs_job_finished`` 1; ``cloudfs stats --json`` lists it under
``finished_jobs``, not ``jobs``; after ``--job-series-grace`` the series go.
"""

from __future__ import annotations

import os
import random
import time
from pathlib import Path

import pytest

from cloudfs import hints
from testkit.faults_proxy import running_proxy
from testkit.hints import FINISHED, job_series, stats_json
from testkit.mounts import Backing, mounted
from testkit.prometheus import require_prometheus, running_prometheus, scrape, wait_for
from testkit.servers import S3Server, free_port
from tests.fuse.test_cloudfs_cache import read_uncached

pytestmark = [pytest.mark.fuse, pytest.mark.slow]

JOB = "short"
GRACE = 10.0  # --job-series-grace: long enough for the checks below, short for the test
FILES = 8
SIZE = 64 * 1024
STALL = "cloudfs_job_stall_seconds_total"
HIT_BYTES = "cloudfs_job_hit_bytes_total"
READ_BYTES = "cloudfs_job_read_bytes_total"


def test_prometheus_scrapes_a_finished_jobs_final_figures(
    s3_server: S3Server, tmp_path: Path
) -> None:
    if not os.path.exists("/dev/fuse") or os.geteuid() != 0:
        pytest.skip("mount tests need /dev/fuse and root")
    binary = require_prometheus()
    bucket = f"job-series-{os.getpid()}"
    s3 = s3_server.client()
    s3.create_bucket(Bucket=bucket)
    rng = random.Random(5)
    files = {f"d/f{i}": rng.randbytes(SIZE) for i in range(FILES)}
    for key, data in files.items():
        s3.put_object(Bucket=bucket, Key=key, Body=data)
    cached, fetched = list(files)[: FILES // 2], list(files)[FILES // 2 :]
    address = f"127.0.0.1:{free_port()}"
    backing = Backing(uri=f"s3://{bucket}", s3=s3_server, bucket=bucket)
    with running_proxy(s3_server.endpoint) as proxy:
        options = [
            "--read-only", "--s3-endpoint", proxy.endpoint, "--meta-ttl", "600",
            "--metrics", address, "--job-series-grace", str(GRACE),
        ]  # fmt: skip
        with (
            mounted(backing, options) as m,
            running_prometheus(binary, tmp_path / "prometheus", [address]) as prom,
        ):
            for key in cached:  # held from before the job: its hits
                assert read_uncached(m.root / key) == files[key]
            proxy.delay = 0.2  # each GET of the job's other files: its stalls

            with hints.announce([m.root / k for k in fetched + cached], job=JOB):
                for key in fetched + cached:
                    assert read_uncached(m.root / key) == files[key]
            ended = time.monotonic()

            final = job_series(scrape(address), JOB)  # the mount's own exposition, at once
            assert final[(FINISHED, "0")] == 1
            assert final[(READ_BYTES, "0")] == FILES * SIZE
            assert final[(HIT_BYTES, "0")] == len(cached) * SIZE
            stall = final[(STALL, "0")]
            assert stall > 0

            doc = stats_json(m)
            assert doc["jobs"] == []
            [row] = doc["finished_jobs"]
            assert (row["job"], row["rank"], row["finished"]) == (JOB, 0, True)
            assert row["read_bytes"] == FILES * SIZE
            assert row["hit_ratio"] == pytest.approx(len(cached) / FILES)
            assert row["stall_seconds"] == pytest.approx(stall)

            # The scrape's own ``job`` label (the scrape config's job_name) wins: Prometheus
            # keeps the mount's as ``exported_job`` (unless the config sets honor_labels).
            where = f'{{exported_job="{JOB}", rank="0", instance="{address}"}}'

            def value(name: str) -> float | None:
                answer = prom.query(f"{name}{where}")
                return float(answer[0]["value"][1]) if answer else None

            # Prometheus's first scrape comes some 5 s after it started, after the job's end.
            wait_for("Prometheus to scrape the finished job", lambda: value(FINISHED) == 1, 8)
            assert value(STALL) == pytest.approx(stall, rel=1e-12)
            assert value(HIT_BYTES) == len(cached) * SIZE
            assert value(READ_BYTES) == FILES * SIZE
            # docs/training.md's query for a finished job's stall
            [r] = prom.query(
                f'{STALL}{{exported_job="{JOB}"}} '
                "and on(instance, exported_job, rank) cloudfs_job_finished == 1"
            )
            assert float(r["value"][1]) == pytest.approx(stall, rel=1e-12)
            assert time.monotonic() - ended < GRACE, "the checks outlasted the grace"

            # After the grace the mount drops the series; Prometheus marks them stale.
            wait_for("the series to go", lambda: not job_series(scrape(address), JOB), GRACE + 5)
            assert time.monotonic() - ended >= GRACE - 1
            wait_for("Prometheus to see them gone", lambda: value(FINISHED) is None, 5)

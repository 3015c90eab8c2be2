"""Cold GETs through several S3 clients: which one should CloudFS's data path use (issue 26)?

For each origin (moto in server mode; s3rver, Node.js) one large object and N small
ones are uploaded, then each client, in a fresh process per repeat, runs three passes:

* ranged: the large object as 8 MiB ranged GETs, 8 in flight, each range
  ``os.pwrite`` at its offset into one preallocated file under /tmp, crc32 of each;
* stream: one GET of the whole object, written sequentially (where the client has it);
* small: N whole-object GETs, 16 in flight, each body into its own file, crc32 of each.

Per pass: wall time, the worker's user+system CPU (getrusage), and its GIL-held time:
``py-spy record --gil --nonblocking -r 500 --format raw`` attached for the pass, samples
divided by the rate. Medians over repeats; a table per origin and ``--json``.

    PYTHONPATH=/tmp/benchdeps python3 benchmarks/get_clients.py --origin both \
        --json benchmarks/results/get-clients.json

(obstore and awscrt are not CloudFS dependencies: ``pip install --target /tmp/benchdeps
obstore awscrt``; a client that cannot be imported or fails is recorded with why.)
"""

from __future__ import annotations

import argparse
import json
import os
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time
import zlib
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from pathlib import Path
from typing import IO, Any

BENCH_DIR = Path(__file__).resolve().parent
REPO_ROOT = BENCH_DIR.parent
sys.path[:0] = [str(BENCH_DIR), str(REPO_ROOT)]

from bench import getclients  # noqa: E402
from bench.s3rver import running_s3rver  # noqa: E402

from testkit.servers import running_s3_server  # noqa: E402

MiB, KiB, GiB = 1 << 20, 1 << 10, 1 << 30
PART = getclients.PART
BUCKET = "getclients"
RATE = 500  # py-spy samples per second
PASS_TIMEOUT_S = 300.0
SPY_START_TIMEOUT_S = 15.0


def parse_args(argv: list[str] | None = None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=(__doc__ or "").splitlines()[0])
    p.add_argument("--origin", choices=("moto", "s3rver", "both"), default="both")
    p.add_argument("--large-mib", type=int, default=256, help="size of the large object (256)")
    p.add_argument("--small", type=int, default=1000, help="small objects (1000)")
    p.add_argument("--small-kib", type=int, default=110, help="size of each small object (110)")
    p.add_argument("--repeat", type=int, default=3, help="fresh worker processes per client (3)")
    p.add_argument("--clients", nargs="+", default=list(getclients.CLIENTS))
    p.add_argument("--json", type=Path, default=None, help="write every figure here")
    p.add_argument("--no-gil", action="store_true", help="do not attach py-spy")
    p.add_argument(
        "--check-gil", action="store_true", help="only check the GIL-held measure on known cases"
    )
    p.add_argument("--tables-from", type=Path, default=None, help="print a --json file's tables")
    p.add_argument("--worker", default=None, help=argparse.SUPPRESS)
    args = p.parse_args(argv)
    unknown = set(args.clients) - set(getclients.CLIENTS)
    if unknown:
        p.error(f"unknown clients: {', '.join(sorted(unknown))}")
    return args


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


@contextmanager
def origin(name: str) -> Iterator[tuple[str, dict[str, str]]]:
    """(endpoint, environment with its credentials) of a fresh origin, stopped on exit."""
    if name == "moto":
        with running_s3_server() as moto:
            yield moto.endpoint, moto.env()
    else:
        with running_s3rver() as s3rver:
            yield s3rver.endpoint, s3rver.env()


def small_keys(n: int) -> list[str]:
    return [f"small/{i:06d}.bin" for i in range(n)]


def upload(endpoint: str, env: dict[str, str], args: argparse.Namespace) -> dict[str, Any]:
    """The bucket, one large object and the small ones, all random bytes; their crc32s."""
    client = getclients.Boto3Client(
        endpoint, BUCKET, env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], "us-east-1"
    ).s3
    client.create_bucket(Bucket=BUCKET)
    large = os.urandom(args.large_mib * MiB)
    client.put_object(Bucket=BUCKET, Key="large.bin", Body=large)
    body = os.urandom(args.small_kib * KiB)
    view = memoryview(large)
    crcs = {
        "range_crcs": [zlib.crc32(view[o : o + PART]) for o in range(0, len(large), PART)],
        "whole_crc": zlib.crc32(large),
        "small_crc": zlib.crc32(body),
    }

    def put(key: str) -> None:
        client.put_object(Bucket=BUCKET, Key=key, Body=body)

    with ThreadPoolExecutor(16) as pool:
        list(pool.map(put, small_keys(args.small)))
    return crcs


class Spy:
    """py-spy attached to ``pid`` for one pass; ``stop`` returns the GIL-held seconds."""

    def __init__(self, pid: int, out: Path) -> None:
        self.out = out
        cmd = ["py-spy", "record", "-r", str(RATE), "--gil", "--nonblocking"]
        cmd += ["--format", "raw", "-o", str(out), "--pid", str(pid)]
        self.proc = subprocess.Popen(
            cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True
        )
        started = threading.Event()
        threading.Thread(target=self._watch, args=(started,), daemon=True).start()
        if not started.wait(SPY_START_TIMEOUT_S):
            self.proc.kill()
            raise RuntimeError("py-spy did not start sampling")

    def _watch(self, started: threading.Event) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:  # py-spy says it samples on stdout
            if "Sampling process" in line:
                started.set()

    def stop(self) -> float:
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(30)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait(10)
            raise RuntimeError("py-spy did not stop") from None
        samples = 0
        if self.out.exists():
            for line in self.out.read_text().splitlines():
                _, _, count = line.rpartition(" ")
                samples += int(count) if count.isdigit() else 0
        return samples / RATE


def run_worker(
    client: str,
    endpoint: str,
    env: dict[str, str],
    args: argparse.Namespace,
    crcs: dict[str, Any],
    spy: bool,
    probe_etag: str | None = None,
) -> tuple[list[dict[str, Any]], dict[str, Any]]:
    """One fresh worker process for ``client``: its passes' results and its extras."""
    work = tempfile.mkdtemp(prefix="getclients-", dir="/tmp")
    spec = {
        "client": client,
        "endpoint": endpoint,
        "bucket": BUCKET,
        "region": "us-east-1",
        "large_key": "large.bin",
        "large_size": args.large_mib * MiB,
        "small_keys": small_keys(args.small),
        "small_size": args.small_kib * KiB,
        "passes": list(getclients.PASSES),
        "work_dir": work,
        **crcs,
    }
    if probe_etag is not None:
        spec["probe_etag"] = probe_etag
    wenv = dict(env)
    wenv["PYTHONPATH"] = os.pathsep.join(
        [str(BENCH_DIR), str(REPO_ROOT), *filter(None, [os.environ.get("PYTHONPATH")])]
    )
    proc = subprocess.Popen(
        [sys.executable, __file__, "--worker", json.dumps(spec)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=wenv,
    )
    watchdog = threading.Timer(PASS_TIMEOUT_S * len(getclients.PASSES), proc.kill)
    watchdog.start()
    results: list[dict[str, Any]] = []
    extra: dict[str, Any] = {}
    try:
        assert proc.stdin is not None and proc.stdout is not None
        extra = _converse(proc, proc.stdin, proc.stdout, Path(work), spy, results)
    finally:
        watchdog.cancel()
        if proc.poll() is None:
            proc.kill()
        _, err = proc.communicate(timeout=30)
        shutil.rmtree(work, ignore_errors=True)
    if not results:
        last = (err or "").strip().splitlines()[-1:] or [f"exit status {proc.returncode}"]
        extra["error"] = last[0][:300]
    return results, extra


def _converse(
    proc: subprocess.Popen[str],
    stdin: IO[str],
    stdout: IO[str],
    work: Path,
    spy: bool,
    results: list[dict[str, Any]],
) -> dict[str, Any]:
    for line in stdout:
        word, _, rest = line.strip().partition(" ")
        if word == "pass":
            for f in work.iterdir():  # the previous pass's landing files
                shutil.rmtree(f) if f.is_dir() else f.unlink()
            sampler = Spy(proc.pid, work.parent / f"{work.name}-{rest}.spy") if spy else None
            stdin.write("go\n")
            stdin.flush()
            answer = stdout.readline().strip().partition(" ")
            gil = sampler.stop() if sampler is not None else None
            if sampler is not None:
                sampler.out.unlink(missing_ok=True)
            if answer[0] != "result":
                break
            result = json.loads(answer[2])
            result["gil_s"] = gil
            results.append(result)
        elif word == "extra":
            return dict(json.loads(rest))
    return {}


def summarize(runs: list[dict[str, Any]], large: int, n_small: int) -> dict[str, Any]:
    """Medians over the unsampled repeats of every pass that succeeded in all runs; the
    GIL-held time from the sampled run(s)."""
    out: dict[str, Any] = {}
    for name in getclients.PASSES:
        every = [r for run in runs for r in run["results"] if r["pass"] == name]
        rows = [r for run in runs if not run["spy"] for r in run["results"] if r["pass"] == name]
        bad = [r.get("error") or r.get("skipped") for r in every if "count" not in r]
        if bad or not rows:
            why = [run["extra"].get("error") for run in runs if run["extra"].get("error")]
            out[name] = {"not_measured": (bad or why or ["no result"])[0]}
            continue
        wall = statistics.median(r["wall_s"] for r in rows)
        cpu = statistics.median(r["cpu_s"] for r in rows)
        gils = [r["gil_s"] for r in every if r["gil_s"] is not None]
        gil = statistics.median(gils) if gils else None
        if name == "small":
            rates = [n_small / r["wall_s"] for r in rows]
            out[name] = {
                "files_per_s": statistics.median(rates),
                "cpu_ms_per_file": cpu / n_small * 1000,
                "gil_ms_per_file": None if gil is None else gil / n_small * 1000,
            }
        else:
            rates = [large / MiB / r["wall_s"] for r in rows]
            out[name] = {
                "mib_per_s": statistics.median(rates),
                "cpu_s_per_gib": cpu / (large / GiB),
                "gil_s_per_gib": None if gil is None else gil / (large / GiB),
            }
        out[name]["wall_s"] = wall
        out[name]["repeats"] = rates
    return out


def table(origin_name: str, summary: dict[str, dict[str, Any]]) -> str:
    def f(v: Any, fmt: str) -> str:
        return "-" if v is None else format(v, fmt)

    def rate(p: dict[str, Any], key: str) -> str:
        each = ", ".join(format(r, ".0f") for r in p.get("repeats", []))
        return f"**{p[key]:.0f}** ({each})" if each else f(p.get(key), ".0f")

    lines = [
        f"### {origin_name}",
        "",
        "| client | ranged MiB/s | CPU s/GiB | GIL s/GiB | stream MiB/s | CPU s/GiB | GIL s/GiB "
        "| small files/s | CPU ms/file | GIL ms/file |",
        "|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|",
    ]
    notes = []
    for client, s in summary.items():
        cells = [client]
        for name in getclients.PASSES:
            p = s.get(name, {})
            if "not_measured" in p:
                cells += ["n/m", "", ""]
                notes.append(f"* {client} {name}: not measured: {p['not_measured']}")
            elif name == "small":
                cells += [rate(p, "files_per_s"), f(p.get("cpu_ms_per_file"), ".2f")]
                cells.append(f(p.get("gil_ms_per_file"), ".2f"))
            else:
                cells += [rate(p, "mib_per_s"), f(p.get("cpu_s_per_gib"), ".2f")]
                cells.append(f(p.get("gil_s_per_gib"), ".3f"))
        lines.append("| " + " | ".join(cells) + " |")
    return "\n".join([*lines, "", *notes])


def probe_all(
    endpoint: str, env: dict[str, str], args: argparse.Namespace, crcs: dict[str, Any]
) -> dict[str, dict[str, str]]:
    """Each client's answer to a ranged GET, with If-Match right and wrong, and of a missing key."""
    s3 = getclients.Boto3Client(
        endpoint, BUCKET, env["AWS_ACCESS_KEY_ID"], env["AWS_SECRET_ACCESS_KEY"], "us-east-1"
    ).s3
    etag = s3.head_object(Bucket=BUCKET, Key=small_keys(1)[0])["ETag"].strip('"')
    out = {}
    for client in args.clients:
        _, extra = run_worker(client, endpoint, env, args, crcs, False, probe_etag=etag)
        out[client] = extra.get("probe") or {"error": str(extra.get("error"))}
    return out


def probe_table(probes: dict[str, dict[str, str]]) -> str:
    lines = ["", "| client | check | outcome |", "|---|---|---|"]
    for client, checks in probes.items():
        for check, outcome in checks.items():
            lines.append(f"| {client} | {check} | {outcome.replace('|', '/')} |")
    return "\n".join(lines)


def check_gil(args: argparse.Namespace) -> None:
    """The GIL-held measure on cases whose answer is known (a busy loop, a sleep, ...)."""
    results, extra = run_worker("gil-check", "", dict(os.environ), args, {}, spy=True)
    if not results:
        raise SystemExit(f"GIL check failed: {extra.get('error')}")
    print("| case | expected GIL-held s | measured GIL-held s | wall s | CPU s |")
    print("|---|---:|---:|---:|---:|")
    for r in results:
        expected = getclients.GIL_CHECKS[r["pass"]][0]
        cells = [f"{expected:.1f}", f"{r['gil_s']:.3f}", f"{r['wall_s']:.2f}", f"{r['cpu_s']:.2f}"]
        print(f"| {r['pass']} | " + " | ".join(cells) + " |")


def print_tables(report: dict[str, Any]) -> None:
    """The tables of a saved run, summarized again from its raw figures."""
    large = int(report["args"]["large_mib"]) * MiB
    n_small = int(report["args"]["small"])
    for name, origin_report in report["origins"].items():
        runs = origin_report["runs"]
        summary = {client: summarize(rs, large, n_small) for client, rs in runs.items()}
        print(table(name, summary))
        print(probe_table(origin_report["probe"]))
        print()


def main(argv: list[str] | None = None) -> None:
    args = parse_args(argv)
    if args.worker is not None:
        getclients.worker(json.loads(args.worker))
        return
    spy = not args.no_gil and shutil.which("py-spy") is not None
    if args.check_gil:
        check_gil(args)
        return
    if args.tables_from is not None:
        print_tables(json.loads(args.tables_from.read_text()))
        return
    origins = ["moto", "s3rver"] if args.origin == "both" else [args.origin]
    report: dict[str, Any] = {"args": {k: str(v) for k, v in vars(args).items()}, "origins": {}}
    for name in origins:
        with origin(name) as (endpoint, env):
            log(f"{name} at {endpoint}: uploading")
            crcs = upload(endpoint, env, args)
            runs: dict[str, list[dict[str, Any]]] = {client: [] for client in args.clients}
            # Round-robin over clients, so a neighbour's load on the shared cores falls
            # on every client alike. py-spy takes CPU from the same cores: the timed
            # runs go without it, and one more run each, sampled, gives GIL-held time.
            for i in range(args.repeat + (1 if spy else 0)):
                sampled = i == args.repeat
                for client in args.clients:
                    results, extra = run_worker(client, endpoint, env, args, crcs, sampled)
                    runs[client].append({"results": results, "extra": extra, "spy": sampled})
                    tag = "sampled" if sampled else f"#{i + 1}"
                    log(f"{name} {client} {tag}: {json.dumps(results)} {extra or ''}")
            large = args.large_mib * MiB
            summary = {client: summarize(rs, large, args.small) for client, rs in runs.items()}
            probes = probe_all(endpoint, env, args, crcs)
            report["origins"][name] = {"runs": runs, "summary": summary, "probe": probes}
            print(table(name, summary), flush=True)
            print(probe_table(probes), flush=True)
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(report, indent=1))


if __name__ == "__main__":
    main()

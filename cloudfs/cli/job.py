"""``cloudfs job submit|list|status|logs|cancel|report``: jobs on the embedded scheduler.

``submit`` starts the scheduler (``cloudfs scheduler serve``) if none runs for
the state directory. See docs/jobs.md for the spec.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

from cloudfs.cli.scheduler import add_location_flags, state_and_config
from cloudfs.errors import UsageError
from cloudfs.jobs.client import request
from cloudfs.jobs.record import FINAL, WARMING
from cloudfs.sizes import format_size

FOLLOW_POLL = 0.5


def add_parser(commands: Any) -> None:
    p: argparse.ArgumentParser = commands.add_parser(
        "job", help="submit and manage training jobs", description=__doc__
    )
    sub = p.add_subparsers(dest="job_command", required=True, metavar="SUBCOMMAND")
    s = sub.add_parser("submit", help="queue a job from its YAML spec")
    s.add_argument("spec", metavar="JOB.yaml")
    s.set_defaults(run=run_submit)
    ls = sub.add_parser("list", help="every job and its state")
    ls.add_argument("--json", action="store_true", help="machine-readable output")
    ls.set_defaults(run=run_list)
    st = sub.add_parser("status", help="one job: state, reason, warm-up, events")
    st.add_argument("id", metavar="ID")
    st.add_argument("--json", action="store_true", help="machine-readable output")
    st.set_defaults(run=run_status)
    lg = sub.add_parser("logs", help="the workers' output of the latest attempt")
    lg.add_argument("id", metavar="ID")
    lg.add_argument("-f", "--follow", action="store_true", help="follow until the job ends")
    lg.set_defaults(run=run_logs)
    c = sub.add_parser("cancel", help="stop a job and every worker of it")
    c.add_argument("id", metavar="ID")
    c.set_defaults(run=run_cancel)
    r = sub.add_parser("report", help="requested and used resources, queued and stalled time")
    r.add_argument("--json", action="store_true", help="machine-readable output")
    r.set_defaults(run=run_report)
    for parser in (s, ls, st, lg, c, r):
        add_location_flags(parser)


def _ask(args: argparse.Namespace, message: dict[str, Any], start: bool = False) -> Any:
    state, config = state_and_config(args)
    return request(state, message, start=start, config=config if args.config else None)


def run_submit(args: argparse.Namespace) -> int:
    try:
        text = Path(args.spec).read_text()
    except OSError as e:
        raise UsageError(f"cannot read {args.spec}: {e.strerror}") from None
    job = _ask(args, {"op": "submit", "spec": text}, start=True)["job"]
    print(job["id"])
    return 0


def run_list(args: argparse.Namespace) -> int:
    jobs = _ask(args, {"op": "list"})["jobs"]
    if args.json:
        print(json.dumps(jobs, indent=2))
        return 0
    rows = [["ID", "GROUP", "USER", "STATE", "PRIO", "ATTEMPT", "REASON"]]
    for j in jobs:
        s = j["spec"]
        rows.append([j["id"], s["group"], s["user"], j["state"], str(s["priority"]),
                     str(j["attempt"]), _reason(j)])  # fmt: skip
    _table(rows)
    return 0


def run_status(args: argparse.Namespace) -> int:
    answer = _ask(args, {"op": "status", "id": args.id})
    job = answer["job"]
    if args.json:
        print(json.dumps(answer, indent=2))
        return 0
    s = job["spec"]
    print(f"{job['id']}: {job['state']}" + (f" ({_reason(job)})" if _reason(job) else ""))
    print(f"  group {s['group']}, user {s['user']}, priority {s['priority']}, "
          f"{s['workers']} x {s['framework']} worker(s), attempt {job['attempt']}/"
          f"{s['retries'] + 1}")  # fmt: skip
    print(f"  queued {job['queued_seconds']:.1f} s, stalled on data {job['stall_seconds']:.1f} s")
    for rank, indices in enumerate(job.get("devices") or []):
        print(f"  worker {rank}: GPUs {','.join(str(i) for i in indices)}")
    for event in answer["events"]:
        when = time.strftime("%H:%M:%S", time.localtime(event["at"]))
        print(f"  {when} {event['message']}")
    return 0


def _reason(job: dict[str, Any]) -> str:
    w = job.get("warmup") or {}
    if job["state"] == WARMING and w.get("bytes"):
        share = 100 * w["cached_bytes"] / w["bytes"]
        need = 100 * w["target"] / w["bytes"]
        return f"warming: {share:.0f}% of {format_size(w['bytes'])} cached, needs {need:.0f}%"
    return str(job.get("reason") or "")


def run_logs(args: argparse.Namespace) -> int:
    answer = _ask(args, {"op": "logs", "id": args.id})
    files = [Path(f) for f in answer["files"]]
    offsets = dict.fromkeys(files, 0)
    state = answer["job"]["state"]
    while True:
        for path in list(offsets):
            offsets[path] = _copy(path, offsets[path], len(offsets) > 1)
        if not args.follow or state in FINAL:
            return 0
        time.sleep(FOLLOW_POLL)
        answer = _ask(args, {"op": "logs", "id": args.id})
        state = answer["job"]["state"]
        for f in answer["files"]:
            offsets.setdefault(Path(f), 0)


def _copy(path: Path, offset: int, prefix: bool) -> int:
    try:
        with open(path, "rb") as f:
            f.seek(offset)
            data = f.read()
    except OSError:
        return offset
    end = data.rfind(b"\n") + 1 if prefix else len(data)  # whole lines only when prefixed
    out = data[:end]
    if prefix and out:
        name = path.stem.encode()
        out = b"".join(b"[" + name + b"] " + line for line in out.splitlines(keepends=True))
    sys.stdout.buffer.write(out)
    sys.stdout.flush()
    return offset + end


def run_cancel(args: argparse.Namespace) -> int:
    job = _ask(args, {"op": "cancel", "id": args.id})["job"]
    print(f"{job['id']}: {job['state']}")
    return 0


def run_report(args: argparse.Namespace) -> int:
    report = _ask(args, {"op": "report"})["report"]
    if args.json:
        print(json.dumps(report, indent=2))
        return 0
    _print_machine(report["machine"])
    for kind in ("groups", "users"):
        rows = [[kind[:-1].upper(), "GPUS req/alloc/quota", "CPUS req/alloc/quota",
                 "MEMORY req/alloc", "QUEUED s", "STALLED s"]]  # fmt: skip
        for name, b in sorted(report[kind].items()):
            rows.append([name, _rq(b, "gpus"), _rq(b, "cpus"),
                         f"{format_size(b['requested']['memory'])}/"
                         f"{format_size(b['allocated']['memory'])}",
                         f"{b['queued_seconds']:.0f}", f"{b['stall_seconds']:.0f}"])  # fmt: skip
        _table(rows)
        print()
    rows = [["JOB", "STATE", "GPUS", "CPUS req/used", "MEMORY req/used", "QUEUED s", "STALLED s"]]
    for j in report["jobs"]:
        req, used = j["requested"], j["used"]
        rows.append([j["id"], j["state"], f"{req['gpus']:g}",
                     f"{req['cpus']:g}/{used.get('cpus', '-')}",
                     f"{format_size(req['memory'])}/"
                     f"{format_size(used['memory']) if 'memory' in used else '-'}",
                     f"{j['queued_seconds']:.0f}", f"{j['stall_seconds']:.0f}"])  # fmt: skip
    _table(rows)
    return 0


def _print_machine(machine: dict[str, Any]) -> None:
    cap, used = machine["capacity"], machine["allocated"]

    def share(r: str, fmt: Any = lambda v: f"{v:g}") -> str:
        return f"{fmt(used[r])}/{'-' if cap[r] is None else fmt(cap[r])}"

    print(f"machine: GPUs {share('gpus')}, CPUs {share('cpus')}, "
          f"memory {share('memory', format_size)} allocated/capacity")  # fmt: skip
    for job_id, workers in sorted(machine["devices"].items()):
        shown = " | ".join(",".join(str(i) for i in w) for w in workers)
        print(f"  {job_id}: GPUs {shown}")
    print()


def _rq(bucket: dict[str, Any], r: str) -> str:
    quota = bucket.get("quota", {}).get(r)
    limit = "-" if quota is None else f"{quota:g}"
    return f"{bucket['requested'][r]:g}/{bucket['allocated'][r]:g}/{limit}"


def _table(rows: list[list[str]]) -> None:
    widths = [max(len(r[i]) for r in rows) for i in range(len(rows[0]))]
    for row in rows:
        print("  ".join(c.ljust(w) for c, w in zip(row, widths, strict=True)).rstrip())

#!/usr/bin/env python3
"""Simulate cache-aware vs cache-blind placement of a job queue on a small cluster.

A discrete-event model (benchmarks/scheduling/), not a cluster: 20 jobs over 3
datasets on 8 nodes whose caches are smaller than the datasets, read rates
taken from this repository's measurements. Each repeat draws a new queue from
its own seed and runs every policy on it from empty caches; the report is the
median over repeats and the aware / blind ratio per repeat.

    python3 benchmarks/scheduling_sim.py --seed 1 --repeats 9

Writes benchmarks/results/scheduling-<date>.json and prints a summary.
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path
from typing import Any

BENCH_DIR = Path(__file__).resolve().parent
sys.path[:0] = [str(BENCH_DIR)]

from scheduling.engine import Rates, make_nodes, simulate  # noqa: E402
from scheduling.markdown import medians_table, ratios_table  # noqa: E402
from scheduling.model import GIB, MIB  # noqa: E402
from scheduling.placement import POLICY_NAMES, make_policy  # noqa: E402
from scheduling.report import METRICS, medians, paired_ratios, summarize  # noqa: E402
from scheduling.workload import WorkloadSpec, make_datasets, make_jobs  # noqa: E402

# Rate defaults, all from benchmarks/RESULTS-without-fuse.md (run of 2026-12-05 20:03 UTC,
# benchmarks/results/without-fuse-20261205-200336.json; moto behind a proxy adding 20 ms per
# request), table "Large files, 4 readers":
WARM_MIBS = 4535.0  # line 97, "FUSE mount", warm MiB/s: a node reading its own disk cache
COLD_MIBS = 237.0  # line 97, "FUSE mount", cold MiB/s: one job reading the origin via a mount
ORIGIN_LINK_MIBS = 637.0  # line 103, "boto3 straight to the origin", cold: the origin's ceiling


def parse_args(argv: list[str] | None) -> argparse.Namespace:
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawTextHelpFormatter)
    p.add_argument("--seed", type=int, default=1, help="first seed; repeat i uses seed + i")
    p.add_argument("--repeats", type=int, default=9)
    p.add_argument("--nodes", type=int, default=8)
    p.add_argument("--gpus-per-node", type=int, default=8)
    p.add_argument("--jobs", type=int, default=20)
    p.add_argument("--datasets", type=int, default=3, help="how many of --dataset-gib to use")
    p.add_argument("--dataset-gib", default="400,250,150", help="dataset sizes, comma separated")
    p.add_argument(
        "--cache-fraction",
        type=float,
        default=0.6,
        help="each node's cache as a fraction of the largest dataset",
    )
    p.add_argument("--block-mib", type=int, default=256, help="cache and read granularity")
    p.add_argument("--gpus", default="1,2,4,8", help="GPUs per job, chosen uniformly")
    p.add_argument("--epochs", default="2,5", help="min,max epochs per job")
    p.add_argument("--mean-interarrival-s", type=float, default=300.0)
    p.add_argument("--warm-mibs", type=float, default=WARM_MIBS)
    p.add_argument("--cold-mibs", type=float, default=COLD_MIBS)
    p.add_argument(
        "--origin-link-mibs",
        type=float,
        default=ORIGIN_LINK_MIBS,
        help="cluster-wide origin rate shared by concurrent cold readers; 0 = no cap",
    )
    p.add_argument("--policies", default=",".join(POLICY_NAMES))
    p.add_argument("--blind", default="least-loaded", help="the baseline of the ratios")
    p.add_argument("--max-wait-s", type=float, default=600.0, help="aware-wait's bound")
    p.add_argument("--ready-fraction", type=float, default=0.8, help="aware-wait's threshold")
    p.add_argument("--out", type=Path, default=BENCH_DIR / "results")
    p.add_argument("--markdown", action="store_true", help="print Markdown tables too")
    return p.parse_args(argv)


def int_list(text: str) -> tuple[int, ...]:
    return tuple(int(part) for part in text.split(","))


def run(args: argparse.Namespace) -> dict[str, Any]:
    sizes = tuple(float(part) for part in args.dataset_gib.split(","))[: args.datasets]
    if len(sizes) < args.datasets:
        raise SystemExit(
            f"--dataset-gib names {len(sizes)} sizes; --datasets wants {args.datasets}"
        )
    min_epochs, max_epochs = int_list(args.epochs)
    spec = WorkloadSpec(
        jobs=args.jobs,
        dataset_gib=sizes,
        gpu_choices=int_list(args.gpus),
        min_epochs=min_epochs,
        max_epochs=max_epochs,
        mean_interarrival_s=args.mean_interarrival_s,
    )
    datasets = make_datasets(sizes)
    block_bytes = args.block_mib * MIB
    cache_bytes = int(args.cache_fraction * max(sizes) * GIB)
    rates = Rates(args.warm_mibs, args.cold_mibs, args.origin_link_mibs)
    policies = args.policies.split(",")
    per_policy: dict[str, list[dict[str, float]]] = {name: [] for name in policies}
    seeds = [args.seed + i for i in range(args.repeats)]
    for seed in seeds:
        jobs = make_jobs(spec, seed)
        for name in policies:
            policy = make_policy(name, seed, args.max_wait_s, args.ready_fraction)
            nodes = make_nodes(args.nodes, args.gpus_per_node, cache_bytes)
            result = simulate(jobs, datasets, nodes, rates, policy, block_bytes, seed)
            per_policy[name].append(summarize(result))
    blind = per_policy[args.blind]
    return {
        "command": "python3 benchmarks/scheduling_sim.py " + " ".join(sys.argv[1:]),
        "date": time.strftime("%Y-%m-%d %H:%M UTC", time.gmtime()),
        "args": {k: str(v) if isinstance(v, Path) else v for k, v in vars(args).items()},
        "seeds": seeds,
        "cache_gib_per_node": cache_bytes / GIB,
        "dataset_gib": list(sizes),
        "per_seed": per_policy,
        "medians": {name: medians(runs) for name, runs in per_policy.items()},
        "ratios_vs_blind": {name: paired_ratios(runs, blind) for name, runs in per_policy.items()},
    }


def print_summary(report: dict[str, Any]) -> None:
    print(f"medians over seeds {report['seeds']}")
    print("policy        " + " ".join(f"{m:>13}" for m in METRICS))
    for name, figures in report["medians"].items():
        print(f"{name:<13} " + " ".join(f"{figures[m]:>13.3f}" for m in METRICS))
    print(f"ratios vs {report['args']['blind']} (median of per-seed ratios)")
    for name, ratios in report["ratios_vs_blind"].items():
        cells = " ".join(
            f"{ratios[m]['median']:>13.3f}" if m in ratios else f"{'-':>13}" for m in METRICS
        )
        print(f"{name:<13} {cells}")


def main(argv: list[str] | None = None) -> int:
    args = parse_args(argv)
    report = run(args)
    args.out.mkdir(parents=True, exist_ok=True)
    path = args.out / f"scheduling-{time.strftime('%Y%m%d-%H%M%S', time.gmtime())}.json"
    path.write_text(json.dumps(report, indent=2) + "\n")
    print_summary(report)
    if args.markdown:
        print(medians_table(report), ratios_table(report), sep="\n\n")
    print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

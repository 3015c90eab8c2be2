"""The ``cloudfs`` command: parse, dispatch, and turn errors into one line and an exit code."""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence

from cloudfs import __version__
from cloudfs.cli import (
    cache_serve,
    flush,
    gateway,
    hint,
    job,
    meta_serve,
    mount,
    refresh,
    scheduler,
    scheduler_admission,
    scheduler_extender,
    sidecar,
    stats,
    umount,
    volume,
    warmup,
)
from cloudfs.errors import FsError, StartupError, UsageError


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(
        prog="cloudfs",
        description="A caching POSIX filesystem over S3 buckets and directories.",
    )
    parser.add_argument("--version", action="version", version=f"cloudfs {__version__}")
    commands = parser.add_subparsers(dest="command", required=True, metavar="COMMAND")
    mount.add_parser(commands)
    umount.add_parser(commands)
    warmup.add_parser(commands)
    refresh.add_parser(commands)
    hint.add_parser(commands)
    stats.add_parser(commands)
    flush.add_parser(commands)
    meta_serve.add_parser(commands)
    volume.add_parser(commands)
    cache_serve.add_parser(commands)
    gateway.add_parser(commands)
    job.add_parser(commands)
    # `cloudfs scheduler`: `serve` (the embedded scheduler), and for Kubernetes the
    # kube-scheduler `extender` and Kueue's data-readiness `admission-check`
    scheduling = scheduler.add_parser(commands)
    scheduler_extender.add_extender_parser(scheduling)
    scheduler_admission.add_admission_parser(scheduling)
    sidecar.add_parser(commands)
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    try:
        status: int = args.run(args)
        return status
    except UsageError as e:
        print(f"cloudfs: error: {e}", file=sys.stderr)
        return 2
    except (StartupError, FsError) as e:
        print(f"cloudfs: {e}", file=sys.stderr)
        return 1
    except KeyboardInterrupt:
        return 130


if __name__ == "__main__":
    sys.exit(main())

"""A job's workers as local processes: started with the environment its framework
expects, watched through their pid and exit files, stopped as a whole tree.

Each attempt has a directory, ``JOBS_DIR/ID/attempt-N``, holding one log per
launched process (``worker-R.log``) and the shim's pid and exit files
(``cloudfs.jobs.shim``). Frameworks:

* ``command``: ``workers`` copies of the command, with ``RANK``, ``LOCAL_RANK``,
  ``WORLD_SIZE``, ``MASTER_ADDR`` and ``MASTER_PORT`` set.
* ``torchrun``: one ``torch.distributed.run`` with ``--nproc-per-node=workers``
  (it sets ``RANK`` etc. for each of its processes itself).
* ``horovod``: one ``horovodrun -np workers -H localhost:workers``, run as
  ``python -m horovod.runner.launch`` with the scheduler's interpreter (like
  ``torchrun``): the ``horovodrun`` script is not on ``PATH`` where that
  interpreter's ``bin`` is not (a virtualenv not activated, a service unit).

Every process also gets ``CLOUDFS_JOB`` (the job id: its ranks' telemetry on
the mounts carries that name) and ``CLOUDFS_JOB_ATTEMPT``, and its GPUs as
``CUDA_VISIBLE_DEVICES`` and ``NVIDIA_VISIBLE_DEVICES``: a ``command`` worker its
own, a ``torchrun`` or ``horovod`` launcher all of the job's (its ranks pick
theirs by ``LOCAL_RANK``); a job asking no GPUs gets ``CUDA_VISIBLE_DEVICES=""``.
"""

from __future__ import annotations

import os
import signal
import socket
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from cloudfs.jobs import devices as devices_mod
from cloudfs.jobs import procs
from cloudfs.jobs.spec import JobSpec

STARTUP_GRACE = 60.0  # seconds a shim may take to write its pid file
_PYTHONS = ("python", "python3", sys.executable)


@dataclass(frozen=True, slots=True)
class WorkerState:
    rank: int
    running: bool
    exit: int | None  # exit status, minus the signal; None: gone without a word (SIGKILL)


def attempt_dir(jobs_dir: Path, job_id: str, attempt: int) -> Path:
    return jobs_dir / job_id / f"attempt-{attempt}"


Popen = subprocess.Popen[bytes]


def launch(
    spec: JobSpec, job_id: str, attempt: int, jobs_dir: Path,
    devices: devices_mod.Assignment | None = None,
) -> list[Popen]:  # fmt: skip
    """Start the attempt's processes; their pid files appear in its directory.
    ``devices``: each worker's GPU indices (``devices.assign``)."""
    directory = attempt_dir(jobs_dir, job_id, attempt)
    directory.mkdir(parents=True, exist_ok=True)
    port = _free_port()
    base = {
        **os.environ,
        **dict(spec.env),
        "CLOUDFS_JOB": job_id,
        "CLOUDFS_JOB_ATTEMPT": str(attempt),
        "MASTER_ADDR": "127.0.0.1",
        "MASTER_PORT": str(port),
        "WORLD_SIZE": str(spec.workers),
        "PYTHONUNBUFFERED": "1",
    }
    if spec.resources.gpus == 0:
        base["CUDA_VISIBLE_DEVICES"] = ""
    started = []
    commands = _commands(spec, port)
    if devices:
        every = [i for w in devices for i in w]  # one launcher for all ranks: all of them
        per_process = devices if len(commands) == len(devices) else [every]
        for (_, extra), indices in zip(commands, per_process, strict=True):
            extra.update(devices_mod.env(indices))
    for rank, (command, extra) in enumerate(commands):
        shim = [sys.executable, "-m", "cloudfs.jobs.shim", str(directory), str(rank), "--"]
        with open(directory / f"worker-{rank}.log", "ab") as log:
            started.append(
                subprocess.Popen(
                    [*shim, *command],
                    env={**base, **extra},
                    stdin=subprocess.DEVNULL,
                    stdout=log,
                    stderr=subprocess.STDOUT,
                    start_new_session=True,  # a session of its own: no terminal signal reaches it
                    close_fds=True,
                )
            )
    return started


def _commands(spec: JobSpec, port: int) -> list[tuple[list[str], dict[str, str]]]:
    n = spec.workers
    command = list(spec.command)
    if spec.framework == "torchrun":
        run = [sys.executable, "-m", "torch.distributed.run", "--nnodes=1"]
        run += [f"--nproc-per-node={n}", "--master-addr=127.0.0.1", f"--master-port={port}"]
        if os.path.basename(command[0]) in _PYTHONS or command[0] == sys.executable:
            return [([*run, *command[1:]], {})]
        return [([*run, "--no-python", *command], {})]
    if spec.framework == "horovod":
        run = [sys.executable, "-m", "horovod.runner.launch"]  # what horovodrun runs
        return [([*run, "-np", str(n), "-H", f"localhost:{n}", *command], {})]
    return [(command, {"RANK": str(r), "LOCAL_RANK": str(r)}) for r in range(n)]


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port: int = s.getsockname()[1]
        return port


def processes(spec: JobSpec) -> int:
    """How many processes ``launch`` starts for ``spec``."""
    return 1 if spec.framework in ("torchrun", "horovod") else spec.workers


def roots(directory: Path) -> list[tuple[int, int]]:
    """The (pid, start time) of every shim that wrote its pid file."""
    found = []
    for path in sorted(directory.glob("worker-*.pid")):
        try:
            pid, started = path.read_text().split()
            found.append((int(pid), int(started)))
        except (OSError, ValueError):
            continue
    return found


def poll(directory: Path, count: int, children: list[Popen] | None = None) -> list[WorkerState]:
    """Each of the ``count`` processes of the attempt in ``directory``; ``children``, the
    shims when this process started them (they are reaped here)."""
    states = []
    for rank in range(count):
        child = children[rank] if children and rank < len(children) else None
        ended = child is not None and child.poll() is not None
        exit_file = directory / f"worker-{rank}.exit"
        if exit_file.exists():
            states.append(WorkerState(rank, False, int(exit_file.read_text())))
            continue
        try:
            pid, started = (directory / f"worker-{rank}.pid").read_text().split()
        except (OSError, ValueError):
            # Starting, or died before it said: known from its handle where this process
            # started it, else after STARTUP_GRACE seconds since its log was created.
            if child is None:
                ended = _older_than(directory / f"worker-{rank}.log", STARTUP_GRACE)
            states.append(WorkerState(rank, not ended, None))
            continue
        running = procs.alive(int(pid), int(started))
        if not running and exit_file.exists():  # it ended between the two looks
            states.append(WorkerState(rank, False, int(exit_file.read_text())))
        else:
            states.append(WorkerState(rank, running, None))
    return states


def _older_than(path: Path, seconds: float) -> bool:
    try:
        return time.time() - path.stat().st_mtime > seconds
    except OSError:
        return True


def stop(
    directory: Path, count: int, children: list[Popen] | None = None, grace: float = 5.0
) -> None:
    """Stop every process of the attempt, each with its whole tree.

    A shim that has not written its pid file yet is found through its handle
    (``children``, where this process started it), else waited for while its log
    is younger than ``STARTUP_GRACE`` (at most 10 s)."""
    found = dict(roots(directory))
    for child in children or []:
        started = procs.start_time(child.pid)
        if started is not None:
            found.setdefault(child.pid, started)
    if not children:
        deadline = time.monotonic() + 10
        while len(found) < count and time.monotonic() < deadline:
            missing = [
                r for r in range(count)
                if not (directory / f"worker-{r}.pid").exists()
                and not _older_than(directory / f"worker-{r}.log", STARTUP_GRACE)
            ]  # fmt: skip
            if not missing:
                break
            time.sleep(0.05)
            found.update(roots(directory))
    procs.stop_trees(found.items(), grace)


def describe(exit: int | None) -> str:
    if exit is None:
        return "vanished (killed with SIGKILL, out of memory?)"
    if exit < 0:
        return f"killed by {signal.Signals(-exit).name}"
    return f"exited with status {exit}"

"""Going to the background once the mount is ready, reporting failures to the shell.

The parent forks before anything opens threads or files; the child sets the
mount up and writes one line on a pipe: "OK" once the kernel mount exists, or
"ERR <message>". The parent prints the message and exits with the right code,
so ``cloudfs mount ... && ls MOUNTPOINT`` is safe.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Callable

from cloudfs.errors import FsError, StartupError, UsageError

log = logging.getLogger(__name__)

Serve = Callable[[], int]


def run_detached(prepare: Callable[[], Serve]) -> int:
    """Run ``prepare`` (mounts) and then its returned ``serve`` in a child process."""
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid:
        os.close(write_end)
        with os.fdopen(read_end, "rb") as pipe:
            message = pipe.readline().decode(errors="replace").strip()
        if message == "OK":
            return 0
        if message.startswith("ERR "):
            print(f"cloudfs: {message[4:]}", file=sys.stderr)
        else:
            os.waitpid(pid, 0)
            print("cloudfs: the mount process died while starting; see its log", file=sys.stderr)
        return 1
    # child
    os.close(read_end)
    os.setsid()
    status = 1
    try:
        try:
            serve = prepare()
        except (StartupError, FsError, UsageError) as e:
            os.write(write_end, f"ERR {e}\n".encode())
            os._exit(1)
        except Exception as e:
            log.exception("mount failed")
            os.write(write_end, f"ERR mount failed: {e}\n".encode())
            os._exit(1)
        _detach_stdio()
        os.write(write_end, b"OK\n")
        os.close(write_end)
        status = serve()
    except BaseException:
        log.exception("mount process failed")
    finally:
        os._exit(status)


def _detach_stdio() -> None:
    devnull = os.open(os.devnull, os.O_RDWR)
    for fd in (0, 1, 2):
        os.dup2(devnull, fd)
    os.close(devnull)

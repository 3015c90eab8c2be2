"""Run test code as an unprivileged user, so that permission checks apply.

Tests run as root, and root passes almost every permission check. To see what a
normal user sees, :func:`run_as` forks, drops to the user's uid and gid in the
child (``setgroups([])``, ``setresgid``, ``setresuid``; group before user, or
the group change is no longer allowed), calls a function there and sends its
result or its ``OSError`` errno back over a pipe.

The child can ``chdir`` into a directory *before* it drops privileges (``cwd``)
and then use relative paths. That keeps tests independent of the permissions
on the directories above the test tree (pytest's ``/tmp/pytest-of-root`` is
0700): only the directories below ``cwd`` are checked against the user.

:func:`run_code_as` does the same for a small code string.
"""

from __future__ import annotations

import errno as errno_mod
import os
import pickle
import select
import signal
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Generic, TypeVar

T = TypeVar("T")


@dataclass(frozen=True)
class User:
    """A uid/gid pair; the process gets no supplementary groups."""

    uid: int
    gid: int


ALICE = User(1000, 1000)
BOB = User(1001, 1001)
NOBODY = User(65534, 65534)


@dataclass(frozen=True)
class Outcome(Generic[T]):
    """What a call in the child did: returned ``value``, or failed with ``errno``."""

    value: T | None
    errno: int | None
    message: str = ""

    @property
    def ok(self) -> bool:
        return self.errno is None

    def unwrap(self) -> T | None:
        """The value, or the child's error re-raised here as an ``OSError``."""
        if self.errno is not None:
            raise OSError(self.errno, f"as non-root: {self.message}")
        return self.value


class ChildError(RuntimeError):
    """The child failed with something other than an ``OSError``, or hung."""


def _drop_privileges(user: User) -> None:
    os.setgroups([])
    os.setresgid(user.gid, user.gid, user.gid)
    os.setresuid(user.uid, user.uid, user.uid)


def _child(
    user: User,
    fn: Callable[..., Any],
    args: tuple[Any, ...],
    cwd: Path | None,
    umask: int,
    write_fd: int,
) -> None:
    payload: bytes
    try:
        if cwd is not None:
            os.chdir(cwd)
        os.umask(umask)
        _drop_privileges(user)
        result = fn(*args)
        payload = pickle.dumps(("ok", result))
    except OSError as exc:
        payload = pickle.dumps(("oserror", exc.errno, str(exc)))
    except BaseException as exc:  # report everything; the child must never escape
        payload = pickle.dumps(("error", repr(exc)))
    view = memoryview(payload)
    while view:
        view = view[os.write(write_fd, view) :]
    os.close(write_fd)


def run_as(
    user: User,
    fn: Callable[..., T],
    *args: Any,
    cwd: Path | None = None,
    umask: int = 0o022,
    timeout: float = 60.0,
) -> Outcome[T]:
    """Call ``fn(*args)`` in a forked child running as ``user``.

    Args:
      user: the uid/gid to run as.
      fn: the function; its return value must be picklable.
      cwd: a directory to enter (as root) before dropping privileges.
      umask: the child's umask.
      timeout: seconds before the child is killed and ``ChildError`` raised.

    Returns:
      ``Outcome(value, None)`` or ``Outcome(None, errno)`` for an ``OSError``.

    Raises:
      ChildError: the child raised anything else, died, or timed out.
    """
    read_fd, write_fd = os.pipe()
    pid = os.fork()
    if pid == 0:  # child: never return into the test runner
        code = 0
        try:
            os.close(read_fd)
            _child(user, fn, args, cwd, umask, write_fd)
        except BaseException:
            code = 1
        finally:
            os._exit(code)
    os.close(write_fd)
    chunks: list[bytes] = []
    deadline = time.monotonic() + timeout
    try:
        while True:
            left = deadline - time.monotonic()
            ready, _, _ = select.select([read_fd], [], [], max(left, 0.0))
            if not ready:
                os.kill(pid, signal.SIGKILL)
                raise ChildError(f"child as uid {user.uid} timed out after {timeout}s")
            chunk = os.read(read_fd, 65536)
            if not chunk:
                break
            chunks.append(chunk)
    finally:
        os.close(read_fd)
        os.waitpid(pid, 0)
    if not chunks:
        raise ChildError(f"child as uid {user.uid} died without a result")
    report = pickle.loads(b"".join(chunks))
    if report[0] == "ok":
        return Outcome(report[1], None)
    if report[0] == "oserror":
        return Outcome(None, report[1], report[2])
    raise ChildError(f"child as uid {user.uid} raised {report[1]}")


def errno_as(user: User, fn: Callable[..., object], *args: Any, cwd: Path | None = None) -> int:
    """The errno ``fn(*args)`` fails with as ``user``, or 0 when it succeeds."""
    outcome = run_as(user, fn, *args, cwd=cwd)
    return 0 if outcome.errno is None else outcome.errno


def errno_name(code: int) -> str:
    """``errno.errorcode`` with 0 shown as ``OK``, for readable assertions."""
    return "OK" if code == 0 else errno_mod.errorcode.get(code, str(code))


def _exec_code(code: str) -> object:
    namespace: dict[str, object] = {"__name__": "__run_as__"}
    exec(compile(code, "<run_code_as>", "exec"), namespace)
    return namespace.get("result")


def run_code_as(
    user: User, code: str, *, cwd: Path | None = None, timeout: float = 60.0
) -> Outcome[object]:
    """Execute a small code string as ``user``; its variable ``result`` comes back.

    The code runs in a forked child like :func:`run_as` (not a new interpreter:
    the test's interpreter may live under a directory the user cannot search).
    An ``OSError`` it raises comes back as ``Outcome.errno``.
    """
    return run_as(user, _exec_code, code, cwd=cwd, timeout=timeout)

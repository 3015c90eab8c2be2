"""``cloudfs gateway s3`` as a command: one line when listening, a clean exit on SIGTERM,
one-line refusals of bad flags."""

from __future__ import annotations

import signal
import subprocess

from testkit.tree_server import TreeServer
from tests.gateway.conftest import REPO, Volume, gateway_command, gateway_env


def test_listens_and_stops_on_sigterm(tree: TreeServer, volume: Volume, tmp_path) -> None:  # type: ignore[no-untyped-def]
    proc = subprocess.Popen(
        gateway_command(
            "--listen", "127.0.0.1:0", "--volume", volume.name, "--staging-dir", str(tmp_path)
        ),
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        env=gateway_env(tree),
        cwd=REPO,
    )
    assert proc.stdout is not None
    assert proc.stdout.readline().startswith("listening on 127.0.0.1:")
    proc.send_signal(signal.SIGTERM)
    assert proc.wait(timeout=20) == 0


def test_bad_flags(tree: TreeServer, tmp_path) -> None:  # type: ignore[no-untyped-def]
    for args, status, words in [
        (["--volume", "no-such-volume"], 2, "no volume 'no-such-volume'"),
        (["--listen", "nowhere"], 2, "--listen"),
        (["--threads", "0"], 2, "--threads"),
        (["--keys-file", str(tmp_path / "missing")], None, ""),
    ]:
        done = subprocess.run(
            gateway_command("--listen", "127.0.0.1:0", *args)
            if "--listen" not in args
            else gateway_command(*args),
            capture_output=True,
            text=True,
            env=gateway_env(tree),
            cwd=REPO,
            timeout=60,
        )
        assert done.returncode != 0, args
        if status is not None:
            assert done.returncode == status, done.stderr
        assert len(done.stderr.strip().splitlines()) == 1, done.stderr
        assert words in done.stderr

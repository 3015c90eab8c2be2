"""The AWS CLI (its own venv, /opt/cloudfs-awscli: it pins its botocore) against the real
gateway: ``aws s3 cp/ls/sync/rm`` (multipart included) and ``aws s3api``."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

import pytest

from tests.gateway.conftest import ACCESS_KEY, SECRET_KEY, Gateway, Volume

AWS = Path("/opt/cloudfs-awscli/bin/aws")

pytestmark = pytest.mark.skipif(
    not AWS.exists(), reason="no AWS CLI venv (.ci/setup makes /opt/cloudfs-awscli)"
)


def aws(gateway: Gateway, home: Path, *args: str) -> str:
    env = {
        "PATH": os.environ.get("PATH", ""),
        "HOME": str(home),
        "AWS_ACCESS_KEY_ID": ACCESS_KEY,
        "AWS_SECRET_ACCESS_KEY": SECRET_KEY,
        "AWS_DEFAULT_REGION": "us-east-1",
        "AWS_CONFIG_FILE": str(home / "config"),
    }
    (home / "config").write_text(
        "[default]\ns3 =\n    addressing_style = path\n    multipart_threshold = 5MB\n"
        "    multipart_chunksize = 5MB\n"
    )
    done = subprocess.run(
        [str(AWS), "--endpoint-url", gateway.endpoint, *args],
        env=env,
        capture_output=True,
        text=True,
        timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_aws_s3_commands(gateway: Gateway, volume: Volume, tmp_path: Path) -> None:
    b = volume.name
    src = tmp_path / "src"
    (src / "sub").mkdir(parents=True)
    big = os.urandom(11 * 1024 * 1024)
    (src / "big.bin").write_bytes(big)
    (src / "sub" / "a.txt").write_text("a")
    (src / "sub" / "b.txt").write_text("bb")
    aws(gateway, tmp_path, "s3", "cp", str(src / "big.bin"), f"s3://{b}/one/big.bin")
    aws(gateway, tmp_path, "s3", "sync", str(src), f"s3://{b}/tree")
    listing = aws(gateway, tmp_path, "s3", "ls", "--recursive", f"s3://{b}/")
    keys = sorted(line.split()[-1] for line in listing.splitlines())
    assert keys == ["one/big.bin", "tree/big.bin", "tree/sub/a.txt", "tree/sub/b.txt"]
    top = aws(gateway, tmp_path, "s3", "ls", f"s3://{b}/")
    assert "PRE one/" in top and "PRE tree/" in top
    back = tmp_path / "back"
    aws(gateway, tmp_path, "s3", "sync", f"s3://{b}/tree", str(back))
    assert (back / "big.bin").read_bytes() == big
    assert (back / "sub" / "b.txt").read_text() == "bb"
    assert volume.local_dir is not None
    assert (volume.local_dir / "one" / "big.bin").read_bytes() == big
    aws(gateway, tmp_path, "s3", "rm", "--recursive", f"s3://{b}/tree")
    left = json.loads(aws(gateway, tmp_path, "s3api", "list-objects-v2", "--bucket", b))
    assert [c["Key"] for c in left["Contents"]] == ["one/big.bin"]  # nothing of tree/ left


def test_aws_s3api(gateway: Gateway, volume: Volume, tmp_path: Path) -> None:
    b = volume.name
    body = tmp_path / "body"
    body.write_bytes(b"0123456789")
    aws(gateway, tmp_path, "s3api", "put-object", "--bucket", b, "--key", "k", "--body", str(body))
    head = json.loads(aws(gateway, tmp_path, "s3api", "head-object", "--bucket", b, "--key", "k"))
    assert head["ContentLength"] == 10
    out = tmp_path / "out"
    aws(
        gateway,
        tmp_path,
        "s3api",
        "get-object",
        "--bucket",
        b,
        "--key",
        "k",
        "--range",
        "bytes=2-4",
        str(out),
    )
    assert out.read_bytes() == b"234"
    listed = json.loads(
        aws(gateway, tmp_path, "s3api", "list-objects-v2", "--bucket", b, "--max-keys", "1")
    )
    assert [c["Key"] for c in listed["Contents"]] == ["k"]

"""Spark's s3a client (hadoop-aws 3.3.1, AWS SDK for Java 1.11.901) against the real gateway:
a DataFrame written as Parquet through Spark's FileOutputCommitter (multipart uploads,
listings, renames by copy, a directory rename, a recursive delete of ``_temporary``), read
back, appended to and listed.

Spark runs in its own venv with its own JVM; ``.ci/setup`` installs both, and the s3a jars
from the sdist of ``sagemaker_pyspark`` (Maven Central is out of reach here). The test skips
where they are missing."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import textwrap
from pathlib import Path

import pytest

from tests.gateway.conftest import ACCESS_KEY, SECRET_KEY, Gateway, Volume

SPARK = Path("/opt/cloudfs-spark")
PYTHON = SPARK / "bin" / "python"
JARS = [
    SPARK / "s3a-jars" / "hadoop-aws-3.3.1.jar",
    SPARK / "s3a-jars" / "aws-java-sdk-bundle-1.11.901.jar",
]

pytestmark = pytest.mark.slow

# Run by the venv's Python: argv[1] is a JSON object of settings; the last line printed is a
# JSON object of what Spark saw.
SCRIPT = textwrap.dedent(
    """
    import json, sys
    from pyspark.sql import SparkSession

    cfg = json.loads(sys.argv[1])
    builder = (
        SparkSession.builder.master("local[2]")
        .appName("cloudfs-s3a-test")
        .config("spark.ui.enabled", "false")
        .config("spark.sql.shuffle.partitions", "2")
        .config("spark.local.dir", cfg["local_dir"])
        .config("spark.jars", ",".join(cfg["jars"]))
    )
    for key, value in cfg["hadoop"].items():
        builder = builder.config("spark.hadoop." + key, value)
    spark = builder.getOrCreate()
    spark.sparkContext.setLogLevel("WARN")
    base = cfg["base"]
    # Built in the JVM (spark.range, SQL): pyspark 3.3's cloudpickle cannot pickle functions
    # of Python 3.11, which createDataFrame from Python rows and UDFs would need.
    df = spark.range(0, 1000, 1, 2).selectExpr("id", "concat('l', id % 7) AS label")
    df.write.parquet(base)
    back = spark.read.parquet(base)
    first = back.count()
    ids = sorted(r.id for r in back.select("id").collect())
    more = spark.range(1000, 1250, 1, 2).selectExpr("id", "'more' AS label")
    more.write.mode("append").parquet(base)
    second = spark.read.parquet(base).count()
    labels = spark.read.parquet(base).filter("label = 'more'").count()
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(base)
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    listed = sorted(s.getPath().getName() for s in fs.listStatus(path))
    spark.stop()
    print(json.dumps({
        "first": first, "ids_ok": ids == list(range(1000)), "second": second,
        "labels": labels, "listed": listed,
    }))
    """
)


def _java_home() -> str | None:
    if os.environ.get("JAVA_HOME"):
        return os.environ["JAVA_HOME"]
    java = shutil.which("java")
    return str(Path(java).resolve().parents[1]) if java else None


def test_spark_s3a_parquet_write_read_append(
    gateway: Gateway,
    volume: Volume,
    s3,  # type: ignore[no-untyped-def]
    tmp_path: Path,
) -> None:
    if not PYTHON.exists():
        pytest.skip(f"no Spark venv at {SPARK} (.ci/setup installs pyspark there)")
    missing = [str(j) for j in JARS if not j.exists()]
    if missing:
        pytest.skip(f"s3a jars missing: {', '.join(missing)} (.ci/setup extracts them)")
    java_home = _java_home()
    if java_home is None:
        pytest.skip("no java on PATH (.ci/setup installs openjdk-17-jre-headless)")
    cfg = {
        "base": f"s3a://{volume.name}/dir",
        "jars": [str(j) for j in JARS],
        "local_dir": str(tmp_path / "spark-local"),
        "hadoop": {
            "fs.s3a.impl": "org.apache.hadoop.fs.s3a.S3AFileSystem",
            "fs.s3a.endpoint": gateway.endpoint,
            "fs.s3a.path.style.access": "true",
            "fs.s3a.connection.ssl.enabled": "false",
            "fs.s3a.access.key": ACCESS_KEY,
            "fs.s3a.secret.key": SECRET_KEY,
            "fs.s3a.aws.credentials.provider": (
                "org.apache.hadoop.fs.s3a.SimpleAWSCredentialsProvider"
            ),
            # A failure fails fast rather than being retried for minutes.
            "fs.s3a.attempts.maximum": "1",
            "fs.s3a.retry.limit": "1",
            "fs.s3a.retry.interval": "100ms",
            "fs.s3a.retry.throttle.limit": "1",
            "fs.s3a.connection.establish.timeout": "5000",
            "fs.s3a.connection.timeout": "20000",
        },
    }
    env = dict(os.environ, JAVA_HOME=java_home, PYSPARK_PYTHON=str(PYTHON))
    env.pop("PYTHONPATH", None)  # the venv's pyspark, not this checkout's packages
    try:
        run = subprocess.run(
            [str(PYTHON), "-c", SCRIPT, json.dumps(cfg)],
            capture_output=True,
            text=True,
            env=env,
            cwd=tmp_path,
            timeout=240,
        )
    except subprocess.TimeoutExpired as e:
        raise AssertionError(f"Spark did not finish: {e.stderr!r}\n{gateway.log()[-5000:]}") from e
    assert run.returncode == 0, f"{run.stderr[-8000:]}\n--- gateway ---\n{gateway.log()[-5000:]}"
    seen = json.loads(run.stdout.strip().splitlines()[-1])
    assert seen["first"] == 1000 and seen["ids_ok"]
    assert seen["second"] == 1250 and seen["labels"] == 250
    assert "_SUCCESS" in seen["listed"] and "_temporary" not in seen["listed"]
    assert sum(name.endswith(".parquet") for name in seen["listed"]) >= 2

    # From the other side: boto3 through the gateway, and the volume's own directory.
    keys = [
        o["Key"]
        for page in s3.get_paginator("list_objects_v2").paginate(Bucket=volume.name, Prefix="dir/")
        for o in page.get("Contents", [])
    ]
    assert not [k for k in keys if "_temporary" in k], keys
    parquet = [k for k in keys if k.endswith(".parquet")]
    assert len(parquet) >= 2 and "dir/_SUCCESS" in keys, keys
    for key in parquet:
        assert s3.get_object(Bucket=volume.name, Key=key)["Body"].read(4) == b"PAR1"
    assert volume.local_dir is not None
    assert not (volume.local_dir / "dir" / "_temporary").exists()
    assert sorted(p.name for p in (volume.local_dir / "dir").glob("*.parquet")) == sorted(
        k.rsplit("/", 1)[1] for k in parquet
    )

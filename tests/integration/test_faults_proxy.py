"""The test proxy's injected faults and latency, seen by a real boto3 client against moto.

Every client here makes exactly one attempt per call (no retries), so what a
call sees is what the proxy did to its one request.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from typing import Any

import boto3
import pytest
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.servers import ACCESS_KEY, REGION, SECRET_KEY, S3Server


def _client(endpoint: str) -> Any:
    # ``max_attempts`` in a client Config counts *retries* (1 would mean two
    # tries); ``total_max_attempts`` counts tries, so 1 means no retry at all.
    return boto3.client(
        "s3",
        endpoint_url=endpoint,
        aws_access_key_id=ACCESS_KEY,
        aws_secret_access_key=SECRET_KEY,
        region_name=REGION,
        config=Config(retries={"total_max_attempts": 1}, connect_timeout=5, read_timeout=10),
    )


@pytest.fixture
def proxy(s3_server: S3Server) -> Iterator[FaultsProxy]:
    with running_proxy(s3_server.endpoint, seed=1234) as p:
        yield p


def _exists(s3_server: S3Server, bucket: str, key: str) -> bool:
    try:
        s3_server.client().head_object(Bucket=bucket, Key=key)
    except ClientError as e:
        assert e.response["Error"]["Code"] in ("404", "NoSuchKey")
        return False
    return True


def test_error_fault_answers_slowdown_and_forwards_nothing(
    s3_server: S3Server, s3_bucket: str, proxy: FaultsProxy
) -> None:
    s3 = _client(proxy.endpoint)
    proxy.fault = "error"
    proxy.fail_ratio = 1.0

    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=s3_bucket, Key="k", Body=b"data")
    assert info.value.response["Error"]["Code"] == "SlowDown"
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert proxy.injected == 1
    assert proxy.count("PUT") == 1  # a failed request is still recorded
    assert not _exists(s3_server, s3_bucket, "k")  # ... but never reached the server

    with pytest.raises(ClientError) as info:  # a HEAD answer has no body: code from status
        s3.head_object(Bucket=s3_bucket, Key="k")
    assert info.value.response["ResponseMetadata"]["HTTPStatusCode"] == 503
    assert proxy.injected == 2

    proxy.fail_ratio = 0.0
    s3.put_object(Bucket=s3_bucket, Key="k", Body=b"data")
    assert _exists(s3_server, s3_bucket, "k")
    assert proxy.injected == 2


def test_cut_fault_closes_the_connection(
    s3_server: S3Server, s3_bucket: str, proxy: FaultsProxy
) -> None:
    s3 = _client(proxy.endpoint)
    proxy.fault = "cut"
    proxy.fail_ratio = 1.0

    with pytest.raises(BotoCoreError):
        s3.put_object(Bucket=s3_bucket, Key="k", Body=b"data")
    with pytest.raises(BotoCoreError):
        s3.list_objects_v2(Bucket=s3_bucket)
    assert proxy.injected == 2
    assert not _exists(s3_server, s3_bucket, "k")

    proxy.fail_ratio = 0.0
    s3.put_object(Bucket=s3_bucket, Key="k", Body=b"data")
    assert _exists(s3_server, s3_bucket, "k")


def _failures_over_puts(endpoint: str, bucket: str, prefix: str, seed: int) -> list[bool]:
    with running_proxy(endpoint, seed=seed) as proxy:
        s3 = _client(proxy.endpoint)
        proxy.fail_ratio = 0.3
        failed = []
        for i in range(50):
            try:
                s3.put_object(Bucket=bucket, Key=f"{prefix}{i}", Body=b"x")
            except ClientError as e:
                assert e.response["Error"]["Code"] == "SlowDown"
                failed.append(True)
            else:
                failed.append(False)
        assert proxy.injected == sum(failed)
        assert proxy.count("PUT") == 50
    return failed


def test_fail_ratio_is_partial_and_reproducible(s3_server: S3Server, s3_bucket: str) -> None:
    first = _failures_over_puts(s3_server.endpoint, s3_bucket, "a/", seed=7)
    assert 0 < sum(first) < 50

    listed = s3_server.client().list_objects_v2(Bucket=s3_bucket, Prefix="a/")
    stored = {o["Key"] for o in listed.get("Contents", [])}
    assert stored == {f"a/{i}" for i, f in enumerate(first) if not f}

    # The same seed and the same sequence of requests: the same ones fail.
    assert _failures_over_puts(s3_server.endpoint, s3_bucket, "b/", seed=7) == first


def test_fault_methods_limit_faults_to_uploads(
    s3_server: S3Server, s3_bucket: str, proxy: FaultsProxy
) -> None:
    s3_server.client().put_object(Bucket=s3_bucket, Key="there", Body=b"hello")
    s3 = _client(proxy.endpoint)
    proxy.fault_methods = frozenset({"PUT", "POST"})
    proxy.fail_ratio = 1.0

    for _ in range(5):
        assert s3.get_object(Bucket=s3_bucket, Key="there")["Body"].read() == b"hello"
        s3.head_object(Bucket=s3_bucket, Key="there")
    assert proxy.injected == 0

    with pytest.raises(ClientError) as info:
        s3.put_object(Bucket=s3_bucket, Key="new", Body=b"data")
    assert info.value.response["Error"]["Code"] == "SlowDown"
    assert proxy.injected == 1
    assert proxy.counts() == {"GET": 5, "HEAD": 5, "PUT": 1}

    proxy.fault_methods = None
    with pytest.raises(ClientError):
        s3.get_object(Bucket=s3_bucket, Key="there")
    assert proxy.injected == 2


def test_delay_slows_every_request(s3_server: S3Server, s3_bucket: str, proxy: FaultsProxy) -> None:
    s3_server.client().put_object(Bucket=s3_bucket, Key="k", Body=b"v")
    s3 = _client(proxy.endpoint)
    s3.head_object(Bucket=s3_bucket, Key="k")  # connect before timing
    proxy.delay = 0.05

    start = time.monotonic()
    for _ in range(10):
        s3.head_object(Bucket=s3_bucket, Key="k")
    assert time.monotonic() - start >= 0.5
    assert proxy.count("HEAD") == 11
    assert proxy.injected == 0


def test_knobs_are_validated_and_reset(proxy: FaultsProxy) -> None:
    with pytest.raises(ValueError):
        proxy.fail_ratio = 1.5
    with pytest.raises(ValueError):
        proxy.fault = "explode"
    with pytest.raises(ValueError):
        proxy.delay = -1
    assert (proxy.fail_ratio, proxy.fault, proxy.fault_methods, proxy.delay) == (
        0.0,
        "error",
        None,
        0.0,
    )
    proxy.fault_methods = frozenset({"put"})
    assert proxy.fault_methods == frozenset({"PUT"})

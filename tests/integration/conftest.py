"""Fixtures the integration tests of the S3 store share."""

from __future__ import annotations

import json
import urllib.request
from collections.abc import Iterator
from typing import Any

import boto3
import pytest

from testkit.faults_proxy import FaultsProxy, running_proxy
from testkit.servers import S3Server, running_s3_server


@pytest.fixture(scope="module")
def signing_server() -> Iterator[tuple[S3Server, dict[str, str]]]:
    """A private moto server that verifies signatures, and an IAM user's keys it accepts."""
    with running_s3_server() as server:
        reset = urllib.request.Request(
            server.endpoint + "/moto-api/reset-auth",
            data=b"4",  # the set-up below goes unauthenticated, then every request is checked
            method="POST",
            headers={"Content-Type": "application/json"},
        )
        urllib.request.urlopen(reset, timeout=10).read()
        iam: Any = boto3.client(
            "iam",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id="testing",
            aws_secret_access_key="testing",
        )
        iam.create_user(UserName="reader")
        policy = {
            "Version": "2012-10-17",
            "Statement": [{"Effect": "Allow", "Action": "*", "Resource": "*"}],
        }
        arn = iam.create_policy(PolicyName="all", PolicyDocument=json.dumps(policy))["Policy"][
            "Arn"
        ]
        iam.attach_user_policy(UserName="reader", PolicyArn=arn)
        key = iam.create_access_key(UserName="reader")["AccessKey"]
        s3: Any = boto3.client(
            "s3",
            endpoint_url=server.endpoint,
            region_name="us-east-1",
            aws_access_key_id=key["AccessKeyId"],
            aws_secret_access_key=key["SecretAccessKey"],
        )
        s3.create_bucket(Bucket="signed-bucket")
        yield (
            server,
            {
                "AWS_ACCESS_KEY_ID": key["AccessKeyId"],
                "AWS_SECRET_ACCESS_KEY": key["SecretAccessKey"],
            },
        )


@pytest.fixture
def seeded_proxy(s3_server: S3Server) -> Iterator[FaultsProxy]:
    """A proxy in front of the test S3 server, its draws seeded: with seed 3, at a
    ratio of 0.5, the first request it may fail fails and the next one passes."""
    with running_proxy(s3_server.endpoint, seed=3) as proxy:
        yield proxy

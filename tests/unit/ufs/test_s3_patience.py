"""A rename's steps are tried again while S3 answers SlowDown, and only then."""

from __future__ import annotations

import pytest
from botocore.exceptions import ClientError

from cloudfs.ufs import s3_errors
from cloudfs.ufs.s3_errors import patiently


def error(code: str, status: int) -> ClientError:
    return ClientError(
        {"Error": {"Code": code}, "ResponseMetadata": {"HTTPStatusCode": status}}, "CopyObject"
    )


def test_throttling_is_waited_out_and_other_errors_are_not(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setattr(s3_errors, "THROTTLE_PAUSES", (0.0, 0.0, 0.0))
    answers = [error("SlowDown", 503), error("ServiceUnavailable", 503), "copied"]

    def call() -> str:
        answer = answers.pop(0)
        if isinstance(answer, ClientError):
            raise answer
        return answer

    assert patiently(call) == "copied"
    tries = []

    def denied() -> None:
        tries.append(1)
        raise error("AccessDenied", 403)

    with pytest.raises(ClientError):
        patiently(denied)
    assert len(tries) == 1

    def always_slow() -> None:
        tries.append(1)
        raise error("SlowDown", 503)

    with pytest.raises(ClientError):
        patiently(always_slow)
    assert len(tries) == 1 + 4  # the first try and one after each of the 3 pauses

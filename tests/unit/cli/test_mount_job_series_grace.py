"""``--job-series-grace`` / ``-o job_series_grace=``: how long an ended job's series stay."""

from __future__ import annotations

import argparse

import pytest

from cloudfs.cli.mount import add_parser, config_from_args
from cloudfs.errors import UsageError


def _grace(*extra: str) -> float:
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["mount", "grpc://127.0.0.1:1/vol", "/tmp/x", *extra])
    return config_from_args(args).cache.job_series_grace


def test_the_grace_spellings() -> None:
    assert _grace() == 120.0
    assert _grace("--job-series-grace", "30") == 30.0
    assert _grace("-o", "ro,job_series_grace=0") == 0.0
    assert _grace("-o", "job_series_grace=2.5") == 2.5


@pytest.mark.parametrize("bad", ["-1", "soon", "inf"])
def test_a_bad_grace_is_a_usage_error_naming_the_flag(bad: str) -> None:
    with pytest.raises(UsageError, match="--job-series-grace"):
        _grace("--job-series-grace", bad)

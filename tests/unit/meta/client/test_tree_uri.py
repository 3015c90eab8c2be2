"""``grpc://HOST:PORT[,HOST:PORT...]/VOLUME``: one server or several of one tree, and the
gRPC target a list becomes."""

from __future__ import annotations

import pytest

from cloudfs.errors import RemoteIOError, UsageError
from cloudfs.meta.client.channel import failover_target
from cloudfs.meta.client.tree_uri import parse_tree_address, parse_tree_uri


def test_one_server_or_several() -> None:
    assert parse_tree_uri("grpc://Meta:7070/imagenet").address == "meta:7070"
    several = parse_tree_uri("grpc://h1:7070,10.0.0.2:7071,[::1]:7072/vol")
    assert several.address == "h1:7070,10.0.0.2:7071,[::1]:7072"
    assert several.normalized == "grpc://h1:7070,10.0.0.2:7071,[::1]:7072/vol"
    assert parse_tree_address("grpc://h1:7070,h2:7070", "--meta-server") == "h1:7070,h2:7070"


@pytest.mark.parametrize(
    "uri",
    ["grpc://h1/vol", "grpc://h1:7070,/vol", "grpc://h1:x/vol", "grpc://u@h1:7070/vol",
     "grpc://h1:7070", "s3://bucket/vol", "grpc://:7070/vol"],
)  # fmt: skip
def test_what_is_no_tree_uri(uri: str) -> None:
    with pytest.raises(UsageError):
        parse_tree_uri(uri)


def test_a_list_is_one_target_of_every_address_in_order() -> None:
    assert failover_target("127.0.0.2:7071,127.0.0.1:7070") == (
        "ipv4:127.0.0.2:7071,127.0.0.1:7070"
    )
    assert failover_target("[::1]:7070,[::2]:7071") == "ipv6:[::1]:7070,[::2]:7071"
    with pytest.raises(RemoteIOError, match="cannot resolve"):
        failover_target("no-such-host.invalid:7070,127.0.0.1:7070")
    with pytest.raises(RemoteIOError, match="no address family"):
        failover_target("[::1]:7070,127.0.0.1:7071")

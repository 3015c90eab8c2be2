"""The etcd engine's URI: hosts, prefix and TLS parameters read, mistakes refused in one line."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudfs.errors import UsageError
from cloudfs.meta.engine.etcd_uri import parse
from testkit.certs import Certs


def test_hosts_and_prefix() -> None:
    target = parse("etcd://n1:2379,n2:2379/vol%2Fa/")
    assert target.endpoints == ["http://n1:2379", "http://n2:2379"]
    assert target.prefix == b"vol/a/"
    assert target.tls is None
    assert parse("etcd://n1:2379").prefix == b"cloudfs/"


def test_cacert_turns_tls_on_with_a_client_certificate(certs: Certs) -> None:
    target = parse(
        f"etcd://n1:2379,n2:2379/p/?cacert={certs.ca}&cert={certs.client_cert}"
        f"&key={certs.client_key}&server-name=etcd.internal"
    )
    assert target.endpoints == ["https://n1:2379", "https://n2:2379"]
    assert target.tls is not None and target.tls.cert is not None
    assert target.server_name == "etcd.internal"
    assert parse(f"etcd://n1:2379?cacert={certs.ca}").tls is not None


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("?cacert={ca}&colour=red", "unknown parameter 'colour'"),
        ("?cacert={ca}&cacert={ca}", "cacert= given twice"),
        ("?cacert=", "cacert= needs a value"),
        ("?cert={cert}&key={key}", "cert= goes with cacert="),
        ("?server-name=x", "server-name= goes with cacert="),
        ("?cacert={ca}&cert={cert}", "cert= and key= go together"),
        ("?cacert={tmp}/missing.pem", "cannot read CA file"),
        ("?cacert={ca}&cert={cert}&key={other_key}", "key does not match"),
    ],
)
def test_mistakes_are_one_line_usage_errors(
    certs: Certs, tmp_path: Path, query: str, words: str
) -> None:
    uri = "etcd://n1:2379" + query.format(
        ca=certs.ca,
        cert=certs.client_cert,
        key=certs.client_key,
        other_key=certs.server_key,
        tmp=tmp_path,
    )
    with pytest.raises(UsageError, match=words) as caught:
        parse(uri)
    assert "\n" not in str(caught.value)


@pytest.mark.parametrize(
    "uri", ["lmdb:///x", "etcd://", "etcd:///prefix", "etcd://user:secret@n1:2379"]
)
def test_other_forms_are_refused(uri: str) -> None:
    with pytest.raises(UsageError):
        parse(uri)

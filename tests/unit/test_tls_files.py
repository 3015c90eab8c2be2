"""cloudfs/tls.py: certificate files checked at start with one-line errors, the flags that
go together, and the mount's TLS spellings (flags, ``-o``, the environment)."""

from __future__ import annotations

import argparse
from pathlib import Path

import pytest

from cloudfs.cli.mount import add_parser, config_from_args
from cloudfs.errors import UsageError
from cloudfs.tls import load_client_tls, load_server_tls
from cloudfs.tokens import token_source
from testkit.certs import Certs


def test_good_files_load(certs: Certs) -> None:
    server = load_server_tls(str(certs.server_cert), str(certs.server_key), str(certs.ca))
    assert server is not None and server.client_ca is not None
    client = load_client_tls(str(certs.ca), str(certs.client_cert), str(certs.client_key))
    assert client is not None and client.cert is not None
    assert load_server_tls(None, None) is None
    assert load_client_tls(None) is None


def test_bad_files_are_named(certs: Certs, tmp_path: Path) -> None:
    not_pem = tmp_path / "not.pem"
    not_pem.write_text("hello")
    cases = [
        (lambda: load_server_tls(str(tmp_path / "gone.pem"), str(certs.server_key)), "gone.pem"),
        (lambda: load_server_tls(str(not_pem), str(certs.server_key)), "not a PEM"),
        (lambda: load_server_tls(str(certs.server_cert), str(certs.client_key)), "does not match"),
        (lambda: load_client_tls(str(tmp_path / "no-ca.pem")), "no-ca.pem"),
        (lambda: load_client_tls(str(certs.ca), str(certs.client_cert)), "go together"),
        (lambda: load_client_tls(None, str(certs.client_cert), str(certs.client_key)), "CA"),
        (lambda: load_server_tls(str(certs.server_cert), None), "go together"),
        (lambda: load_server_tls(None, None, str(certs.ca)), "--tls-client-ca"),
    ]
    for load, said in cases:
        with pytest.raises(UsageError, match=said) as caught:
            load()
        assert "\n" not in str(caught.value)


def mount_config(*extra: str):  # type: ignore[no-untyped-def]
    parser = argparse.ArgumentParser()
    add_parser(parser.add_subparsers())
    args = parser.parse_args(["mount", "grpc://127.0.0.1:1/vol", "/tmp/x", *extra])
    return config_from_args(args)


def test_the_mount_takes_tls_as_flags_options_or_environment(
    certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLOUDFS_TLS_CA", raising=False)
    assert mount_config().tls is None
    flags = mount_config("--tls-ca", str(certs.ca))
    assert flags.tls is not None and flags.tls.ca_file == str(certs.ca)
    o = mount_config(
        "-o", f"tls_ca={certs.ca},tls_cert={certs.client_cert},tls_key={certs.client_key}"
    )
    assert o.tls is not None and o.tls.cert_file == str(certs.client_cert)
    monkeypatch.setenv("CLOUDFS_TLS_CA", str(certs.ca))
    env = mount_config()
    assert env.tls is not None and env.tls.ca_file == str(certs.ca)


def test_a_serving_mount_serves_tls_where_its_group_speaks_it(
    certs: Certs, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CLOUDFS_TLS_CA", raising=False)
    serve = ("--cache-peers", "127.0.0.1:7081", "--cache-group-serve", "127.0.0.1:7082")
    cert = ("--cache-group-serve-cert", str(certs.server_cert))
    key = ("--cache-group-serve-key", str(certs.server_key))
    assert mount_config(*serve).group_serve_tls is None  # a plaintext group, as before
    with pytest.raises(UsageError, match="--cache-group-serve-cert"):
        mount_config(*serve, "--tls-ca", str(certs.ca))
    served = mount_config(*serve, "--tls-ca", str(certs.ca), *cert, *key)
    assert served.group_serve_tls is not None
    assert served.group_serve_tls.cert_file == str(certs.server_cert)
    with pytest.raises(UsageError, match="go together"):
        mount_config(*serve, *cert)
    with pytest.raises(UsageError, match="goes with --cache-group-serve"):
        mount_config(*cert, *key)


def test_the_mount_takes_the_tree_clients_spelling_too(certs: Certs, tmp_path: Path) -> None:
    token = tmp_path / "token"
    token.write_text("secret")
    config = mount_config(
        "--meta-token-file", str(token), "--meta-tls-ca", str(certs.ca),
        "--meta-tls-cert", str(certs.client_cert), "--meta-tls-key", str(certs.client_key),
    )  # fmt: skip
    assert config.tls is not None and config.tls.cert_file == str(certs.client_cert)
    source = token_source(config.tree_token)
    assert source is not None and source.current() == "secret"


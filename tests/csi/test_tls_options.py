"""TLS material of a volume's mount: from the node-stage secret (0600 files) or the node
plugin's files, reaching ``cloudfs mount`` as ``--tls-ca/--tls-cert/--tls-key`` paths."""

from __future__ import annotations

from pathlib import Path

import pytest

from cloudfs_csi.cache_group import check_serve_tls
from cloudfs_csi.errors import InvalidArgument
from cloudfs_csi.fuse_process import FuseLauncher, FuseSpec, RunResult
from cloudfs_csi.main import parse_args
from cloudfs_csi.mounts import MountTable
from cloudfs_csi.recovery import Repairer
from cloudfs_csi.state import StagedVolume, StateStore
from cloudfs_csi.tls import TlsFiles, from_secrets
from cloudfs_csi.validation import mount_options
from cloudfs_csi.volumes import split_secrets

CA = "-----BEGIN CERTIFICATE-----\nMIIBcaCAcaCAcaCAcaCA\n-----END CERTIFICATE-----\n"
CERT = "-----BEGIN CERTIFICATE-----\nMIIBclientCERTclientCERT\n-----END CERTIFICATE-----\n"
KEY = "-----BEGIN PRIVATE KEY-----\nMIIEprivateKEYprivateKEYprivateKEY\n-----END PRIVATE KEY-----\n"
NODE = TlsFiles(ca="/etc/cloudfs/ca/ca.crt", cert="/etc/cloudfs/client/tls.crt",
                key="/etc/cloudfs/client/tls.key")  # fmt: skip


class Recorder:
    def __init__(self) -> None:
        self.calls: list[tuple[list[str], dict[str, str]]] = []

    def run(self, args: list[str], env: dict[str, str], timeout: float) -> RunResult:
        self.calls.append((args, env))
        return RunResult(0, "")


def _volume(tmp_path: Path) -> StagedVolume:
    return StagedVolume(
        volume_id="v", staging_path=str(tmp_path / "s"), uri="grpc://meta:7070/v",
        access_mode=5, read_only=False, mount_flags=[], options=[], context={},
        cache_dir=str(tmp_path / "c"), has_token=True,
    )  # fmt: skip


def test_secret_keys() -> None:
    assert from_secrets({"ca.crt": CA}) == {"ca": CA}
    assert from_secrets({"tlsCa": CA, "tlsCert": CERT, "tlsKey": KEY}) == {
        "ca": CA, "cert": CERT, "key": KEY,
    }  # fmt: skip
    assert from_secrets({"tls.crt": CERT, "tls.key": KEY}) == {"cert": CERT, "key": KEY}
    assert from_secrets({"token": "t"}) == {}
    for half in ({"tls.crt": CERT}, {"tls.key": KEY}, {"ca.crt": CA, "tlsKey": KEY}):
        with pytest.raises(InvalidArgument) as exc:
            from_secrets(half)
        assert "PRIVATE" not in str(exc.value) and "MIIB" not in str(exc.value)


def test_tls_material_is_not_environment(caplog: pytest.LogCaptureFixture) -> None:
    env, token = split_secrets({"token": "t", "ca.crt": CA, "tls.crt": CERT, "tls.key": KEY,
                                "AWS_ACCESS_KEY_ID": "a"})  # fmt: skip
    assert env == {"AWS_ACCESS_KEY_ID": "a"} and token == "t"
    assert "ignoring" not in caplog.text


def test_the_driver_owns_the_tls_mount_options() -> None:
    for option in ("tls_ca=/x", "tls_cert=/x", "tls_key=/x"):
        with pytest.raises(InvalidArgument, match=option.partition("=")[0]):
            mount_options([option])


def test_files_args_and_precedence() -> None:
    assert TlsFiles().args() == []
    assert NODE.args() == ["--tls-ca", NODE.ca, "--tls-cert", NODE.cert, "--tls-key", NODE.key]
    with pytest.raises(ValueError):
        TlsFiles(cert="/c")
    mine = TlsFiles(ca="/s/ca")
    assert mine.over(NODE) == TlsFiles(ca="/s/ca", cert=NODE.cert, key=NODE.key)
    pair = TlsFiles(cert="/s/crt", key="/s/key")
    assert pair.over(NODE) == TlsFiles(ca=NODE.ca, cert="/s/crt", key="/s/key")
    assert TlsFiles().over(TlsFiles(ca="/n")) == TlsFiles(ca="/n")


def test_secret_material_is_written_0600_and_reaches_the_mount_as_paths(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    store.save_secrets("v", {"AWS_SECRET_ACCESS_KEY": "k"}, "tok", None,
                       from_secrets({"ca.crt": CA, "tls.crt": CERT, "tls.key": KEY}))  # fmt: skip
    files = store.tls_files("v")
    assert files.ca and files.cert and files.key
    for path, pem in ((files.ca, CA), (files.cert, CERT), (files.key, KEY)):
        assert Path(path).read_text() == pem and Path(path).stat().st_mode & 0o777 == 0o600
    runner = Recorder()
    repairer = Repairer(MountTable(str(tmp_path / "mountinfo")), FuseLauncher(runner), store,
                        tls=TlsFiles(ca="/node/ca.crt"))  # fmt: skip
    spec = repairer.fuse_spec(_volume(tmp_path))
    assert spec.tls == files  # the secret's CA wins over the node's
    FuseLauncher(runner).start(spec)
    ((args, env),) = runner.calls
    assert args[args.index("--tls-ca") + 1] == files.ca
    assert args[args.index("--tls-cert") + 1] == files.cert
    assert args[args.index("--tls-key") + 1] == files.key
    assert not any(pem in " ".join(args) or pem in env.values() for pem in (CA, CERT, KEY))
    store.save_secrets("v", {}, "tok")  # staged again without TLS material
    assert store.tls_files("v") == TlsFiles()
    assert repairer.fuse_spec(_volume(tmp_path)).tls == TlsFiles(ca="/node/ca.crt")
    store.save_secrets("v", {}, "tok", None, {"ca": CA})
    store.delete("v")
    assert not list((tmp_path / "state" / "secrets").iterdir())


def test_node_files_without_a_secret(tmp_path: Path) -> None:
    store = StateStore(str(tmp_path / "state"))
    repairer = Repairer(MountTable(str(tmp_path / "mountinfo")), FuseLauncher(Recorder()), store,
                        tls=NODE)  # fmt: skip
    assert repairer.fuse_spec(_volume(tmp_path)).tls == NODE
    assert FuseSpec(uri="s3://b", mount_point="/m", cache_dir="/c").tls.args() == []


def test_node_plugin_flags() -> None:
    args = parse_args(["--mode", "node", "--endpoint", "unix:///x.sock",
                       "--tls-ca-file", "/etc/cloudfs/ca/ca.crt"])  # fmt: skip
    assert args.tls_ca_file == "/etc/cloudfs/ca/ca.crt" and args.tls_cert_file is None
    with pytest.raises(SystemExit):
        parse_args(["--mode", "node", "--endpoint", "unix:///x.sock", "--tls-cert-file", "/c"])


def test_a_serving_mount_with_a_ca_needs_its_serving_certificate() -> None:
    serve = mount_options(["cache_group=training", "cache_group_serve=10.0.0.5:7090"])
    with pytest.raises(InvalidArgument) as exc:
        check_serve_tls("v", serve, has_ca=True)
    assert "cache_group_serve_cert" in str(exc.value) and "TLS" in str(exc.value)
    check_serve_tls("v", serve, has_ca=False)  # plaintext group: nothing to serve TLS with
    with_cert = mount_options([*serve, "cache_group_serve_cert=/etc/cloudfs/serve/tls.crt",
                               "cache_group_serve_key=/etc/cloudfs/serve/tls.key"])  # fmt: skip
    check_serve_tls("v", with_cert, has_ca=True)
    check_serve_tls("v", mount_options(["cache_group=training"]), has_ca=True)

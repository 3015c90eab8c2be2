"""A pod through the real webhook, and its injected sidecar run as a process, as kubelet would.

``inject`` sends an AdmissionReview of a pod with one CloudFS PVC through
``cloudfs.sidecar.review.Webhook`` (an in-memory API server holds the PVC, its
PV of ``csi.cloudfs.io`` and the Secret), applies the JSONPatch it answers and
returns the patched pod with its sidecar.

``running_sidecar`` then plays kubelet for that sidecar, with no cluster:

* each of its volume mounts is a host directory: an ``emptyDir`` is
  ``BASE/volumes/NAME`` (``/SUBPATH``), a Secret volume a directory of the
  Secret's files;
* a ``Bidirectional`` mount's directory is made a shared mount (``mount --bind
  D D; mount --make-shared D``), and the container's command runs in a mount
  namespace of its own (``unshare --mount --propagation unchanged``): the FUSE
  mount it makes there reaches the test's namespace through the shared peer
  group, as a Bidirectional mount reaches the node and the app containers;
* its command is the container's, with ``cloudfs`` this interpreter's
  ``-m cloudfs.cli.main`` and every container path its host directory; its
  environment is the container's ``env`` with each ``secretKeyRef`` read from
  the Secret (nothing of the test's own ``AWS_*``);
* it is started when the container's startup probe, run the same way, passes.

On the way out the process is killed if it still runs and whatever is still
mounted on its directories is lazily unmounted, the shared bind mount last.
"""

from __future__ import annotations

import base64
import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections.abc import Iterator
from contextlib import ExitStack, contextmanager, suppress
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import jsonpatch  # type: ignore[import-untyped]

from cloudfs import mountinfo
from cloudfs.k8s import csi_names
from cloudfs.sidecar.review import NativeSidecars, Webhook
from cloudfs.sidecar.settings import INJECT, WebhookConfig
from testkit.kube_api import MemoryKubeApi

REPO = Path(__file__).resolve().parents[2]
CLI = [sys.executable, "-m", "cloudfs.cli.main"]
OWN_NAMESPACE = [sys.executable, "-m", "tests.sidecar.own_namespace"]
NAMESPACE = "team"
VOLUME = "data"  # the pod volume: its sidecar is cloudfs-data, its mount /cloudfs/mnt/data
CLAIM = "train-data"
PV = "pv-train-data"
SECRET = "s3-credentials"
STARTUP_DEADLINE = 60.0  # seconds for the startup probe to pass (a loaded machine)


@dataclass
class Injected:
    """The pod as the API server would store it, and what kubelet needs to run its sidecar."""

    pod: dict[str, Any]
    sidecar: dict[str, Any]  # the injected init container (a native sidecar)
    secret: dict[str, str]  # the Secret's values, decoded: what kubelet resolves env from

    @property
    def command(self) -> list[str]:
        return list(self.sidecar["command"])


def inject(
    volume_handle: str,
    mount_options: list[str],
    secret: dict[str, str],
    *,
    access_modes: tuple[str, ...] = ("ReadWriteMany",),
    annotations: dict[str, str] | None = None,
) -> Injected:
    """The pod ``trainer`` (one app container mounting the PVC at /data) through the webhook."""
    encoded = {k: base64.b64encode(v.encode()).decode() for k, v in secret.items()}
    api = MemoryKubeApi({
        f"/api/v1/namespaces/{NAMESPACE}/persistentvolumeclaims/{CLAIM}": {
            "metadata": {"name": CLAIM, "namespace": NAMESPACE},
            "spec": {"accessModes": list(access_modes), "volumeName": PV,
                     "storageClassName": ""},
        },
        f"/api/v1/persistentvolumes/{PV}": {
            "metadata": {"name": PV},
            "spec": {
                "accessModes": list(access_modes),
                "mountOptions": mount_options,
                "csi": {
                    "driver": csi_names.DRIVER_NAME,
                    "volumeHandle": volume_handle,
                    "nodeStageSecretRef": {"name": SECRET, "namespace": NAMESPACE},
                },
            },
        },
        f"/api/v1/namespaces/{NAMESPACE}/secrets/{SECRET}": {
            "metadata": {"name": SECRET, "namespace": NAMESPACE},
            "type": "Opaque",
            "data": encoded,
        },
    })  # fmt: skip
    pod: dict[str, Any] = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": "trainer",
            "namespace": NAMESPACE,
            "labels": {INJECT: "true"},
            "annotations": dict(annotations or {}),
        },
        "spec": {
            "containers": [{
                "name": "train", "image": "trainer:1",
                "volumeMounts": [{"name": VOLUME, "mountPath": "/data"}],
            }],
            "volumes": [{"name": VOLUME, "persistentVolumeClaim": {"claimName": CLAIM}}],
        },
    }  # fmt: skip
    webhook = Webhook(
        WebhookConfig(image="x", native_sidecars="yes"), api, NativeSidecars("yes", api)
    )
    review = {
        "apiVersion": "admission.k8s.io/v1",
        "kind": "AdmissionReview",
        "request": {
            "uid": str(uuid.uuid4()),
            "kind": {"group": "", "version": "v1", "kind": "Pod"},
            "resource": {"group": "", "version": "v1", "resource": "pods"},
            "operation": "CREATE",
            "namespace": NAMESPACE,
            "object": pod,
        },
    }
    answer = webhook.review(json.loads(json.dumps(review)))  # as it comes off the wire
    response = answer["response"]
    assert response["uid"] == review["request"]["uid"]
    assert response["allowed"], response.get("status")
    assert response["patchType"] == "JSONPatch"
    ops = json.loads(base64.b64decode(response["patch"]))
    patched: dict[str, Any] = jsonpatch.apply_patch(pod, ops)
    assert not api.created, api.created  # no Warning event: the pod was injected
    sidecars = [c for c in patched["spec"]["initContainers"] if c["name"] == f"cloudfs-{VOLUME}"]
    assert len(sidecars) == 1, patched["spec"]["initContainers"]
    return Injected(patched, sidecars[0], dict(secret))


@dataclass
class Sidecar:
    """The sidecar container's command, running."""

    proc: subprocess.Popen[bytes]
    mountpoint: Path  # the host side of its Bidirectional mount: what the app sees
    argv: list[str]  # as run (host paths)
    log_path: Path  # its stderr (a foreground mount logs there)
    exit_code: int | None = None
    exited_after: float | None = None  # seconds from SIGTERM to exit
    shared: list[Path] = field(default_factory=list)

    def log(self) -> str:
        return self.log_path.read_text(errors="replace")

    def terminate(self, timeout: float) -> int:
        """SIGTERM, as kubelet stops a sidecar after the app containers; its exit code."""
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        try:
            self.exit_code = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            raise AssertionError(
                f"the sidecar did not exit within {timeout:g} s of SIGTERM:\n{self.log()}"
            ) from None
        self.exited_after = time.monotonic() - started
        return self.exit_code


def is_fuse(mount: mountinfo.Mount) -> bool:
    return mount.fs_type in ("fuse", "fuseblk") or mount.fs_type.startswith("fuse.")


def topmost(path: Path) -> mountinfo.Mount | None:
    return mountinfo.topmost(mountinfo.read(), os.path.realpath(path))


def in_own_namespace(
    propagation: str, command: list[str], keep: tuple[Path, ...] = ()
) -> list[str]:
    """``command`` in a new mount namespace (see ``own_namespace.py``)."""
    kept = [a for path in keep for a in ("--keep", str(path))]
    return ["unshare", "--mount", "--propagation", propagation, "--",
            *OWN_NAMESPACE, *kept, "--", *command]  # fmt: skip


def base_env() -> dict[str, str]:
    """The container's environment before its ``env``: this interpreter's, none of the
    test's AWS settings (the sidecar must find its credentials and endpoint in the pod)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("AWS_")}
    env["AWS_CONFIG_FILE"] = env["AWS_SHARED_CREDENTIALS_FILE"] = "/nonexistent/cloudfs-test"
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(REPO), env.get("PYTHONPATH")]))
    return env


def resolve_env(container: dict[str, Any], secret: dict[str, str]) -> dict[str, str]:
    env = base_env()
    for entry in container.get("env") or []:
        if "value" in entry:
            env[entry["name"]] = entry["value"]
            continue
        ref = entry["valueFrom"]["secretKeyRef"]
        assert ref["name"] == SECRET, entry
        env[entry["name"]] = secret[ref["key"]]
    return env


def _host_dirs(injected: Injected, base: Path) -> dict[str, Path]:
    """Container path -> host directory, for each of the sidecar's volume mounts."""
    volumes = {v["name"]: v for v in injected.pod["spec"]["volumes"]}
    dirs: dict[str, Path] = {}
    for mount in injected.sidecar["volumeMounts"]:
        volume = volumes[mount["name"]]
        host = base / "volumes" / mount["name"]
        if "secret" in volume:
            assert volume["secret"]["secretName"] == SECRET, volume
            host.mkdir(parents=True, exist_ok=True)
            for key, value in injected.secret.items():
                (host / key).write_text(value)
                (host / key).chmod(volume["secret"].get("defaultMode", 0o644))
        else:
            assert "emptyDir" in volume, volume  # every volume the sidecar mounts is one
            host = host / mount.get("subPath", "")
            host.mkdir(parents=True, exist_ok=True)
        dirs[mount["mountPath"]] = host
    return dirs


def _mapped(argv: list[str], dirs: dict[str, Path]) -> list[str]:
    """``argv`` with every container path its host directory, and ``cloudfs`` ours."""
    assert argv[0] == "cloudfs", argv
    out = list(CLI)
    for arg in argv[1:]:
        for inside in sorted(dirs, key=len, reverse=True):
            if arg == inside or arg.startswith(inside + "/"):
                arg = str(dirs[inside]) + arg[len(inside) :]
                break
        else:
            assert not arg.startswith("/cloudfs/"), f"{arg}: a container path no mount gives"
        out.append(arg)
    return out


def _make_shared(path: Path) -> None:
    subprocess.run(["mount", "--bind", str(path), str(path)], check=True, timeout=10)
    subprocess.run(["mount", "--make-shared", str(path)], check=True, timeout=10)


def unmount_all(path: Path) -> None:
    """Lazily unmount everything at ``path`` (FUSE with fusermount3, the rest with umount)."""
    for _ in range(8):
        top = topmost(path)
        if top is None:
            return
        tool = ["fusermount3", "-u", "-z"] if is_fuse(top) else ["umount", "-l"]
        with suppress(OSError, subprocess.SubprocessError):
            subprocess.run([*tool, str(path)], capture_output=True, timeout=30)


def _wait_for_probe(sidecar: Sidecar, probe: list[str], env: dict[str, str]) -> None:
    deadline = time.monotonic() + STARTUP_DEADLINE
    why = ""
    while True:
        if sidecar.proc.poll() is not None:
            raise AssertionError(
                f"the sidecar exited ({sidecar.proc.returncode}) before its startup probe "
                f"passed: {sidecar.argv}\n{sidecar.log()}"
            )
        done = subprocess.run(probe, env=env, cwd=REPO, capture_output=True, text=True, timeout=30)
        if done.returncode == 0:
            return
        why = done.stderr.strip()
        if time.monotonic() > deadline:
            raise AssertionError(
                f"the startup probe did not pass within {STARTUP_DEADLINE:g} s ({why})\n"
                f"{sidecar.log()}"
            )
        time.sleep(0.2)


@contextmanager
def running_sidecar(injected: Injected, base: Path, name: str = "sidecar") -> Iterator[Sidecar]:
    """The sidecar container of ``injected`` as a process, once its startup probe passed;
    its volumes under ``base`` (another run over the same ``base`` finds what the last
    left there, as a restarted container does), its log in ``base/NAME.log``."""
    dirs = _host_dirs(injected, base)
    bidirectional = [
        dirs[m["mountPath"]]
        for m in injected.sidecar["volumeMounts"]
        if m.get("mountPropagation") == "Bidirectional"
    ]
    assert len(bidirectional) == 1, injected.sidecar["volumeMounts"]
    argv = _mapped(injected.command, dirs)
    probe = _mapped(injected.sidecar["startupProbe"]["exec"]["command"], dirs)
    env = resolve_env(injected.sidecar, injected.secret)
    log_path = base / f"{name}.log"
    with ExitStack() as stack:
        for path in bidirectional:
            stack.callback(unmount_all, path)  # last: the bind mount under it too
            _make_shared(path)
        with open(log_path, "wb") as log:
            proc = subprocess.Popen(
                in_own_namespace("unchanged", argv),
                env=env, cwd=REPO, stdin=subprocess.DEVNULL, stdout=log, stderr=log,
                start_new_session=True,
            )  # fmt: skip
        stack.callback(_kill, proc)
        sidecar = Sidecar(proc, bidirectional[0], argv, log_path, shared=bidirectional)
        _wait_for_probe(sidecar, probe, env)
        yield sidecar


def _kill(proc: subprocess.Popen[bytes]) -> None:
    if proc.poll() is None:
        with suppress(ProcessLookupError):
            os.killpg(proc.pid, signal.SIGKILL)
        proc.wait(timeout=30)


def require_namespaces() -> str | None:
    """Why this machine cannot run a sidecar in a mount namespace of its own (None: it can)."""
    if os.geteuid() != 0:
        return "needs root (mount namespaces, bind mounts, FUSE)"
    if not os.path.exists("/dev/fuse"):
        return "needs /dev/fuse"
    for tool in ("unshare", "fusermount3", "mount", "umount"):
        if shutil.which(tool) is None:
            return f"needs {tool} on PATH"
    tried = subprocess.run(["unshare", "--mount", "true"], capture_output=True, text=True)
    if tried.returncode != 0:
        return f"cannot make a mount namespace: {tried.stderr.strip()}"
    return None

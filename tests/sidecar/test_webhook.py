"""The webhook's decisions on recorded AdmissionReviews, over an in-memory API server:
the patched pod is valid and works as a pod (sidecar first, mounts propagated, secrets as
files), its command lines parse, and every refusal says why in one line."""

from __future__ import annotations

from typing import Any

import jsonpatch
import pytest

from cloudfs.k8s.kube_api import KubeApiError
from cloudfs.sidecar.review import BadReview, NativeSidecars, Webhook
from cloudfs.sidecar.settings import INJECTED, STATUS, WebhookConfig
from testkit.kube_api import MemoryKubeApi
from tests.sidecar.cluster import NS, objects, patch_of, training_review, with_pod
from tests.sidecar.pod_checks import parse_command, sidecars, validate_pod

IMAGE = "ghcr.io/cloudfs/cloudfs-csi:0.1.0"


def webhook(api: MemoryKubeApi | None = None, **config: Any) -> tuple[Webhook, MemoryKubeApi]:
    api = api or MemoryKubeApi(objects())
    settings = WebhookConfig(image=IMAGE, **config)
    return Webhook(settings, api, NativeSidecars(settings.native_sidecars, api)), api


def patched(review: dict[str, Any], hook: Webhook | None = None) -> dict[str, Any]:
    answer = (hook or webhook()[0]).review(review)
    assert answer["response"]["allowed"] is True, answer["response"].get("status")
    assert answer["response"]["uid"] == review["request"]["uid"]
    pod: dict[str, Any] = jsonpatch.apply_patch(review["request"]["object"], patch_of(answer))
    return pod


def refusal(review: dict[str, Any], hook: Webhook | None = None) -> str:
    answer = (hook or webhook()[0]).review(review)["response"]
    assert answer["allowed"] is False and "patch" not in answer
    assert answer["status"]["code"] in (400, 500)
    message: str = answer["status"]["message"]
    assert message.startswith("cloudfs sidecar: ") and "\n" not in message
    return message


def test_a_training_pod_gets_one_sidecar_per_volume_before_its_containers() -> None:
    pod = patched(training_review())
    validate_pod(pod)
    spec = pod["spec"]
    names = [c["name"] for c in spec["initContainers"]]
    assert names == ["cloudfs-imagenet", "cloudfs-ckpt"]
    volumes = {v["name"]: v for v in spec["volumes"]}
    assert volumes["imagenet"] == {"name": "imagenet", "emptyDir": {}}  # no CSI volume left
    assert volumes["ckpt"] == {"name": "ckpt", "emptyDir": {}}
    assert volumes["shm"]["emptyDir"]["medium"] == "Memory"  # others untouched
    mounts = {m["name"]: m for m in spec["containers"][0]["volumeMounts"]}
    assert mounts["imagenet"]["mountPropagation"] == "HostToContainer"
    assert mounts["imagenet"]["readOnly"] is True and mounts["imagenet"]["mountPath"] == (
        "/data/imagenet"
    )
    assert mounts["ckpt"]["mountPropagation"] == "HostToContainer"
    assert "mountPropagation" not in mounts["shm"]
    assert pod["metadata"]["annotations"][INJECTED] == (
        "imagenet=pvc imagenet (pv imagenet-pv), ckpt=pvc ckpt (pv pvc-77)"
    )


def test_each_sidecar_mounts_its_volume_with_bidirectional_propagation_and_a_probe() -> None:
    pod = patched(training_review())
    for sidecar in sidecars(pod):
        volume = sidecar["name"].removeprefix("cloudfs-")
        mount = {m["name"]: m for m in sidecar["volumeMounts"]}[volume]
        assert mount == {"name": volume, "mountPath": f"/cloudfs/mnt/{volume}",
                         "mountPropagation": "Bidirectional"}  # fmt: skip
        assert sidecar["securityContext"]["privileged"] is True
        assert sidecar["image"] == IMAGE
        probe = sidecar["startupProbe"]
        assert probe["exec"]["command"] == ["cloudfs", "sidecar", "probe", mount["mountPath"]]
        args = parse_command(probe["exec"]["command"])
        assert args.paths == [mount["mountPath"]]
        assert probe["failureThreshold"] * probe["periodSeconds"] >= 120


def test_the_command_lines_parse_and_say_what_the_volumes_say() -> None:
    pod = patched(training_review())
    imagenet, ckpt = (parse_command(c["command"]) for c in sidecars(pod))
    assert imagenet.ufs_uri == "s3://datasets/imagenet"
    assert imagenet.mountpoint == "/cloudfs/mnt/imagenet"
    assert imagenet.foreground and imagenet.allow_other and imagenet.read_only
    assert imagenet.dataset_mode == "on"
    assert imagenet.cache_dir == "/cloudfs/cache/imagenet"
    assert imagenet.cache_size == str(20 << 30)  # the pod's annotation
    assert ckpt.ufs_uri == "grpc://cloudfs-meta.cloudfs.svc:7070/pvc-77"
    assert not ckpt.read_only and ckpt.write_mode == "back"
    assert ckpt.cache_group == "training"
    assert ckpt.drain_timeout == "600"
    assert ckpt.staging_size == str(20 << 30)  # bounded: writers wait, the pod is not evicted
    assert ckpt.token_file == "/cloudfs/secrets/ckpt/token"
    assert ckpt.tls_ca == "/cloudfs/secrets/ckpt/ca.crt"
    assert ckpt.memory_cache_size == "1G"


def test_secrets_reach_the_sidecar_as_files_and_references_never_as_values() -> None:
    pod = patched(training_review())
    volumes = {v["name"]: v for v in pod["spec"]["volumes"]}
    for sidecar in sidecars(pod):
        volume = sidecar["name"].removeprefix("cloudfs-")
        secret = volumes[f"cloudfs-secret-{volume}"]["secret"]
        assert secret == {"secretName": "cloudfs-volume", "defaultMode": 0o400}
        env = {e["name"]: e for e in sidecar["env"]}
        assert set(env) == {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"}
        for name, entry in env.items():
            assert entry["valueFrom"]["secretKeyRef"] == {"name": "cloudfs-volume", "key": name}
        text = str(sidecar)
        assert "secret-token" not in text and "secret-AWS" not in text  # the values


def test_the_cache_is_one_emptydir_sized_for_caches_and_staging() -> None:
    pod = patched(training_review())
    cache = {v["name"]: v for v in pod["spec"]["volumes"]}["cloudfs-cache"]
    # 20 GiB per volume, 20 GiB of write-back staging for ckpt, 512 MiB margin each
    assert cache["emptyDir"]["sizeLimit"] == f"{(60 << 10) + 1024}Mi"
    for sidecar in sidecars(pod):
        volume = sidecar["name"].removeprefix("cloudfs-")
        mount = {m["name"]: m for m in sidecar["volumeMounts"]}["cloudfs-cache"]
        assert mount["subPath"] == volume


def test_a_write_back_pod_gets_a_grace_period_that_covers_the_drain() -> None:
    pod = patched(training_review())
    assert pod["spec"]["terminationGracePeriodSeconds"] == 630
    review = with_pod(training_review(), annotations={"cloudfs.io/drain-timeout": "120"})
    assert patched(review)["spec"]["terminationGracePeriodSeconds"] == 150
    read_only = with_pod(training_review(), annotations={"cloudfs.io/inject-volumes": "imagenet"})
    assert patched(read_only)["spec"]["terminationGracePeriodSeconds"] == 30


def test_a_pod_patched_twice_gets_one_set_of_sidecars() -> None:
    review = training_review()
    once = patched(review)
    review["request"]["object"] = once
    answer = webhook()[0].review(review)
    assert answer["response"]["allowed"] is True and "patch" not in answer["response"]


def test_pods_that_did_not_ask_are_left_alone() -> None:
    hook, api = webhook()
    review = training_review()
    del review["request"]["object"]["metadata"]["labels"]["cloudfs.io/inject"]
    answer = hook.review(review)["response"]
    assert answer == {"uid": review["request"]["uid"], "allowed": True}
    review = with_pod(training_review(), labels={"cloudfs.io/inject": "false"})
    assert "patch" not in hook.review(review)["response"]
    update = training_review()
    update["request"]["operation"] = "UPDATE"
    assert "patch" not in hook.review(update)["response"]
    assert api.created == []


def test_the_annotation_asks_too() -> None:
    review = training_review()
    del review["request"]["object"]["metadata"]["labels"]["cloudfs.io/inject"]
    review = with_pod(review, annotations={"cloudfs.io/inject": "true"})
    assert len(sidecars(patched(review))) == 2


def test_inject_volumes_chooses_and_an_unknown_volume_is_refused() -> None:
    review = with_pod(training_review(), annotations={"cloudfs.io/inject-volumes": "ckpt"})
    pod = patched(review)
    assert [c["name"] for c in sidecars(pod)] == ["cloudfs-ckpt"]
    assert {v["name"]: v for v in pod["spec"]["volumes"]}["imagenet"]["persistentVolumeClaim"]
    named = "cloudfs.io/inject-volumes"
    message = refusal(with_pod(training_review(), annotations={named: "data"}))
    assert "cloudfs.io/inject-volumes names data: no volume of the pod" in message
    message = refusal(with_pod(training_review(), annotations={named: "shm"}))
    assert "volume shm: neither a PVC nor an inline csi.cloudfs.io volume" in message


def test_a_claim_of_another_driver_is_skipped_unless_named() -> None:
    volumes = training_review()["request"]["object"]["spec"]["volumes"]
    volumes.append({"name": "scratch", "persistentVolumeClaim": {"claimName": "scratch"}})
    pod = patched(with_pod(training_review(), volumes=volumes))
    assert len(sidecars(pod)) == 2
    named = with_pod(training_review(), volumes=volumes,
                     annotations={"cloudfs.io/inject-volumes": "scratch"})  # fmt: skip
    assert "PV ebs-1 is not a csi.cloudfs.io volume" in refusal(named)


def test_refusals_say_why() -> None:
    base = training_review()["request"]["object"]["spec"]["volumes"]

    def with_claim(claim: str) -> dict[str, Any]:
        volumes = [*base, {"name": "extra", "persistentVolumeClaim": {"claimName": claim}}]
        return with_pod(training_review(), volumes=volumes,
                        annotations={"cloudfs.io/inject-volumes": "extra"})  # fmt: skip

    assert "PVC team-a/missing does not exist" in refusal(with_claim("missing"))
    message = refusal(with_claim("pending"))
    assert "PVC pending is not bound yet" in message and "Immediate" in message
    nothing = with_pod(training_review(), volumes=[{"name": "shm", "emptyDir": {}}])
    assert "has no CloudFS volume" in refusal(nothing)


def test_a_missing_secret_is_refused() -> None:
    cluster = objects()
    del cluster[f"/api/v1/namespaces/{NS}/secrets/cloudfs-volume"]
    message = refusal(training_review(), webhook(MemoryKubeApi(cluster))[0])
    assert "Secret team-a/cloudfs-volume does not exist" in message
    review = with_pod(training_review(), annotations={"cloudfs.io/secret": "nope"})
    assert "Secret team-a/nope does not exist" in refusal(review)


def test_a_secret_of_another_namespace_needs_one_in_the_pods() -> None:
    cluster = objects()
    pv = cluster["/api/v1/persistentvolumes/pvc-77"]
    pv["spec"]["csi"]["nodeStageSecretRef"] = {"name": "cloudfs-volume", "namespace": "cloudfs"}
    hook = webhook(MemoryKubeApi(cluster))[0]
    message = refusal(training_review(), hook)
    assert "Secret cloudfs/cloudfs-volume is in another namespace" in message
    assert "cloudfs.io/secret" in message
    review = with_pod(training_review(), annotations={"cloudfs.io/secret": "other-creds"})
    pod = patched(review, hook)
    ckpt = parse_command(sidecars(pod)[1]["command"])
    assert ckpt.cache_token_file == "/cloudfs/secrets/ckpt/cacheToken" and ckpt.token_file is None


def test_bad_annotations_and_options_are_refused_by_name() -> None:
    for notes, expected in (
        ({"cloudfs.io/cache-size": "lots"}, "annotation cloudfs.io/cache-size: invalid size"),
        ({"cloudfs.io/drain-timeout": "soon"}, "annotation cloudfs.io/drain-timeout"),
        ({"cloudfs.io/cache-medium": "Disk"}, "cloudfs.io/cache-medium"),
        ({"cloudfs.io/sidecar-memory": "1 GB"}, "cloudfs.io/sidecar-memory"),
        ({"cloudfs.io/cache-host-path": "/mnt/nvme"}, "no --cache-host-paths"),
    ):
        assert expected in refusal(with_pod(training_review(), annotations=notes)), notes
    cluster = objects()
    cluster["/api/v1/persistentvolumes/pvc-77"]["spec"]["mountOptions"] = ["cache_dir=/x"]
    message = refusal(training_review(), webhook(MemoryKubeApi(cluster))[0])
    assert "mount option 'cache_dir' is set by CloudFS itself" in message
    cluster["/api/v1/persistentvolumes/pvc-77"]["spec"]["mountOptions"] = ["staging_size=big"]
    message = refusal(training_review(), webhook(MemoryKubeApi(cluster))[0])
    assert "mount option staging_size: invalid size" in message


def test_a_node_directory_for_the_cache_where_the_webhook_allows_one() -> None:
    hook = webhook(cache_host_paths=("/mnt/nvme",))[0]
    review = with_pod(training_review(), annotations={"cloudfs.io/cache-host-path": "/mnt/nvme/a"})
    pod = patched(review, hook)
    validate_pod(pod)
    cache = {v["name"]: v for v in pod["spec"]["volumes"]}["cloudfs-cache"]
    assert cache["hostPath"] == {"path": "/mnt/nvme/a", "type": "DirectoryOrCreate"}
    outside = with_pod(training_review(), annotations={"cloudfs.io/cache-host-path": "/etc"})
    assert "not under an allowed one (/mnt/nvme)" in refusal(outside, hook)


def test_inline_csi_volumes_are_served_too() -> None:
    inline = {"name": "coco", "csi": {"driver": "csi.cloudfs.io", "readOnly": True,
              "volumeAttributes": {"uri": "s3://datasets/coco", "mountOptions": "cache_size=5G"},
              "nodePublishSecretRef": {"name": "cloudfs-volume"}}}  # fmt: skip
    review = with_pod(training_review(), volumes=[inline])
    review["request"]["object"]["spec"]["containers"][0]["volumeMounts"] = [
        {"name": "coco", "mountPath": "/data/coco"}
    ]
    del review["request"]["object"]["metadata"]["annotations"]["cloudfs.io/cache-size"]
    pod = patched(review)
    validate_pod(pod)
    args = parse_command(sidecars(pod)[0]["command"])
    assert args.ufs_uri == "s3://datasets/coco" and args.read_only
    assert args.cache_size == "5G"  # the volume's option folded over the default flag
    assert args.token_file == "/cloudfs/secrets/coco/token"


def test_a_cluster_without_native_sidecars_is_refused_or_admitted_with_an_event() -> None:
    old = MemoryKubeApi(objects(minor="28"))
    message = refusal(training_review(), webhook(old)[0])
    assert "Kubernetes 1.28" in message and "native sidecars" in message
    hook, api = webhook(old, on_error="admit")
    answer = hook.review(training_review())["response"]
    assert answer["allowed"] is True and answer["warnings"][0].startswith("cloudfs sidecar:")
    before = training_review()["request"]["object"]
    pod = jsonpatch.apply_patch(before, patch_of({"response": answer}))
    assert pod["metadata"]["annotations"][STATUS].startswith("not injected: this cluster")
    assert pod["spec"] == training_review()["request"]["object"]["spec"]  # no half patch
    [(path, event)] = api.created
    assert path == "/api/v1/namespaces/team-a/events"
    assert event["involvedObject"]["kind"] == "Job" and event["involvedObject"]["name"] == (
        "resnet-train"
    )
    assert event["type"] == "Warning" and event["reason"] == "CloudFSNotInjected"
    hook.review(with_pod(training_review(), dry_run=True))
    assert len(api.created) == 1  # a dry run has no side effects
    forced = webhook(old, native_sidecars="yes")[0]
    assert len(sidecars(patched(training_review(), forced))) == 2


def test_an_api_server_that_fails_is_an_internal_refusal() -> None:
    class Down(MemoryKubeApi):
        def get(self, path: str) -> dict[str, Any]:
            raise KubeApiError(f"GET {path}: timed out")

    answer = webhook(Down({}))[0].review(training_review())["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 500
    assert "cannot read the cluster's version" in answer["status"]["message"]


def test_malformed_reviews_are_bad_requests() -> None:
    hook = webhook()[0]
    for body in ([], {"kind": "AdmissionReview"}, {"apiVersion": "admission.k8s.io/v1beta1",
                 "kind": "AdmissionReview", "request": {"uid": "1"}},
                 {"apiVersion": "admission.k8s.io/v1", "kind": "AdmissionReview",
                  "request": {"object": {}}}):  # fmt: skip
        with pytest.raises(BadReview):
            hook.review(body)


def test_a_secret_the_webhook_may_not_read_says_so() -> None:
    class Narrow(MemoryKubeApi):
        def get(self, path: str) -> dict[str, Any]:
            if "/secrets/" in path:
                raise KubeApiError(f"GET {path}: HTTP 403", forbidden=True)
            return super().get(path)

    answer = webhook(Narrow(objects()))[0].review(training_review())["response"]
    assert answer["allowed"] is False and answer["status"]["code"] == 500
    assert "the webhook may not read it" in answer["status"]["message"]

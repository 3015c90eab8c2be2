"""Pure parts of the sidecar webhook: names as DNS labels, the pod's annotations, the opt-in."""

from __future__ import annotations

import pytest

from cloudfs.sidecar.containers import dns_name
from cloudfs.sidecar.errors import Refused
from cloudfs.sidecar.settings import WebhookConfig, asks_for_injection, pod_settings


def pod(**annotations: str) -> dict[str, object]:
    return {"metadata": {"annotations": annotations}}


def test_names_stay_dns_labels_and_apart() -> None:
    assert dns_name("cloudfs-", "data") == "cloudfs-data"
    long_a, long_b = "a" * 60 + "x", "a" * 60 + "y"
    name_a, name_b = dns_name("cloudfs-", long_a), dns_name("cloudfs-", long_b)
    assert len(name_a) == len(name_b) == 63 and name_a != name_b
    assert dns_name("cloudfs-", long_a) == name_a  # stable: the same pod, the same names


def test_the_opt_in_is_true_only() -> None:
    assert asks_for_injection({"metadata": {"labels": {"cloudfs.io/inject": "true"}}})
    assert asks_for_injection({"metadata": {"annotations": {"cloudfs.io/inject": "True"}}})
    assert not asks_for_injection({"metadata": {"labels": {"cloudfs.io/inject": "yes"}}})
    assert not asks_for_injection({"metadata": {}})


def test_annotations_are_read_and_checked() -> None:
    config = WebhookConfig(image="x", cache_host_paths=("/mnt/nvme",))
    settings = pod_settings(pod(**{
        "cloudfs.io/inject-volumes": " a, b ,", "cloudfs.io/cache-size": "2Gi",
        "cloudfs.io/drain-timeout": "90", "cloudfs.io/sidecar-cpu": "500m",
        "cloudfs.io/sidecar-memory": "2Gi", "cloudfs.io/cache-host-path": "/mnt/nvme/../nvme/c",
    }), config)  # fmt: skip
    assert settings.volumes == ("a", "b") and settings.cache_size == 2 << 30
    assert settings.drain_timeout == 90 and settings.cpu == "500m"
    assert settings.cache_host_path == "/mnt/nvme/c"
    host = "cloudfs.io/cache-host-path"
    for bad in (
        {"cloudfs.io/sidecar-cpu": "two"},
        {"cloudfs.io/sidecar-cpu": "-1"},
        {host: "/mnt/nvme2"},
        {host: "relative"},
        {host: "/mnt/nvme", "cloudfs.io/cache-medium": "Memory"},
    ):
        with pytest.raises(Refused):
            pod_settings(pod(**bad), config)

"""Job specs and the scheduler config: valid files parse, each bad field is named."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from cloudfs.jobs import config, spec
from cloudfs.jobs.fields import SpecError
from cloudfs.jobs.machine import Machine, count_gpus, detect, fill

GOOD = """
name: resnet
group: vision
user: alice
command: [python3, train.py]
framework: torchrun
workers: {count: 2, resources: {cpu: 4, memory: 16G, gpus: 1}}
volumes: [{uri: "file:///srv/data", mount: /mnt/data, options: [--read-only]}]
datasets: [/mnt/data/train]
readiness: {min_cached: 0.8}
retries: 2
priority: 10
env: {EPOCHS: 3}
"""


def test_a_full_spec_parses() -> None:
    s = spec.load(GOOD)
    assert (s.name, s.group, s.user, s.framework, s.workers) == (
        "resnet", "vision", "alice", "torchrun", 2,
    )  # fmt: skip
    assert s.resources == spec.Resources(4.0, 16 << 30, 1)
    assert s.volumes[0].options == ("--read-only",)
    assert (s.min_cached, s.retries, s.priority, s.env) == (0.8, 2, 10, (("EPOCHS", "3"),))
    assert spec.JobSpec.from_json(s.to_json()) == s


def test_defaults_and_a_shell_command() -> None:
    s = spec.load("name: a\ncommand: echo hi\nreadiness: now\n", default_user="bob")
    assert s.command == ("/bin/sh", "-c", "echo hi")
    assert (s.group, s.user, s.workers, s.min_cached, s.framework) == (
        "default", "bob", 1, 0.0, "command",
    )  # fmt: skip


@pytest.mark.parametrize(
    ("change", "message"),
    [
        ("workers: {resources: {gpus: -1}}", "workers.resources.gpus: must be a whole number ≥ 0"),
        ("workers: {resources: {gpus: 1.5}}", "workers.resources.gpus: must be a whole number"),
        ("workers: {count: 0}", "workers.count: must be a whole number ≥ 1"),
        ("workers: {resources: {memory: lots}}", "workers.resources.memory: must be a size"),
        ("workers: {resources: {disk: 1}}", "workers.resources.disk: unknown field"),
        ("framework: mpi", "framework: must be one of command, torchrun, horovod"),
        ("readiness: {min_cached: 80}", "readiness.min_cached: must be a fraction"),
        ("datasets: [/elsewhere]", "datasets[0]: /elsewhere is not under any of the job's"),
        ("volumes: [{mount: rel}]", "volumes[0].mount: must be an absolute path"),
        ("retries: many", "retries: must be a whole number ≥ 0"),
        ("priority: high", "priority: must be a whole number"),
        ("colour: red", "colour: unknown field"),
        ("name: Bad Name", "name: lower-case letters"),
    ],
)
def test_each_bad_field_is_named(change: str, message: str) -> None:
    base = "name: a\ncommand: [/bin/true]\nvolumes: [{mount: /mnt/d}]\n"
    with pytest.raises(SpecError) as e:
        spec.load(base + change + "\n")
    assert str(e.value).startswith(message)


def test_missing_command_and_bad_yaml() -> None:
    with pytest.raises(SpecError, match=r"^command: required"):
        spec.load("name: a\n")
    with pytest.raises(SpecError, match=r"^name: required"):
        spec.load("command: [/bin/true]\n")
    with pytest.raises(SpecError, match="not valid YAML at line"):
        spec.load("name: [a\n")
    with pytest.raises(SpecError, match="spec: must be a mapping"):
        spec.load("- a\n")


def test_config_parses_and_names_bad_fields() -> None:
    c = config.parse(
        {"groups": {"g": {"quota": {"gpus": 2, "memory": "1G"}, "borrow": True}},
         "users": {"alice": {"quota": {"jobs": 1}}}}
    )  # fmt: skip
    assert c.groups["g"].quota == config.Quota(gpus=2, memory=1 << 30)
    assert c.groups["g"].borrow
    assert c.users["alice"].jobs == 1
    assert config.parse(None).groups == {"default": config.Group()}
    with pytest.raises(SpecError, match=r"^groups\.g\.quota\.gpus: must be a whole number"):
        config.parse({"groups": {"g": {"quota": {"gpus": -2}}}})
    with pytest.raises(SpecError, match=r"^groups\.g\.borrow: must be true or false"):
        config.parse({"groups": {"g": {"borrow": "yes"}}})


def test_machine_capacity_parses_and_what_it_leaves_out_is_found() -> None:
    c = config.parse({"machine": {"gpus": 4, "memory": "64G"}})
    assert c.machine == Machine(gpus=4, memory=64 << 30)
    assert config.parse(None).machine == Machine()  # nothing declared: no limit yet
    found = Machine(gpus=8, cpus=32.0, memory=1 << 40)
    assert fill(c.machine, found) == Machine(gpus=4, cpus=32.0, memory=64 << 30)
    with pytest.raises(SpecError, match=r"^machine\.gpus: must be a whole number"):
        config.parse({"machine": {"gpus": 1.5}})
    with pytest.raises(SpecError, match=r"^machine\.memory: must be a size"):
        config.parse({"machine": {"memory": "lots"}})
    with pytest.raises(SpecError, match=r"^machine\.tpus: unknown field"):
        config.parse({"machine": {"tpus": 1}})
    here = detect()
    assert here.cpus == os.cpu_count() and (here.memory or 0) > 0 and (here.gpus or 0) >= 0


def test_gpus_are_counted_from_device_files_without_nvidia_smi(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("PATH", str(tmp_path / "bin"))  # no nvidia-smi
    for name in ("nvidia0", "nvidia1", "nvidiactl", "nvidia-uvm"):
        (tmp_path / name).touch()
    assert count_gpus(dev=tmp_path) == 2
    smi = tmp_path / "bin" / "nvidia-smi"
    smi.parent.mkdir()
    smi.write_text("#!/bin/sh\necho 'GPU 0: H100 (UUID: a)'\necho 'GPU 1: H100 (UUID: b)'\n"
                   "echo 'GPU 2: H100 (UUID: c)'\n")  # fmt: skip
    smi.chmod(0o755)
    assert count_gpus(dev=tmp_path) == 3

"""The scheduling policy: priority then FIFO per group, quotas, borrowing."""

from __future__ import annotations

from hypothesis import given, settings
from hypothesis import strategies as st

from cloudfs.jobs.config import Group, Quota, SchedulerConfig
from cloudfs.jobs.machine import Machine
from cloudfs.jobs.policy import Demand, order, plan


def job(i: int, group: str = "g", user: str = "u", prio: int = 0, gpus: int = 1) -> Demand:
    return Demand(f"j{i}", group, user, prio, i, gpus, 1.0, 0.0)


def test_three_jobs_in_a_group_whose_quota_fits_two() -> None:
    cfg = SchedulerConfig({"g": Group(Quota(gpus=2))})
    p = plan([job(1), job(2), job(3)], [], cfg)
    assert p.start == ["j1", "j2"]
    assert p.waiting == {"j3": "group g quota: gpus 2 in use + 1 asked > 2"}


def test_priority_then_fifo() -> None:
    cfg = SchedulerConfig({"g": Group(Quota(jobs=1))})
    p = plan([job(1), job(2, prio=5), job(3, prio=5)], [], cfg)
    assert p.start == ["j2"]
    assert p.waiting["j3"].startswith("group g quota: jobs")
    assert p.waiting["j1"] == "behind job j3 in group g's queue"


def test_a_job_larger_than_the_quota_waits_without_blocking_its_queue() -> None:
    cfg = SchedulerConfig({"g": Group(Quota(gpus=2))})
    p = plan([job(1, gpus=3), job(2, gpus=1)], [], cfg)
    assert p.start == ["j2"]
    assert p.waiting == {
        "j1": "group g quota: gpus 0 in use + 3 asked > 2: more than the whole quota"
    }


def test_unknown_group_waits_with_the_reason() -> None:
    p = plan([job(1, group="nope")], [], SchedulerConfig())
    assert p.waiting == {"j1": "unknown group 'nope' (not in the scheduler config)"}


def test_a_user_quota_holds_back_only_that_user() -> None:
    cfg = SchedulerConfig({"g": Group()}, {"alice": Quota(jobs=1)})
    p = plan([job(1, user="alice"), job(2, user="alice"), job(3, user="bob")], [], cfg)
    assert p.start == ["j1", "j3"]
    assert p.waiting["j2"].startswith("user alice quota: jobs")


def test_borrowing_only_when_configured() -> None:
    lender = Group(Quota(gpus=4))
    running = [job(9, group="b", gpus=1)]
    strict = SchedulerConfig({"a": Group(Quota(gpus=1)), "b": lender})
    assert plan([job(1, group="a", gpus=3)], running, strict).start == []
    lending = SchedulerConfig({"a": Group(Quota(gpus=1), borrow=True), "b": lender})
    assert plan([job(1, group="a", gpus=3)], running, lending).start == ["j1"]  # 2 of b's 3 idle
    assert plan([job(1, group="a", gpus=5)], running, lending).start == []  # 4 > 3 idle


demands = st.lists(
    st.builds(
        lambda i, g, u, p, n: Demand(f"j{i}", g, u, p, i, n, 1.0, 0.0),
        *(st.integers(0, 10_000), st.sampled_from(["a", "b"]), st.sampled_from(["x", "y"])),
        *(st.integers(0, 3), st.integers(0, 3)),
    ),
    max_size=12,
    unique_by=lambda d: d.job_id,
)


@settings(max_examples=200, deadline=None)
@given(demands, st.integers(0, 6), st.integers(0, 6), st.integers(0, 3))
def test_plan_properties(queued: list[Demand], qa: int, qb: int, ux: int) -> None:
    cfg = SchedulerConfig({"a": Group(Quota(gpus=qa)), "b": Group(Quota(gpus=qb))},
                          {"x": Quota(jobs=ux)})  # fmt: skip
    p = plan(queued, [], cfg)
    by_id = {d.job_id: d for d in queued}
    # every job either starts or waits with a reason, none twice, none dropped
    assert sorted(p.start + list(p.waiting)) == sorted(by_id)
    assert all(p.waiting.values())
    # quotas hold
    for g, q in (("a", qa), ("b", qb)):
        assert sum(by_id[j].gpus for j in p.start if by_id[j].group == g) <= q
    assert sum(1 for j in p.start if by_id[j].user == "x") <= ux
    # nothing overtakes a job of its queue held by the group; a user-held job only its user
    ranked = order(queued)
    for i, d in enumerate(ranked):
        if d.job_id in p.waiting:
            for later in ranked[i + 1 :]:
                if later.job_id in p.start and later.group == d.group:
                    why = p.waiting[d.job_id]
                    if not why.endswith("more than the whole quota"):
                        assert why.startswith(("user", "behind job"))
                        assert later.user != d.user


@settings(max_examples=200, deadline=None)
@given(demands, st.integers(0, 6), st.integers(0, 6), st.booleans(), st.booleans())
def test_borrowing_never_exceeds_the_sum_of_quotas(
    queued: list[Demand], qa: int, qb: int, ba: bool, bb: bool
) -> None:
    cfg = SchedulerConfig(
        {"a": Group(Quota(gpus=qa), borrow=ba), "b": Group(Quota(gpus=qb), borrow=bb)}
    )
    by_id = {d.job_id: d for d in queued}
    first = plan(queued, [], cfg)
    started = [by_id[j] for j in first.start]
    # a second pass with the started ones running: still within the pool
    rest = [d for d in queued if d.job_id not in first.start]
    second = plan(rest, started, cfg)
    started += [by_id[j] for j in second.start]
    assert sum(d.gpus for d in started) <= qa + qb
    for g, q, borrows in (("a", qa, ba), ("b", qb, bb)):
        if not borrows:
            assert sum(d.gpus for d in started if d.group == g) <= q


def test_a_lender_waits_for_what_it_lent() -> None:
    cfg = SchedulerConfig({"a": Group(Quota(gpus=1), borrow=True), "b": Group(Quota(gpus=4))})
    running = [job(1, group="a", gpus=3)]  # 2 of b's
    p = plan([job(2, group="b", gpus=3)], running, cfg)
    assert p.waiting == {
        "j2": "group b quota: gpus lent to other groups (3 of all groups' 5 in use)"
    }


def on(machine: Machine, groups: dict[str, Group] | None = None) -> SchedulerConfig:
    return SchedulerConfig(groups or {"g": Group()}, {}, machine)


def test_a_job_waits_for_gpus_free_on_the_machine() -> None:
    cfg = on(Machine(gpus=4))
    p = plan([job(1, gpus=2), job(2, gpus=2)], [job(9, gpus=3)], cfg)
    assert p.start == []
    assert p.waiting == {
        "j1": "waiting for 2 GPUs on this machine (1 free)",
        "j2": "behind job j1 in group g's queue",  # no small job overtakes it
    }
    assert plan([job(1, gpus=1)], [job(9, gpus=3)], cfg).start == ["j1"]


def test_cpus_and_memory_of_the_machine_are_limits_too() -> None:
    cfg = on(Machine(cpus=2, memory=8 << 30))
    big = Demand("j1", "g", "u", 0, 1, 0, 1.0, 6 << 30)
    assert plan([big], [Demand("j9", "g", "u", 0, 0, 0, 1.0, 4 << 30)], cfg).waiting == {
        "j1": "waiting for 6.0G memory on this machine (4.0G free)"
    }
    assert plan([job(1, gpus=0)], [job(8, gpus=0), job(9, gpus=0)], cfg).waiting == {
        "j1": "waiting for 1 CPUs on this machine (0 free)"
    }


def test_a_job_larger_than_the_machine_waits_without_blocking_anyone() -> None:
    cfg = on(Machine(gpus=4))
    p = plan([job(1, gpus=8), job(2, gpus=1)], [job(9, gpus=2)], cfg)
    assert p.start == ["j2"]
    assert p.waiting == {"j1": "more than this machine has: 8 GPUs asked, the machine has 4"}


def test_a_job_asking_no_gpus_runs_on_a_machine_without_any() -> None:
    cfg = on(Machine(gpus=0, cpus=2))
    p = plan([job(1, gpus=0), job(2, gpus=1)], [], cfg)
    assert p.start == ["j1"]
    assert p.waiting["j2"].startswith("more than this machine has: 1 GPUs asked")


@settings(max_examples=200, deadline=None)
@given(demands, demands, st.integers(0, 8), st.integers(0, 6), st.booleans())
def test_never_more_than_the_machine_is_allocated(
    queued: list[Demand], running: list[Demand], gpus: int, qa: int, borrow: bool
) -> None:
    running = [d for d in running if d.job_id not in {q.job_id for q in queued}]
    cfg = on(Machine(gpus=gpus, cpus=6), {"a": Group(Quota(gpus=qa), borrow), "b": Group()})
    by_id = {d.job_id: d for d in queued}
    p = plan(queued, running, cfg)
    started = [by_id[j] for j in p.start]
    held = sum(d.gpus for d in running)
    # what was already over the machine (a config shrunk) only blocks; nothing is added
    assert sum(d.gpus for d in started) <= max(0, gpus - held)
    assert sum(d.cpus for d in started) <= max(0.0, 6 - sum(d.cpus for d in running))
    for d in queued:
        why = p.waiting.get(d.job_id, "behind job")
        if d.gpus > gpus and not why.startswith("behind job"):
            assert why.startswith("more than this machine has")
    # a job larger than the machine holds back nobody
    ranked = order(queued)
    for i, d in enumerate(ranked):
        if p.waiting.get(d.job_id, "").startswith("more than this machine has"):
            assert not any(p.waiting.get(x.job_id, "").endswith(f"behind job {d.job_id}")
                           for x in ranked[i + 1 :])  # fmt: skip

"""The scheduling simulator's pure logic (benchmarks/scheduling): no cluster, no mount."""

from __future__ import annotations

import random

import pytest

from benchmarks.scheduling.engine import Rates, make_nodes, simulate, warm_node
from benchmarks.scheduling.model import MIB, BlockLRU, Dataset, Job
from benchmarks.scheduling.placement import (
    POLICY_NAMES,
    CacheAware,
    FirstFit,
    LeastLoaded,
    cache_scores,
    make_policy,
)
from benchmarks.scheduling.report import percentile, summarize
from benchmarks.scheduling.workload import WorkloadSpec, make_datasets, make_jobs

BLOCK = 4 * MIB
RATES = Rates(warm_mibs=1000.0, cold_mibs=100.0, origin_link_mibs=250.0)


def test_lru_evicts_least_recently_used_first() -> None:
    cache = BlockLRU(3 * BLOCK)
    for i in range(3):
        cache.insert(("a", i), BLOCK)
    cache.touch(("a", 0))
    assert cache.insert(("a", 3), BLOCK) == [("a", 1)]
    assert cache.insert(("b", 0), BLOCK) == [("a", 2)]
    assert cache.lru_order() == [("a", 0), ("a", 3), ("b", 0)]
    assert cache.cached_bytes("a") == 2 * BLOCK
    assert cache.cached_bytes("b") == BLOCK
    assert cache.used_bytes == 3 * BLOCK


def test_lru_makes_room_for_a_large_block_and_skips_one_larger_than_itself() -> None:
    cache = BlockLRU(3 * BLOCK)
    for i in range(3):
        cache.insert(("a", i), BLOCK)
    assert cache.insert(("b", 0), 2 * BLOCK) == [("a", 0), ("a", 1)]
    assert cache.insert(("c", 0), 4 * BLOCK) == []
    assert ("c", 0) not in cache
    assert cache.used_bytes == 3 * BLOCK


def test_dataset_blocks_cover_its_size() -> None:
    ds = Dataset("d", 10 * MIB)
    assert ds.block_count(BLOCK) == 3
    assert [ds.block_size(i, BLOCK) for i in range(3)] == [BLOCK, BLOCK, 2 * MIB]


@pytest.mark.parametrize("policy", POLICY_NAMES)
def test_every_byte_read_is_cached_or_from_the_origin(policy: str) -> None:
    spec = WorkloadSpec(
        jobs=12,
        dataset_gib=(0.1, 0.06, 0.03),
        gpu_choices=(1, 2, 4, 8),
        min_epochs=1,
        max_epochs=4,
        mean_interarrival_s=0.2,
    )
    datasets = make_datasets(spec.dataset_gib)
    jobs = make_jobs(spec, seed=5)
    nodes = make_nodes(3, 8, 12 * BLOCK)
    result = simulate(jobs, datasets, nodes, RATES, make_policy(policy, 5, 1.0, 0.8), BLOCK, 5)
    assert sorted(j.job_id for j in result.jobs) == list(range(12))
    for job, done in zip(jobs, result.jobs, strict=True):
        expected = job.epochs * datasets[job.dataset].size_bytes
        assert done.read_bytes == expected
        assert done.cached_bytes + done.origin_bytes == done.read_bytes
        assert done.start_s >= done.arrival_s
        assert done.finish_s > done.start_s
    assert all(node.used_gpus == 0 and not node.running for node in nodes)


def test_a_job_on_a_node_holding_its_dataset_reads_nothing_from_the_origin() -> None:
    ds = Dataset("d", 10 * BLOCK)
    nodes = make_nodes(1, 8, 10 * BLOCK)
    warm_node(nodes[0], ds, BLOCK)
    job = Job(0, "d", epochs=3, gpus=1, arrival_s=0.0)
    result = simulate([job], {"d": ds}, nodes, RATES, FirstFit(), BLOCK, seed=1)
    (done,) = result.jobs
    assert done.origin_bytes == 0
    assert done.cached_bytes == 3 * ds.size_bytes
    assert done.finish_s == pytest.approx(3 * ds.size_bytes / (RATES.warm_mibs * MIB))


def test_a_cold_job_reads_the_first_epoch_from_the_origin_at_the_cold_rate() -> None:
    ds = Dataset("d", 10 * BLOCK)
    nodes = make_nodes(1, 8, 10 * BLOCK)
    job = Job(0, "d", epochs=2, gpus=1, arrival_s=0.0)
    (done,) = simulate([job], {"d": ds}, nodes, RATES, FirstFit(), BLOCK, seed=1).jobs
    assert done.origin_bytes == ds.size_bytes
    assert done.cached_bytes == ds.size_bytes
    cold = ds.size_bytes / (RATES.cold_mibs * MIB)
    warm = ds.size_bytes / (RATES.warm_mibs * MIB)
    assert done.finish_s == pytest.approx(cold + warm)


def test_cold_readers_share_the_origin_link() -> None:
    ds = {"a": Dataset("a", 10 * BLOCK), "b": Dataset("b", 10 * BLOCK)}
    jobs = [Job(0, "a", 1, 8, 0.0), Job(1, "b", 1, 8, 0.0), Job(2, "a", 1, 8, 0.0)]
    nodes = make_nodes(3, 8, 10 * BLOCK)
    result = simulate(jobs, ds, nodes, RATES, FirstFit(), BLOCK, seed=1)
    link_share = RATES.origin_link_mibs / 3  # 83 MiB/s each, under the 100 per reader
    for done in result.jobs:
        assert done.finish_s == pytest.approx(10 * BLOCK / (link_share * MIB))


def test_cache_scores_are_ten_times_cached_over_the_most_held() -> None:
    ds = Dataset("d", 10 * BLOCK)
    nodes = make_nodes(3, 8, 10 * BLOCK)
    for i in range(10):
        nodes[1].cache.insert(("d", i), BLOCK)
    for i in range(4):
        nodes[2].cache.insert(("d", i), BLOCK)
    assert cache_scores(ds, nodes) == [0, 10, 4]
    assert cache_scores(Dataset("x", BLOCK), nodes) == [0, 0, 0]


def test_cache_aware_prefers_the_warm_node_and_then_the_least_loaded() -> None:
    ds = Dataset("d", 10 * BLOCK)
    nodes = make_nodes(3, 8, 10 * BLOCK)
    job = Job(0, "d", 1, 2, 0.0)
    nodes[0].used_gpus = 4
    assert CacheAware().choose(job, ds, nodes, 0.0) is nodes[1]
    warm_node(nodes[2], ds, BLOCK)
    nodes[2].used_gpus = 6
    assert CacheAware().choose(job, ds, nodes, 0.0) is nodes[2]
    nodes[2].used_gpus = 7
    assert CacheAware().choose(job, ds, nodes, 0.0) is nodes[1]


def test_cache_aware_nomix_avoids_a_warm_node_busy_with_another_dataset() -> None:
    ds = Dataset("d", 10 * BLOCK)
    nodes = make_nodes(2, 8, 10 * BLOCK)
    warm_node(nodes[1], ds, BLOCK)
    nodes[1].running[7] = "other"
    job = Job(0, "d", 1, 2, 0.0)
    assert CacheAware().choose(job, ds, nodes, 0.0) is nodes[1]
    assert CacheAware(avoid_mixing=True).choose(job, ds, nodes, 0.0) is nodes[0]
    nodes[0].running[8] = "third"
    assert CacheAware(avoid_mixing=True).choose(job, ds, nodes, 0.0) is nodes[1]


def test_cache_aware_wait_holds_a_job_for_a_busy_warm_node_until_its_bound() -> None:
    ds = Dataset("d", 10 * BLOCK)
    nodes = make_nodes(2, 8, 10 * BLOCK)
    warm_node(nodes[1], ds, BLOCK)
    nodes[1].used_gpus = 8
    job = Job(0, "d", 1, 2, arrival_s=100.0)
    policy = CacheAware(max_wait_s=50.0, ready_fraction=0.8)
    assert policy.choose(job, ds, nodes, 120.0) is None
    assert policy.choose(job, ds, nodes, 150.0) is nodes[0]
    nodes[1].used_gpus = 0
    assert policy.choose(job, ds, nodes, 120.0) is nodes[1]


def test_cache_aware_is_never_worse_when_one_node_is_warm() -> None:
    ds = Dataset("d", 20 * BLOCK)
    job = Job(0, "d", epochs=2, gpus=4, arrival_s=0.0)
    figures = {}
    for policy in (FirstFit(), LeastLoaded(), CacheAware()):
        nodes = make_nodes(3, 8, 20 * BLOCK)
        warm_node(nodes[2], ds, BLOCK)
        (done,) = simulate([job], {"d": ds}, nodes, RATES, policy, BLOCK, seed=1).jobs
        figures[policy.name] = (done.completion_s, done.origin_bytes)
    assert figures["aware"][0] == pytest.approx(2 * 20 * BLOCK / (RATES.warm_mibs * MIB))
    assert figures["aware"][1] == 0
    for name in ("first-fit", "least-loaded"):
        assert figures["aware"][0] <= figures[name][0]
        assert figures["aware"][1] <= figures[name][1]


def test_a_seed_gives_the_same_run() -> None:
    spec = WorkloadSpec(20, (0.1, 0.06, 0.03), (1, 2, 4, 8), 2, 5, 0.3)
    datasets = make_datasets(spec.dataset_gib)

    def once(seed: int, policy: str) -> dict[str, float]:
        nodes = make_nodes(8, 8, 15 * BLOCK)
        jobs = make_jobs(spec, seed)
        result = simulate(
            jobs, datasets, nodes, RATES, make_policy(policy, seed, 1.0, 0.8), BLOCK, seed
        )
        return summarize(result)

    for policy in POLICY_NAMES:
        assert once(7, policy) == once(7, policy)
    assert make_jobs(spec, 7) != make_jobs(spec, 8)


def test_jobs_no_node_can_take_are_refused() -> None:
    ds = {"d": Dataset("d", BLOCK)}
    with pytest.raises(ValueError, match="GPUs"):
        simulate(
            [Job(0, "d", 1, 16, 0.0)], ds, make_nodes(1, 8, BLOCK), RATES, FirstFit(), BLOCK, 1
        )
    with pytest.raises(ValueError, match="unknown dataset"):
        simulate([Job(0, "x", 1, 1, 0.0)], ds, make_nodes(1, 8, BLOCK), RATES, FirstFit(), BLOCK, 1)


def test_percentile_interpolates_between_ranks() -> None:
    values = [float(v) for v in range(1, 21)]
    random.Random(0).shuffle(values)
    assert percentile(values, 95) == pytest.approx(19.05)
    assert percentile([3.0], 95) == 3.0


def test_a_read_speeds_up_when_another_leaves_the_link() -> None:
    # Two cold jobs share a 200 MiB/s link (100 MiB/s each); when the small one
    # ends, the big one's block in flight is re-rated to the whole link.
    ds = {"big": Dataset("big", 20 * BLOCK), "small": Dataset("small", 2 * BLOCK)}
    rates = Rates(warm_mibs=1000.0, cold_mibs=1000.0, origin_link_mibs=200.0)
    jobs = [Job(0, "big", 1, 8, 0.0), Job(1, "small", 1, 8, 0.0)]
    nodes = make_nodes(2, 8, 20 * BLOCK)
    done = simulate(jobs, ds, nodes, rates, FirstFit(), BLOCK, seed=1).jobs
    # small: 8 MiB at 100 MiB/s = 0.08 s; big: 8 MiB by then, 72 MiB left at 200 MiB/s.
    assert done[1].finish_s == pytest.approx(0.08)
    assert done[0].finish_s == pytest.approx(0.08 + 72 / 200)

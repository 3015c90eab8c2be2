"""SingleFlight: shared fetches, shared errors, cancellation and abandon."""

from __future__ import annotations

import gc
import weakref

import pytest
import trio
import trio.testing

from cloudfs.cache.singleflight import FlightAbandoned, SingleFlight
from cloudfs.errors import RemoteIOError


def test_concurrent_callers_share_one_fetch() -> None:
    async def main() -> None:
        flights: SingleFlight[str, bytes] = SingleFlight()
        calls = 0
        results: list[bytes] = []

        async def fetch() -> bytes:
            nonlocal calls
            calls += 1
            await trio.sleep(0.01)
            return b"value"

        async def caller() -> None:
            results.append(await flights.do("k", fetch))

        async with trio.open_nursery() as nursery:
            for _ in range(10):
                nursery.start_soon(caller)
        assert calls == 1 and results == [b"value"] * 10
        assert len(flights) == 0
        assert await flights.do("k", fetch) == b"value" and calls == 2

    trio.run(main)


def test_error_reaches_every_waiter_and_entry_is_removed() -> None:
    async def main() -> None:
        flights: SingleFlight[str, int] = SingleFlight()
        calls = 0
        errors: list[BaseException] = []

        async def fetch() -> int:
            nonlocal calls
            calls += 1
            await trio.sleep(0.01)
            raise RemoteIOError("boom")

        async def caller() -> None:
            try:
                await flights.do("k", fetch)
            except RemoteIOError as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            for _ in range(5):
                nursery.start_soon(caller)
        assert calls == 1 and len(errors) == 5
        assert all(e is errors[0] for e in errors)
        assert "k" not in flights

    trio.run(main)


def test_cancelled_leader_lets_a_waiter_take_over() -> None:
    async def main() -> None:
        flights: SingleFlight[str, str] = SingleFlight()
        calls = 0
        got: list[str] = []

        async def fetch() -> str:
            nonlocal calls
            calls += 1
            await trio.sleep(0.05)
            return "ok"

        async def waiter() -> None:
            got.append(await flights.do("k", fetch))

        leader_scope = trio.CancelScope()

        async def leader() -> None:
            with leader_scope:
                await flights.do("k", fetch)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(leader)
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(waiter)
            await trio.testing.wait_all_tasks_blocked()
            leader_scope.cancel()
        assert got == ["ok"] and calls == 2

    trio.run(main)


def test_claim_resolve_abandon() -> None:
    async def main() -> None:
        flights: SingleFlight[str, int] = SingleFlight()
        first = flights.claim("a")
        assert first is not None
        assert flights.claim("a") is None
        assert flights.get("a") is first
        first.resolve(1)
        first.abandon()  # finishing twice is ignored
        assert await first.wait() == 1
        assert flights.get("a") is None

        second = flights.claim("a")
        assert second is not None
        second.abandon()
        with pytest.raises(FlightAbandoned):
            await second.wait()
        third = flights.claim("a")
        assert third is not None
        third.fail(RemoteIOError("x"))
        with pytest.raises(RemoteIOError):
            await third.wait()
        assert len(flights) == 0

    trio.run(main)


@pytest.mark.parametrize("finish", ["resolve", "fail", "abandon"])
def test_a_finished_flight_is_freed_without_the_cyclic_collector(finish: str) -> None:
    # A flight holds a whole block; if it sat in a reference cycle, blocks would
    # pile up until Python's cyclic GC ran (it counts objects, not bytes).
    flights: SingleFlight[str, bytes] = SingleFlight()
    flight = flights.claim("k")
    assert flight is not None
    gone = weakref.ref(flight)
    if finish == "resolve":
        flight.resolve(b"block")
    elif finish == "fail":
        flight.fail(RemoteIOError("down"))
    else:
        flight.abandon()
    assert len(flights) == 0
    gc.disable()
    try:
        del flight
        assert gone() is None
    finally:
        gc.enable()

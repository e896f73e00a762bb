"""The operator's admission of queries to the analyst: the bounds per cluster, namespace and
user, first come first served, and the queue said once per waiting query."""

from __future__ import annotations

import asyncio

import pytest

from oda_analyst.controller.admission import Admission, Bounds, Holder, blocked_by


def test_each_bound_names_itself_and_its_setting() -> None:
    bounds = Bounds(cluster=3, namespace=2, user=1)
    assert blocked_by({}, "ops", "alice", bounds) is None
    one = {"a": Holder("ops", "alice")}
    why = blocked_by(one, "ops", "alice", bounds)
    assert why is not None and "alice" in why and "PER_USER" in why
    assert blocked_by(one, "ops", "bob", bounds) is None
    two = {**one, "b": Holder("ops", "bob")}
    why = blocked_by(two, "ops", "carol", bounds)
    assert why is not None and "namespace ops" in why and "PER_NAMESPACE" in why
    three = {**two, "c": Holder("lab", "dave")}
    why = blocked_by(three, "lab", "erin", bounds)
    assert why is not None and "MAX_QUERIES" in why and "PER_" not in why


def test_queries_run_side_by_side_up_to_the_bound_and_the_rest_queue_in_order() -> None:
    async def scenario() -> tuple[int, list[str], list[tuple[str, int]], list[str]]:
        admission = Admission(Bounds(cluster=2, namespace=10, user=10))
        release = asyncio.Event()
        queued: list[tuple[str, int]] = []
        started: list[str] = []
        peak = 0

        async def query(key: str) -> None:
            nonlocal peak

            async def on_queued(why: str, ahead: int) -> None:
                queued.append((key, ahead))

            async with admission.slot(key, "ops", key, on_queued):
                started.append(key)
                peak = max(peak, admission.running)
                await release.wait()

        tasks = [asyncio.create_task(query(k)) for k in ("q1", "q2", "q3", "q4")]
        for _ in range(20):
            await asyncio.sleep(0)
        early = list(started)
        release.set()
        await asyncio.gather(*tasks)
        return peak, early, queued, started

    peak, early, queued, started = asyncio.run(scenario())
    assert early == ["q1", "q2"]  # two at once, not one
    assert peak == 2
    assert queued == [("q3", 0), ("q4", 1)]  # each said once, with its place in line
    assert started == ["q1", "q2", "q3", "q4"]


def test_a_user_at_the_bound_does_not_hold_up_another_user() -> None:
    async def scenario() -> list[str]:
        admission = Admission(Bounds(cluster=10, namespace=10, user=1))
        hold = asyncio.Event()
        started: list[str] = []

        async def query(key: str, user: str) -> None:
            async def on_queued(why: str, ahead: int) -> None:
                return None

            async with admission.slot(key, "ops", user, on_queued):
                started.append(key)
                await hold.wait()

        tasks = [asyncio.create_task(query("a1", "alice")),
                 asyncio.create_task(query("a2", "alice")),
                 asyncio.create_task(query("b1", "bob"))]  # fmt: skip
        for _ in range(20):
            await asyncio.sleep(0)
        seen = list(started)
        hold.set()
        await asyncio.gather(*tasks)
        return seen

    assert asyncio.run(scenario()) == ["a1", "b1"]


def test_a_place_is_given_back_when_the_call_fails_or_is_cancelled() -> None:
    async def scenario() -> int:
        admission = Admission(Bounds(cluster=1, namespace=1, user=1))

        async def on_queued(why: str, ahead: int) -> None:
            return None

        with pytest.raises(RuntimeError):
            async with admission.slot("q1", "ops", "alice", on_queued):
                raise RuntimeError("the analyst failed")
        waiting = asyncio.create_task(_hold(admission, "q2"))
        await asyncio.sleep(0)
        blocked = asyncio.create_task(_hold(admission, "q3"))
        await asyncio.sleep(0)
        blocked.cancel()
        waiting.cancel()
        await asyncio.gather(waiting, blocked, return_exceptions=True)
        async with admission.slot("q4", "ops", "alice", on_queued) as queued:
            assert not queued
        return int(admission.running + admission.waiting)

    assert asyncio.run(scenario()) == 0


async def _hold(admission: Admission, key: str) -> None:
    async def on_queued(why: str, ahead: int) -> None:
        return None

    async with admission.slot(key, "ops", "alice", on_queued):
        await asyncio.Event().wait()

"""Slots in one process: a bounded wait, served in order, fair between devices, several servers."""

from __future__ import annotations

import asyncio

import pytest

from llm.admission import LocalSlots
from llm.errors import Busy

pytestmark = pytest.mark.anyio


async def _hold(slots: LocalSlots, device: str, release: asyncio.Event, log: list[str]) -> int:
    async with slots.slot(device) as grant:
        log.append(device)
        await release.wait()
        return grant.server


async def test_waiters_are_served_in_their_order() -> None:
    slots = LocalSlots(1, max_waiting=5, wait_s=5, device_waiting=1)
    release = [asyncio.Event() for _ in range(4)]
    order: list[str] = []
    tasks = []
    for number, device in enumerate("abcd"):
        tasks.append(asyncio.create_task(_hold(slots, device, release[number], order)))
        await asyncio.sleep(0.01)
    assert order == ["a"]
    assert slots.waiting == 3
    for event in release:
        event.set()
        await asyncio.sleep(0.01)
    await asyncio.gather(*tasks)
    assert order == ["a", "b", "c", "d"]
    assert slots.active == 0
    assert slots.waiting == 0


async def test_a_device_cannot_take_every_waiting_place() -> None:
    slots = LocalSlots(1, max_waiting=4, wait_s=5, device_waiting=1)
    release = asyncio.Event()
    order: list[str] = []
    holder = asyncio.create_task(_hold(slots, "greedy", release, order))
    await asyncio.sleep(0.01)
    waiting = asyncio.create_task(_hold(slots, "greedy", release, order))
    await asyncio.sleep(0.01)
    with pytest.raises(Busy, match="already waits"):
        async with slots.slot("greedy"):
            pass
    other = asyncio.create_task(_hold(slots, "other", release, order))
    await asyncio.sleep(0.01)
    assert slots.waiting == 2  # the other device got a place
    release.set()
    await asyncio.gather(holder, waiting, other)
    assert order == ["greedy", "greedy", "other"]


async def test_a_full_queue_and_a_long_wait_are_busy() -> None:
    slots = LocalSlots(1, max_waiting=1, wait_s=0.1)
    release = asyncio.Event()
    holder = asyncio.create_task(_hold(slots, "a", release, []))
    await asyncio.sleep(0.01)
    waiter = asyncio.create_task(_hold(slots, "b", release, []))
    await asyncio.sleep(0.01)
    with pytest.raises(Busy, match="already waiting"):
        async with slots.slot("c"):
            pass
    with pytest.raises(Busy, match="no slot within"):
        await waiter
    release.set()
    await holder
    assert slots.waiting == 0
    assert slots.active == 0
    async with slots.slot("c") as grant:  # nothing was left reserved by the timed-out waiter
        assert grant.server == 0


async def test_a_cancelled_waiter_leaves_its_place() -> None:
    slots = LocalSlots(1, max_waiting=2, wait_s=5)
    release = asyncio.Event()
    holder = asyncio.create_task(_hold(slots, "a", release, []))
    await asyncio.sleep(0.01)
    waiter = asyncio.create_task(_hold(slots, "b", release, []))
    await asyncio.sleep(0.01)
    waiter.cancel()
    with pytest.raises(asyncio.CancelledError):
        await waiter
    assert slots.waiting == 0
    release.set()
    await holder
    assert slots.active == 0


async def test_turns_spread_over_servers_and_avoid_one_that_is_down() -> None:
    slots = LocalSlots([1, 2], max_waiting=0, wait_s=0)
    release = asyncio.Event()
    tasks = [asyncio.create_task(_hold(slots, f"d{n}", release, [])) for n in range(3)]
    await asyncio.sleep(0.01)
    with pytest.raises(Busy):  # three slots in all, all taken
        async with slots.slot("d9"):
            pass
    release.set()
    assert sorted(await asyncio.gather(*tasks)) == [0, 1, 1]
    slots.mark(0, up=False)
    async with slots.slot("x") as grant:
        assert grant.server == 1  # the server down is not chosen while another is free
    async with slots.slot("x", avoid=frozenset({1})) as grant:
        assert grant.server == 0  # but it is tried when it is the only one left

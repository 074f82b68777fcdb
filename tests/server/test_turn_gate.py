"""The bound on turns at work past their card: places are never lost nor made up."""

from __future__ import annotations

import asyncio

import pytest

from server.turn_gate import TurnGate

pytestmark = pytest.mark.anyio


async def test_at_most_places_turns_work_at_once_and_waiting_for_the_model_frees_one() -> None:
    gate = TurnGate(places=2)
    working, most = 0, 0
    model = asyncio.Event()

    async def turn(uses_model: bool) -> None:
        nonlocal working, most
        async with gate.turn() as place:
            working += 1
            most = max(most, working)
            if uses_model:
                working -= 1
                async with place.released():  # waiting for a slot, generating
                    await model.wait()
                working += 1
            await asyncio.sleep(0.01)
            working -= 1

    generating = [asyncio.create_task(turn(True)) for _ in range(2)]
    await asyncio.sleep(0.02)
    others = [asyncio.create_task(turn(False)) for _ in range(6)]
    await asyncio.gather(*others)  # done while both model turns still wait for the model
    assert not any(task.done() for task in generating)
    model.set()
    await asyncio.gather(*generating)
    assert most == 2


async def test_a_turn_cancelled_while_taking_its_place_back_frees_nothing_twice() -> None:
    gate = TurnGate(places=1)
    inside = asyncio.Event()

    async def turn() -> None:
        async with gate.turn() as place, place.released():
            inside.set()
            await asyncio.sleep(0.01)

    async def hog(hold: asyncio.Event) -> None:
        async with gate.turn():
            await hold.wait()

    hold = asyncio.Event()
    first = asyncio.create_task(turn())
    await inside.wait()
    hogging = asyncio.create_task(hog(hold))  # takes the place the first one let go
    await asyncio.sleep(0.05)  # the first now waits to take a place back
    first.cancel()
    with pytest.raises(asyncio.CancelledError):
        await first
    hold.set()
    await hogging
    # Exactly one place is left: one turn gets it, a second one waits.
    async with gate.turn():
        second = asyncio.create_task(hog(asyncio.Event()))
        await asyncio.sleep(0.02)
        assert not second.done()
        second.cancel()

"""Model slots shared through PostgreSQL advisory locks: across processes, fair, crash-safe."""

from __future__ import annotations

import asyncio
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from llm.errors import Busy
from server.db.migrate import upgrade
from server.pg_slots import PgSlots
from tests.database import postgres_database

pytestmark = pytest.mark.anyio

ROOT = Path(__file__).resolve().parents[2]


@pytest.fixture(scope="module")
def database_url() -> Iterator[str]:
    with postgres_database() as url:
        upgrade(url)  # the waiters' tickets are a sequence of the schema
        yield url


def _server() -> str:
    """A model server URL of its own per test: its slots are locks no other test holds."""
    return f"http://pc-llm-{uuid.uuid4().hex[:8]}:11434"


async def test_two_processes_never_hold_one_slot_twice(database_url: str) -> None:
    server = _server()
    first = PgSlots(database_url, [(server, 1)], max_waiting=0, wait_s=0)
    second = PgSlots(database_url, [(server, 1)], max_waiting=0, wait_s=0)
    try:
        async with first.slot("a"):
            with pytest.raises(Busy, match="already waiting"):
                async with second.slot("b"):
                    pass
        async with second.slot("b") as grant:  # released: the other one gets it
            assert grant.server == 0
    finally:
        await first.close()
        await second.close()


async def test_a_waiter_in_another_process_gets_the_slot_when_it_frees(database_url: str) -> None:
    server = _server()
    first = PgSlots(database_url, [(server, 1)], max_waiting=2, wait_s=5, poll_s=0.02)
    second = PgSlots(database_url, [(server, 1)], max_waiting=2, wait_s=5, poll_s=0.02)
    release = asyncio.Event()

    async def hold() -> None:
        async with first.slot("a"):
            await release.wait()

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0.2)

    async def wait() -> float:
        async with second.slot("b") as grant:
            return grant.waited_s

    waiter = asyncio.create_task(wait())
    await asyncio.sleep(0.3)
    assert not waiter.done()
    assert second.waiting == 1
    release.set()
    await holder
    assert await waiter >= 0.3
    await first.close()
    await second.close()


async def test_one_device_holds_one_waiting_place_across_processes(database_url: str) -> None:
    server = _server()
    slots = [PgSlots(database_url, [(server, 1)], max_waiting=4, wait_s=3) for _ in range(3)]
    release = asyncio.Event()

    async def hold(instance: PgSlots, device: str) -> None:
        async with instance.slot(device):
            await release.wait()

    holder = asyncio.create_task(hold(slots[0], "greedy"))
    await asyncio.sleep(0.2)
    waiting = asyncio.create_task(hold(slots[1], "greedy"))
    await asyncio.sleep(0.2)
    with pytest.raises(Busy, match="already waits"):
        async with slots[2].slot("greedy"):
            pass
    other = asyncio.create_task(hold(slots[2], "other"))
    await asyncio.sleep(0.2)
    assert not other.done()  # waiting, not refused
    release.set()
    await asyncio.gather(holder, waiting, other)
    for instance in slots:
        await instance.close()


def test_a_crashed_process_frees_its_slot(database_url: str) -> None:
    """A process killed while it generates: PostgreSQL ends its session, and its lock."""
    server = _server()
    child = subprocess.Popen(  # noqa: S603 - this interpreter, fixed code
        [
            sys.executable,
            "-c",
            textwrap.dedent(
                f"""
                import asyncio, os, sys
                from server.pg_slots import PgSlots

                async def main():
                    slots = PgSlots({database_url!r}, [({server!r}, 1)], max_waiting=0, wait_s=0)
                    async with slots.slot("crashing"):
                        print("held", flush=True)
                        sys.stdin.readline()
                        os._exit(9)  # no cleanup at all, as a crash

                asyncio.run(main())
                """
            ),
        ],
        cwd=ROOT,
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    assert child.stdout is not None
    assert child.stdin is not None
    assert child.stdout.readline().strip() == "held"

    async def try_now(wait_s: float) -> int:
        slots = PgSlots(database_url, [(server, 1)], max_waiting=1, wait_s=wait_s)
        try:
            async with slots.slot("survivor") as grant:
                return grant.server
        finally:
            await slots.close()

    with pytest.raises(Busy):  # held by the child
        asyncio.run(try_now(0.2))
    child.stdin.write("go\n")
    child.stdin.flush()
    assert child.wait(timeout=10) == 9
    assert asyncio.run(try_now(5.0)) == 0


async def test_without_the_database_slots_are_counted_in_the_process() -> None:
    slots = PgSlots(
        "postgresql+psycopg://nobody@127.0.0.1:1/none", [("http://x:1", 1)], max_waiting=0
    )
    async with slots.slot("a") as grant:
        assert grant.server == 0
        with pytest.raises(Busy):  # the bound still holds, in this process
            async with slots.slot("b"):
                pass


async def test_many_waiters_share_one_connection_per_process_and_one_slot(
    database_url: str,
) -> None:
    """60 turns in two processes for one slot: never two at once, every one served, and each
    process holds its locks on one connection (100 waiters once took 100 connections)."""
    server = _server()
    processes = [
        PgSlots(
            database_url, [(server, 1)], max_waiting=100, wait_s=30, device_waiting=1, poll_s=0.01
        )
        for _ in range(2)
    ]
    holding, most, served = 0, 0, 0

    async def turn(instance: PgSlots, device: str) -> None:
        nonlocal holding, most, served
        async with instance.slot(device):
            holding += 1
            most = max(most, holding)
            await asyncio.sleep(0.01)
            holding -= 1
            served += 1

    async def connections() -> int:
        probe = PgSlots(database_url, [(server, 1)])
        count = await probe._value(
            "SELECT count(*) FROM pg_stat_activity WHERE datname = current_database() "
            "AND pid <> pg_backend_pid() AND %s = %s",
            (1, 1),
        )
        await probe.close()
        return int(count)

    tasks = [asyncio.create_task(turn(processes[n % 2], f"device-{n}")) for n in range(60)]
    await asyncio.sleep(0.1)
    during = await connections()
    await asyncio.gather(*tasks)
    assert (most, served) == (1, 60)
    assert during <= 2
    for instance in processes:
        await instance.close()


async def test_waiters_in_several_processes_are_served_in_their_order(database_url: str) -> None:
    """Three processes, one slot: the turns that waited are served in the order they came,
    whichever process they wait in (not in the order each process's poll finds the slot)."""
    server = _server()
    processes = [
        PgSlots(database_url, [(server, 1)], max_waiting=20, wait_s=30, poll_s=0.01)
        for _ in range(3)
    ]
    order: list[int] = []
    release = asyncio.Event()

    async def hold() -> None:
        async with processes[0].slot("holder"):
            await release.wait()

    async def turn(number: int) -> None:
        async with processes[number % 3].slot(f"device-{number}"):
            order.append(number)
            await asyncio.sleep(0.005)

    holder = asyncio.create_task(hold())
    await asyncio.sleep(0.1)
    waiting = []
    for number in range(12):
        waiting.append(asyncio.create_task(turn(number)))
        await asyncio.sleep(0.03)  # each has drawn its ticket before the next comes
    release.set()
    await holder
    await asyncio.gather(*waiting)
    assert order == list(range(12))
    for instance in processes:
        await instance.close()


async def test_a_server_marked_down_is_tried_last(database_url: str) -> None:
    slots = PgSlots(database_url, [(_server(), 1), (_server(), 1)], max_waiting=0)
    slots.mark(0, up=False)
    async with slots.slot("a") as first:
        assert first.server == 1
        async with slots.slot("b") as second:  # the one left, down or not
            assert second.server == 0
    slots.mark(0, up=True)
    async with slots.slot("c") as grant:
        assert grant.server == 0
    await slots.close()

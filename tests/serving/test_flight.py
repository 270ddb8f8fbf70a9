"""The single flight and its fair queue (app.serving.flight): one computation per question, turns taken one
browser after another, a place in the queue said right, a full queue refused, an error shared and not kept."""

from __future__ import annotations

import asyncio

import pytest

from app.serving.flight import Flight, Job, QueueFull, wait_for


def run(coroutine):  # one event loop per test
    return asyncio.run(coroutine)


def test_identical_questions_asked_at_once_share_one_computation() -> None:
    calls = []

    async def main() -> list[str]:
        flight: Flight[str] = Flight(runners=1)
        release = asyncio.Event()

        async def work(job: Job[str]) -> str:
            calls.append(job.key)
            await release.wait()
            return f"answer to {job.key}"

        jobs = [flight.submit("q", f"student-{i}", work) for i in range(100)]
        assert len({id(j) for j in jobs}) == 1 and jobs[0].waiters == 100
        release.set()
        return await asyncio.gather(*(wait_for(j, 5) for j in jobs))

    answers = run(main())
    assert calls == ["q"]
    assert answers == ["answer to q"] * 100


def test_each_browser_takes_its_turn_so_one_cannot_starve_the_others() -> None:
    order = []

    async def main() -> None:
        flight: Flight[str] = Flight(runners=1)
        gate = asyncio.Event()

        async def work(job: Job[str]) -> str:
            await gate.wait()
            order.append(job.key)
            return job.key

        greedy = [flight.submit(f"a{i}", "a", work) for i in range(5)]  # a0 starts at once, a1…a4 wait
        others = [flight.submit("b0", "b", work), flight.submit("c0", "c", work)]
        # Ahead of b0: a0 running, then a1 (a's turn came first); ahead of a4: a0 running, a1 a2 a3, b0 and c0.
        assert flight.ahead(others[0]) == 2
        assert flight.ahead(others[1]) == 3
        assert flight.ahead(greedy[4]) == 6
        assert flight.ahead(greedy[0]) == 0  # running
        gate.set()
        await asyncio.gather(*(wait_for(j, 5) for j in greedy + others))

    run(main())
    assert order == ["a0", "a1", "b0", "c0", "a2", "a3", "a4"]


def test_a_full_queue_refuses_the_next_question_but_not_one_already_in_flight() -> None:
    async def main() -> None:
        flight: Flight[int] = Flight(runners=1, most_waiting=2)
        gate = asyncio.Event()

        async def work(job: Job[int]) -> int:
            await gate.wait()
            return 1

        flight.submit("running", "x", work)
        flight.submit("w1", "x", work)
        flight.submit("w2", "y", work)
        with pytest.raises(QueueFull):
            flight.submit("w3", "z", work)
        assert flight.submit("w1", "z", work).waiters == 2  # joins the question already waiting
        gate.set()

    run(main())


def test_an_error_reaches_every_waiter_and_the_next_ask_computes_again() -> None:
    calls = []

    async def main() -> None:
        flight: Flight[str] = Flight(runners=2)

        async def failing(job: Job[str]) -> str:
            calls.append("fail")
            await asyncio.sleep(0)
            raise ValueError("bad text")

        jobs = [flight.submit("q", f"s{i}", failing) for i in range(3)]
        for job in jobs:
            with pytest.raises(ValueError, match="bad text"):
                await wait_for(job, 5)

        async def working(job: Job[str]) -> str:
            calls.append("work")
            return "ok"

        assert await wait_for(flight.submit("q", "s0", working), 5) == "ok"

    run(main())
    assert calls == ["fail", "work"]


def test_a_waiter_that_leaves_does_not_cancel_the_question_for_the_others() -> None:
    async def main() -> str | None:
        flight: Flight[str] = Flight()

        async def work(job: Job[str]) -> str:
            job.step(3, 30)
            await asyncio.sleep(0.2)
            return "done"

        job = flight.submit("q", "a", work)
        assert await wait_for(job, 0.01) is None  # a page's first screen: not ready yet
        await asyncio.sleep(0)
        assert (job.progress, job.steps) == (3, 30)
        return await wait_for(flight.submit("q", "b", work), 5)

    assert run(main()) == "done"


def test_a_job_cancelled_before_it_starts_gives_its_runner_s_place_back() -> None:
    async def main() -> str | None:
        flight: Flight[str] = Flight(runners=1)
        gate = asyncio.Event()

        async def work(job: Job[str]) -> str:
            await gate.wait()
            return job.key

        first = flight.submit("first", "a", work)
        waiting = flight.submit("second", "b", work)
        for task in asyncio.all_tasks():  # the first job's task, cancelled as a closing event loop does
            if task is not asyncio.current_task():
                task.cancel()
        await asyncio.gather(first.done, return_exceptions=True)
        assert first.done.cancelled() and "first" not in flight.jobs
        gate.set()
        return await wait_for(waiting, 5)

    assert run(main()) == "second"


def test_an_app_started_again_in_the_same_process_starts_a_fresh_flight() -> None:
    """asyncio.run cancels a task made as the loop closes before it ever ran: the next event loop's questions
    must not queue behind it."""
    flight: Flight[str] = Flight(runners=1)

    async def work(job: Job[str]) -> str:
        await asyncio.sleep(0)
        return f"answer to {job.key}"

    async def leave_a_job_unstarted() -> None:
        flight.runners = 0
        flight.submit("left behind", "a", work)
        flight.runners = 1
        flight._pump()  # its task is made as the loop ends: cancelled before it starts

    run(leave_a_job_unstarted())

    async def ask_again() -> str | None:
        return await wait_for(flight.submit("next", "b", work), 5)

    assert run(ask_again()) == "answer to next"

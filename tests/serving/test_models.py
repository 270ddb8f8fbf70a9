"""A model's service (app.serving.models): its records computed once however many threads ask and kept within
their byte budget, its answers keyed by the model's name (two models never share one), its progress, and its
answers shared between two servers through a real Redis: one computation for both, within Redis's byte budget,
and no need of Redis when it is gone."""

from __future__ import annotations

import asyncio
import threading
import time
from concurrent.futures import ThreadPoolExecutor

import numpy as np

from app.config import Settings
from app.serving.flight import wait_for
from app.serving.models import Answer, ModelService, current_progress
from app.serving.shared import SharedAnswers
from tests.redis_server import RedisServer
from tests.servers import free_port


def service(name: str = "model-a", **settings: int) -> ModelService:
    config = Settings(model_runners=1, **settings)
    return ModelService(name, read=lambda: "files", measure=lambda files: ("catalogue", files), config=config)


def test_threads_asking_for_the_same_record_at_once_compute_it_once() -> None:
    made = []
    gate = threading.Event()
    s = service()

    def compute(progress: object) -> np.ndarray:
        made.append(1)
        gate.wait(5)
        return np.ones(1000)

    with ThreadPoolExecutor(16) as pool:
        futures = [pool.submit(s.record, ("run", "The bank"), compute) for _ in range(16)]
        time.sleep(0.2)
        gate.set()
        results = [f.result(5) for f in futures]
    assert made == [1]
    assert all(r is results[0] for r in results)


def test_records_are_kept_within_their_byte_budget() -> None:
    s = service(model_record_bytes=100_000)
    for i in range(20):
        s.record(("run", i), lambda progress: np.zeros(2_000))  # 16 KB each
    assert s.records.used <= 100_000
    assert len(s.records) == 6  # the six newest
    assert s.kept_record(("run", 19)) is not None and s.kept_record(("run", 0)) is None


def test_two_models_never_share_an_answer_for_the_same_question() -> None:
    a, b = service("model-a"), service("model-b")

    async def main() -> tuple[Answer | None, Answer | None]:
        job_a = a.ask(("page", "The bank"), "s", lambda: Answer(200, b"from a", "text/html"))
        job_b = b.ask(("page", "The bank"), "s", lambda: Answer(200, b"from b", "text/html"))
        return await wait_for(job_a, 5), await wait_for(job_b, 5)

    got_a, got_b = asyncio.run(main())
    assert got_a is not None and got_b is not None and (got_a.body, got_b.body) == (b"from a", b"from b")
    assert a.kept(("page", "The bank")).body == b"from a" and b.kept(("page", "The bank")).body == b"from b"
    assert all(key[0] == "model-a" for key in a.answers.items) and all(key[0] == "model-b" for key in b.answers.items)


def test_answers_are_kept_within_their_byte_budget() -> None:
    s = service(model_answer_bytes=50_000)

    async def main() -> None:
        for i in range(10):
            await wait_for(s.ask(("page", i), "s", lambda: Answer(200, b"x" * 10_000, "text/html")), 5)

    asyncio.run(main())
    assert s.answers.used <= 50_000 and len(s.answers) == 4
    assert s.kept(("page", 9)) is not None and s.kept(("page", 0)) is None


def test_a_job_tells_its_layers_as_its_thread_computes_them() -> None:
    s = service()
    seen = []

    def make() -> Answer:
        progress = current_progress()
        assert progress is not None
        for layer in range(1, 31):
            progress(layer, 30)
            seen.append(layer)
        return Answer(200, b"done", "text/html")

    async def main() -> tuple[int, int]:
        job = s.ask(("page", "x"), "s", make)
        await wait_for(job, 5)
        return job.progress, job.steps

    assert asyncio.run(main()) == (30, 30)
    assert current_progress() is None  # outside a job's thread


def two_servers(redis_db: RedisServer, budget: int = 1_000_000) -> tuple[ModelService, ModelService]:
    one, two = service(), service()
    for s in (one, two):
        s.share(SharedAnswers(redis_db.url(), budget=budget, seconds=60))
    return one, two


def test_a_question_asked_on_two_servers_at_once_is_computed_on_one(redis_db: RedisServer) -> None:
    one, two = two_servers(redis_db)
    made = []

    def make() -> Answer:
        made.append(1)
        time.sleep(0.3)
        return Answer(200, b"the page", "text/html", (("Content-Encoding", "zstd"),))

    async def main() -> list[Answer | None]:
        jobs = [s.ask(("page", "The bank of the river"), "s", make) for s in (one, two) for _ in range(5)]
        answers = await asyncio.gather(*(wait_for(j, 15) for j in jobs))
        later = await wait_for(service().ask(("page", "x"), "s", make), 5)  # an unshared service computes
        for s in (one, two):
            await s.shared.close()
        return [*answers, later]

    answers = asyncio.run(main())
    assert len(made) == 2  # once for both servers, once for the service that shares nothing
    assert {(a.body, a.headers) for a in answers[:-1]} == {(b"the page", (("Content-Encoding", "zstd"),))}
    assert one.computed + two.computed == 1


def test_the_shared_answers_stay_within_redis_byte_budget(redis_db: RedisServer) -> None:
    one, _ = two_servers(redis_db, budget=100_000)

    async def main() -> int:
        for i in range(12):
            await wait_for(one.ask(("page", i), "s", lambda: Answer(200, b"y" * 20_000, "text/html")), 5)
        kept = await one.shared.kept_bytes()
        await one.shared.close()
        return kept

    kept = asyncio.run(main())
    assert 80_000 <= kept <= 100_000
    client = redis_db.client()
    assert len(client.keys("attention:answer:*")) == 4


def test_without_redis_the_service_computes_by_itself_at_once() -> None:
    s = service()
    s.share(SharedAnswers(f"redis://127.0.0.1:{free_port()}/0", budget=1_000_000, seconds=60, timeout=0.2))

    async def main() -> Answer | None:
        started = time.monotonic()
        answer = await wait_for(s.ask(("page", "x"), "s", lambda: Answer(200, b"ok", "text/html")), 5)
        assert time.monotonic() - started < 2
        return answer

    assert asyncio.run(main()).body == b"ok"

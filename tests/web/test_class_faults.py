"""A lecture survives faults, with real processes: bench.faults's deployment (redis-server with its append-only
file, two app servers, nginx with deploy/nginx.conf) and a class of ten students following by their event streams,
then one app server SIGKILLed and Redis restarted. About 12 s, left to `make test-all` (pytest --full) while
`make test` is at its time budget; the Redis side of it, an open stream through a restart, runs in every `make test`
(tests/web/test_class_redis.py)."""

from __future__ import annotations

import os

import pytest

from bench.faults import GOAL_S, FaultResult, run_faults
from tests.redis_server import find_redis_server
from tests.servers import find_nginx

pytestmark = [pytest.mark.server, pytest.mark.slow]

STUDENTS = 10


@pytest.fixture(scope="module")
def faults() -> list[FaultResult]:
    missing = [name for name, found in (("redis-server", find_redis_server()), ("nginx", find_nginx())) if not found]
    if missing:
        reason = f"{' and '.join(missing)} not found (make services installs them)"
        if os.environ.get("REQUIRE_REDIS") == "1":
            pytest.fail(f"REQUIRE_REDIS=1 but {reason}", pytrace=False)
        pytest.skip(reason)
    return run_faults(STUDENTS, outage_s=2.0, log=lambda _: None)


def test_a_killed_app_server_loses_no_student_no_prediction_and_serves_again(faults: list[FaultResult]) -> None:
    killed = faults[0]
    assert killed.fault == "an app server SIGKILLed"
    assert killed.reconnected >= 1  # the fault was real: streams on the killed server were cut …
    assert killed.teacher_status == 200  # … the teacher's step went through the other …
    assert killed.within_goal == STUDENTS, killed.back_s  # … and every student had it within 3 s
    assert max(killed.back_s) <= GOAL_S
    assert killed.predictions_kept == killed.predictions_sent == STUDENTS
    assert killed.teacher_key
    assert killed.checks == {"the killed server, started again, serves the class": "ok"}


def test_a_restarted_redis_keeps_the_class_and_the_next_step_reaches_every_student(faults: list[FaultResult]) -> None:
    restarted = faults[1]
    assert restarted.fault == "Redis restarted"
    assert restarted.told_unreachable == STUDENTS  # every open stream was told, through the stream
    assert restarted.reconnected == 0  # and stayed open: none was cut
    assert restarted.teacher_status == 200
    assert restarted.within_goal == STUDENTS, restarted.back_s
    assert restarted.predictions_kept == restarted.predictions_sent == STUDENTS
    assert restarted.teacher_key
    assert restarted.checks == dict.fromkeys([
        "a class page during the outage: the reconnecting page", "/ during the outage", "/model during the outage",
        "the step after Redis's return taken once", "every student still in the class",
        "the class under its code, on the new step"], "ok")

"""What the bench's measurements return: one record per kind of run, and the goals they are held to.

The runs (bench.classroom, bench.compression, bench.load) make these, and bench.report prints them:
both import this module, and neither imports the other.
"""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

import numpy as np

# docs/performance.md's goal: 300 students follow a step within 1 s (p95)
GOAL_STUDENTS, MAX_FOLLOW_P95_MS = 300, 1000.0  # students, and their p95 to the last workspace
MAX_FOLLOW_MS = 1500.0  # no student later than this after the teacher's step
MAX_FOLLOW_CPU_MS = 0.5  # the servers' CPU per student per step
STEP_TIMEOUT_S = 10.0  # a student without the step's workspace by then has missed it
PAUSE_S = 0.5  # between a step's last workspace and the next step: a teacher talks
INTERVAL_S = 2.0  # a student edits a cell about every 2 s …


@dataclass(frozen=True)
class FollowResult:
    students: int
    store: str  # "memory" or "redis"
    steps: int
    to_event_ms: list[float]  # per step: the teacher's request sent → the last student's event received
    to_workspace_ms: list[float]  # … → the last student's workspace read
    teacher_ms: list[float]  # the teacher's own answer (the /stages fragment)
    cpu_ms: list[float]  # the server's CPU time per step, from the request to the last workspace
    missed: int = 0  # student-steps without the workspace within STEP_TIMEOUT_S
    errors: Counter = field(default_factory=Counter)
    workspace_bytes: int = 0  # one workspace on the wire
    connect_s: float = float("nan")  # the whole class joined and listening
    client_cpu: float | None = None  # this process's CPU over the steps' wall time (1.0 = one core)
    load_average: float | None = None
    pause_s: float = PAUSE_S  # between a step's last workspace and the next step
    servers: int = 1  # app servers the students were shared among (more than one: sharing Redis)
    carried: int = 0  # student-steps whose workspace came in the event (the rest fetched it)

    @staticmethod
    def pct(values: list[float], q: float) -> float:
        return float(np.percentile(values, q)) if values else float("nan")

    @property
    def error_count(self) -> int:
        return sum(self.errors.values()) + self.missed


@dataclass(frozen=True)
class Compressed:
    body: str
    candidate: str
    body_bytes: int
    wire_bytes: int
    ms: float

    @property
    def ns_per_byte_saved(self) -> float:
        saved = self.body_bytes - self.wire_bytes
        return self.ms * 1e6 / saved if saved > 0 else float("nan")

    @property
    def pays_below_mbit(self) -> float:
        """The link speed (Mbit/s) below which sending the saved bytes takes longer than compressing."""
        return 8e3 / self.ns_per_byte_saved if self.ns_per_byte_saved > 0 else float("nan")


@dataclass(frozen=True)
class HeavyResult:
    """What the heavy clients of a mixed load got."""

    clients: int
    ok: int
    errors: Counter = field(default_factory=Counter)
    p50_ms: float = float("nan")
    p95_ms: float = float("nan")
    wire_bytes: int = 0  # one answer, as sent

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())


@dataclass(frozen=True)
class LoadResult:
    students: int
    seconds: float
    sent: int
    ok: int
    errors: Counter = field(default_factory=Counter)  # kind → count
    p50_ms: float = float("nan")
    p95_ms: float = float("nan")
    p99_ms: float = float("nan")
    max_ms: float = float("nan")
    heavy: HeavyResult | None = None  # a mixed load's heavy clients
    lag_p95_ms: float = float("nan")  # how late edits went out against the schedule (a student awaits each answer)
    server_cpu: float | None = None  # the worker's CPU time / wall time (1.0 = one core busy)
    client_cpu: float | None = None  # the same for this process, the students' client
    load_average: float | None = None  # the machine's 1-minute load average at the end of the run

    @property
    def error_count(self) -> int:
        return sum(self.errors.values())

    @property
    def rate(self) -> float:
        """Edits answered per second."""
        return self.ok / self.seconds

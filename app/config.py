"""One settings object. Every default works with no environment at all; ATTENTION_* variables override."""

from __future__ import annotations

import os
import re
from pathlib import Path
from urllib.parse import urlsplit

from pydantic import AliasChoices, Field, field_validator, model_validator
from pydantic_settings import BaseSettings, SettingsConfigDict

HOST_NAME = re.compile(r"[a-z0-9]([a-z0-9.-]*[a-z0-9])?|[0-9a-f:.]*:[0-9a-f:.]*")  # a name, an IPv4 or IPv6 address
CGROUP_CPU_MAX = Path("/sys/fs/cgroup/cpu.max")  # cgroup v2: "<quota> <period>" or "max <period>"


def available_cpus(cpu_max: Path = CGROUP_CPU_MAX) -> int:
    """The CPUs this process may use: those it may run on (a container's cpuset), capped by a
    container's CPU quota (``docker run --cpus 2``, a Kubernetes CPU limit), at least 1."""
    cpus = len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count() or 1
    try:
        quota, period = cpu_max.read_text().split()[:2]
        if quota != "max":
            cpus = min(cpus, -(-int(quota) // int(period)))  # a quota of 1.5 CPUs keeps 2 workers busy
    except (OSError, ValueError):
        pass  # no cgroup v2 quota to honour
    return max(cpus, 1)


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="ATTENTION_", frozen=True, env_ignore_empty=True)

    # Serving: `python -m app.serve` (the container's command) reads these; an empty variable means the default.
    host: str = "127.0.0.1"  # the container sets 0.0.0.0, so the class's machines can reach it
    port: int = Field(default=8000, ge=1, le=65535)
    # Worker processes. Default: one per CPU with Redis (REDIS_URL), else one, since the class rooms
    # (app.classroom.store) live in the process without Redis; more than one without Redis is refused by app.serve.
    workers: int | None = Field(default=None, ge=1)
    root_path: str = ""  # the sub-path behind a reverse proxy, such as /attention; empty: served at /
    forwarded_allow_ips: str = "127.0.0.1"  # proxies trusted for X-Forwarded-For/-Proto: IPs or CIDRs, or "*"
    # A request's whole body must arrive within this many seconds of the app starting to read it, else 408:
    # a page's largest form (300 KB) then needs 10 KB/s. Headers have no timeout in uvicorn
    # (docs/classroom.md, Slow clients).
    body_timeout_seconds: float = Field(default=30.0, gt=0, le=3600)
    # Sites that may show the embeddable views (GET /embed…) in a frame, such as a school's Moodle: origins
    # (scheme://host[:port]) separated by spaces or commas. Empty: only this app's own pages may frame them;
    # every other page refuses frames whatever this says.
    embed_origins: str = ""

    # Input bounds: the only place they are stated. The API schema, the page form and docs/api.md follow.
    max_tokens: int = 64  # T (and later S) at most
    max_d_model: int = 64
    max_heads: int = 8
    max_d_head: int = 64  # d_k and d_v at most
    max_abs_value: float = 1000.0  # |every number a client sends| at most
    max_token_chars: int = 40
    max_seed: int = 2**32 - 1
    max_blocks: int = 4  # transformer blocks stacked
    max_d_ff: int = 256  # the FFN's hidden size
    # The pretrained model (POST /api/model, the page's "Your sentence"): a sentence's text, and its WordPiece
    # tokens with [CLS] and [SEP], at most these.
    model_max_chars: int = Field(default=1000, ge=1, le=10_000)
    model_max_tokens: int = Field(default=64, ge=3, le=512)
    # The language model (POST /api/decoder, /api/generate, the page's "Next word"): a text's byte-level BPE
    # tokens at most this (its characters: model_max_chars), and the tokens one generation writes at most.
    decoder_max_tokens: int = Field(default=128, ge=1, le=1024)
    decoder_max_new_tokens: int = Field(default=32, ge=1, le=256)
    # Read the language model (540 MB, about 4 s) and measure its heads at start, in the background. Off: on the
    # first request that needs it (the page says it is loading meanwhile): for a server that never shows it.
    preload_language_model: bool = True
    # The real models' services (app.serving): each model computes model_runners questions at once per worker,
    # the rest wait in a fair queue of at most model_queue (one turn per browser in turn; past it, 503 with
    # Retry-After); a page whose answer is not ready within first_screen_seconds answers at once with where it
    # stands in the queue. Finished answers are kept per worker up to model_answer_bytes (rendered, compressed)
    # and model_record_bytes (the computed runs); with REDIS_URL they are shared between servers up to
    # shared_answer_bytes, each for shared_answer_seconds.
    model_runners: int = Field(default=1, ge=1, le=16)
    model_queue: int = Field(default=1000, ge=0)
    first_screen_seconds: float = Field(default=0.5, ge=0, le=30)
    model_answer_bytes: int = Field(default=32 * 1024 * 1024, ge=0)
    model_record_bytes: int = Field(default=24 * 1024 * 1024, ge=0)
    shared_answer_bytes: int = Field(default=64 * 1024 * 1024, ge=0)
    shared_answer_seconds: int = Field(default=600, ge=1)
    # Training (POST /api/train): steps × the operations of one forward pass (app.maths.cost: multiply-adds plus
    # elementwise) at most this. The backward pass and the optimiser cost a small multiple of the forward,
    # so the heaviest request (8 heads of 64 tokens, the additive score) trains in well under a second.
    max_train_steps: int = 500
    max_train_operations: int = 200_000_000
    max_learning_rate: float = 10.0

    # Fairness (app.web.lanes): a request to the JSON API estimated at more operations than heavy_operations
    # (app.web.api.estimated_operations: its forward pass as app.maths.cost counts it, × steps + 1 when training) is
    # heavy; each worker computes at most heavy_requests heavy requests at once, and the others queue while
    # /healthz, the page and lighter requests go on. At the line: T = 64, d_model = 64 with 1 or 8 heads
    # (1.6–1.7 M, about 15 ms); every request with blocks at d_model = 64 is over it, T = 64, d_model = 16,
    # 8 heads (0.34 M) under it.
    heavy_requests: int = Field(default=1, ge=1)
    heavy_operations: int = Field(default=1_000_000, ge=0)
    # Heavy pages (app.web.page_work: a large form or pinned state, the Learn panel, every stage of a large
    # scenario) are computed and rendered in worker processes, heavy_processes at once per worker (default:
    # one per CPU); heavy_waiting more wait their turn and the rest get 503 at once; one that runs
    # heavy_seconds is stopped (503).
    heavy_processes: int = Field(default_factory=available_cpus, ge=1)
    heavy_waiting: int = Field(default=32, ge=0)
    heavy_seconds: float = Field(default=30.0, gt=0)

    # Live classes (app.classroom.store, app.web.classroom). With REDIS_URL set, rooms and their events go through
    # Redis, so several workers and replicas serve one class; without it they live in this process.
    redis_url: str = Field(default="", validation_alias=AliasChoices("redis_url", "REDIS_URL"))
    class_max_rooms: int = Field(default=200, ge=1)  # rooms alive on the server (or sharing one Redis)
    class_max_students: int = Field(default=500, ge=1)  # anonymous students per room
    class_max_streams: int = Field(default=1000, ge=1)  # open event streams per worker process
    class_idle_minutes: int = Field(default=240, ge=1)  # a room unused this long is gone
    # Fair shares (docs/classroom.md): a client is its cookie and its address together; a school's NAT puts a
    # whole class behind one address, so each address allowance is a class's worth, a cookie's one student's.
    class_predictions_per_minute: int = Field(default=30, ge=1)  # per student (and per browser, across re-joins)
    class_failures_per_client: int = Field(default=10, ge=1)  # codes naming no class per minute, per browser
    # … and per address (a school's NAT: 30 students with 10 typos each); past either, 429. Enumeration is
    # bounded by this and the code space: 31⁸ codes / 200 rooms / 300 a minute ≈ 27 years per address.
    class_failures_per_address: int = Field(default=300, ge=1)
    class_seats_per_address: int = Field(default=100, ge=1)  # seats of one class taken from one address
    class_streams_per_address: int = Field(default=250, ge=1)  # event streams one address holds per worker
    class_rooms_per_address: int = Field(default=20, ge=1)  # classes alive started from one address
    # Memory by bytes: a room's state (the teacher's page as a query string) at most this, else 413 naming its
    # largest field; each worker keeps computed runs and rendered pages of rooms up to these budgets.
    class_max_state_bytes: int = Field(default=1024 * 1024, ge=1024)
    class_cache_bytes: int = Field(default=64 * 1024 * 1024, ge=0)  # rooms' computed runs, per worker
    class_render_cache_bytes: int = Field(default=32 * 1024 * 1024, ge=0)  # rooms' rendered pages, per worker
    # Redis faults: every command (and connecting, and waiting for a pooled connection) gives up after this, so a
    # class's request answers 503 within a few seconds when Redis is frozen or gone; a teacher's change that has
    # not reached Redis within class_write_seconds of its request is dropped, never applied late.
    redis_timeout_seconds: float = Field(default=1.0, gt=0)
    class_write_seconds: float = Field(default=2.0, gt=0)

    @model_validator(mode="after")
    def _default_workers(self) -> Settings:
        if self.workers is None:  # frozen: set once, here, before anyone reads it
            object.__setattr__(self, "workers", available_cpus() if self.redis_url else 1)
        return self

    @property
    def max_form_fields(self) -> int:
        """The most fields the page's form can hold: every matrix of inputs at its largest, the mask
        grid, tokens, and a hundred settings."""
        d, t, dh, ff = self.max_d_model, self.max_tokens, self.max_d_head, self.max_d_ff
        return (3 * t * d + t * t + 2 * t  # x, source, position table; the mask grid; tokens
                + t * max(d, t) + t  # the Learn panel's target (T × d_model or T × S) and its rows
                + 4 * d * dh + 3 * dh * dh + dh  # one head's W_Q, W_K, W_V, W_O rows and score weights
                + 2 * d * ff + ff + 5 * d + 100)  # the first block's FFN and LayerNorms; settings

    @property
    def max_numbers(self) -> int:
        """The most numbers one valid state holds: inputs, every weight, a loss's target."""
        h, d, t, dh, ff = self.max_heads, self.max_d_model, self.max_tokens, self.max_d_head, self.max_d_ff
        return (3 * t * d + t * t  # x, context, position table, mask
                + t * max(d, t)  # a loss's target: T × d_model, or T × S
                + 3 * h * d * dh + h * dh * d  # W_Q, W_K, W_V, W_O
                + 3 * h * dh * dh + h * dh  # W_a, W₁, W₂, v_a
                + 2 * d * ff + ff + 5 * d)  # the first block's FFN and LayerNorms

    @property
    def max_body_bytes(self) -> int:
        """The largest valid JSON request, with room to spare: 32 bytes a number plus 64 KiB."""
        return self.max_numbers * 32 + 64 * 1024

    @property
    def max_state_bytes(self) -> int:
        """The largest state as the page's query string (a permalink, a pin, a class's room): 48 bytes a
        number (an edit is its name, head, row and column, then up to 24 digits) plus 64 KiB."""
        return self.max_numbers * 48 + 64 * 1024

    @property
    def frame_origins(self) -> tuple[str, ...]:
        """The origins of embed_origins, one by one."""
        return tuple(self.embed_origins.split())

    @field_validator("embed_origins")
    @classmethod
    def _origins(cls, value: str) -> str:
        """Each origin checked and written one way (https://moodle.example.edu:8443), one space between them: a
        path, a wildcard or a missing scheme would make the frame policy other than the one meant."""
        origins = []
        for given in value.replace(",", " ").split():
            parts = urlsplit(given)
            try:
                port = parts.port
            except ValueError:
                port = -1
            host = parts.hostname or ""
            if (parts.scheme not in ("http", "https") or not HOST_NAME.fullmatch(host) or port == -1
                    or parts.username is not None or parts.path not in ("", "/") or any(c in given for c in "?#")):
                raise ValueError(f"{given!r} is not an origin: write scheme://host[:port], such as "
                                 "https://moodle.example.edu")
            host = f"[{host}]" if ":" in host else host  # an IPv6 address keeps its brackets
            origins.append(f"{parts.scheme}://{host}{'' if port is None else f':{port}'}")
        return " ".join(dict.fromkeys(origins))

    @field_validator("root_path")
    @classmethod
    def _one_leading_slash(cls, value: str) -> str:
        """One form for a sub-path: "attention/", "/attention/" and "/attention" give "/attention"; "/" gives ""."""
        value = value.strip().strip("/")
        if any(c in value for c in "?#\\ ") or "//" in value:
            raise ValueError("a root path is a plain URL path such as /attention")
        return f"/{value}" if value else ""


settings = Settings()

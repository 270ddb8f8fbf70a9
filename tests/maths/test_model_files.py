"""The model is read once per process even when its first readers come together: the app's start reads it in
a thread while the first POST /api/model may already be asking for it."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

import app.maths.model_files as model_files


@pytest.fixture
def slow_reads(monkeypatch: pytest.MonkeyPatch) -> Iterator[list[Path]]:
    reads: list[Path] = []

    def read(path: Path) -> object:
        reads.append(path)
        time.sleep(0.2)  # as a real read takes about a second
        return object()

    monkeypatch.setattr(model_files, "read_model_files", read)
    monkeypatch.setattr(model_files, "model_zip", lambda: Path("model.zip"))
    model_files._read_once.cache_clear()
    yield reads
    model_files._read_once.cache_clear()  # the next test reads the real files again


def test_readers_that_come_together_share_one_read(slow_reads: list[Path]) -> None:
    got: list[object] = []
    threads = [threading.Thread(target=lambda: got.append(model_files.load_model_files())) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=10)
    assert len(slow_reads) == 1
    assert len(got) == 3 and got[0] is got[1] is got[2]

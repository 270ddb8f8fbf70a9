"""The benchmark still runs and reports well-formed tables. No assertion here is about time."""

from __future__ import annotations

import asyncio
import re
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

from bench.cases import Case, edited
from bench.class_move import move_class
from bench.classroom import follow_class
from bench.load import class_load
from bench.report import DOCS_BEGIN, DOCS_END, Results, goals, table
from bench.timing import fit_quadratic, quadratic_takes_over

pytestmark = pytest.mark.server

REPO_ROOT = Path(__file__).resolve().parent.parent
VERDICTS = {"**met**", "**NOT met**", "not measured"}


def tables(markdown: str) -> list[list[list[str]]]:
    """Every markdown table in the text, as rows of cells (the header first, the separator dropped)."""
    found, current = [], []
    for line in [*markdown.splitlines(), ""]:
        if line.startswith("|"):
            current.append([c.strip() for c in re.split(r"(?<!\\)\|", line.strip())[1:-1]])
        elif current:
            found.append(current)
            current = []
    for t in found:
        assert all(re.fullmatch(r"-{3,}:?", c) for c in t[1]), f"no separator row under {t[0]}"
        del t[1]
    return found


@pytest.fixture(scope="module")
def quick_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[subprocess.CompletedProcess[str], str, str]:
    """`python -m bench --quick` once: its output, the results file and a docs page it updated."""
    tmp = tmp_path_factory.mktemp("bench")
    readme = tmp / "README.md"
    readme.write_text(f"# Title\n\nbefore\n\n{DOCS_BEGIN}\nold figures\n{DOCS_END}\n\nafter\n")
    out = tmp / "RESULTS.md"
    # --no-model: the real models' benches have tests of their own (below), run without transformers
    proc = subprocess.run([sys.executable, "-m", "bench", "--quick", "--no-model", "--out", str(out), "--docs",
                           str(readme)], cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return proc, out.read_text(), readme.read_text()


@pytest.mark.slow
def test_quick_bench_prints_what_it_writes(quick_run: tuple[subprocess.CompletedProcess[str], str, str]) -> None:
    proc, results, _ = quick_run
    assert results.startswith("# Benchmark results")
    assert results.strip() in proc.stdout


@pytest.mark.slow
def test_quick_bench_tables_are_well_formed(quick_run: tuple[subprocess.CompletedProcess[str], str, str]) -> None:
    _, results, _ = quick_run
    found = tables(results)
    assert len(found) >= 9  # goals, cost, stages, growth with T, large API requests, first page, class load, mixed,
    # a class following its teacher
    for t in found:
        assert len(t) >= 2, f"an empty table: {t[0]}"
        assert all(len(row) == len(t[0]) for row in t), f"ragged table under {t[0]}"
    by_header = {tuple(t[0][:2]): t for t in found}
    goal_rows = by_header["goal", "target"][1:]
    assert len(goal_rows) == 12
    assert {row[3] for row in goal_rows} <= VERDICTS
    cost = by_header["case", "/healthz ms"]
    assert cost[0][:3] == ["case", "/healthz ms", "API ms"]
    assert cost[1][0].startswith("default preset")
    for row in cost[1:]:
        assert all(float(v) > 0 for v in (row[1], row[2], row[4], row[6]))  # medians of real requests
        assert all(v.endswith("×") and float(v[:-1]) > 0 for v in (row[3], row[5], row[7], row[8]))
    stages = by_header["case", "stage in view"]
    assert [row[1] for row in stages[1:]] == ["x", "qkv", "scores", "scaled", "mask", "softmax", "output", "multihead"]
    growth = by_header["T", "/healthz ms"]
    assert [int(row[0]) for row in growth[1:]] == [4, 8, 12]
    api = by_header["POST /api/attention", "ms"]
    assert api[1][0].startswith("default preset") and len(api) >= 3
    assert all(float(row[1]) > 0 and row[3].endswith("×") for row in api[1:])
    page = by_header["resource", "KB"]
    assert page[1][0] == "/" and any("htmx" in row[0] for row in page)
    load = by_header["students", "edits/s offered"]
    assert load[1][0] == "5"
    assert int(load[1][3]) > 0  # requests were sent
    assert re.fullmatch(r"\d+( \(.*\))?", load[1][4])  # an error count
    mixed = by_header["students", "heavy clients"]
    assert mixed[1][:2] == ["5", "1"]
    assert re.fullmatch(r"\d+( \(.*\))?", mixed[1][3]) and re.fullmatch(r"\d+( \(.*\))?", mixed[1][10])
    assert float(mixed[1][9]) > 0  # heavy requests were answered
    following = by_header["students", "store"]
    assert [row[:3] for row in following[1:]][0] == ["5", "memory", "3"]
    assert {row[1] for row in following[1:]} <= {"memory", "redis, 2 servers"}
    for row in following[1:]:
        assert all(float(v) > 0 for v in row[3:10])  # every step reached every student, and was timed
        assert row[12] == "0"  # no errors, no student missed a step


@pytest.mark.slow
def test_quick_bench_rewrites_only_the_docs_block(quick_run: tuple[subprocess.CompletedProcess[str], str, str]) -> None:
    _, _, readme = quick_run
    assert readme.startswith("# Title\n\nbefore\n\n" + DOCS_BEGIN)
    assert readme.endswith(DOCS_END + "\n\nafter\n")
    assert "old figures" not in readme
    block = readme.split(DOCS_BEGIN)[1].split(DOCS_END)[0]
    assert "| goal |" in block and "| students |" in block
    assert "| POST /api/attention |" in block and "| heavy clients |" in block
    assert "| students | store |" in block


def test_fit_recovers_a_known_curve() -> None:
    t = np.array([4, 8, 16, 24, 32, 48, 64], dtype=float)
    a, b, c = fit_quadratic(t, 3.0 + 0.5 * t + 0.01 * t * t)
    assert (a, b, c) == pytest.approx((3.0, 0.5, 0.01))


def test_fit_keeps_every_term_non_negative() -> None:
    t = np.array([4, 8, 16, 24, 32, 48, 64], dtype=float)
    coef = fit_quadratic(t, 10.0 - 0.1 * t + 0.01 * t * t)
    assert min(coef) >= 0 and coef[2] > 0


def test_quadratic_takes_over_where_it_equals_the_rest() -> None:
    assert quadratic_takes_over(100.0, 0.0, 1.0) == pytest.approx(10.0)
    assert quadratic_takes_over(0.0, 4.0, 0.5) == pytest.approx(8.0)
    assert quadratic_takes_over(5.0, 1.0, 0.0) is None


def test_an_edit_changes_one_x_cell_and_the_stage() -> None:
    form = Case(3, 2, 1).seed_form()
    form["token-0"], form["stage"] = "the", "x"
    changed = {k for k in form if edited(form, 4)[k] != form[k]}
    assert changed <= {"stage"} | {f"x-{i}-{j}" for i in range(3) for j in range(2)}
    assert len(changed - {"stage"}) == 1
    assert edited(form, 4)["stage"] == "softmax"
    assert edited(form, 4, show_all=True)["show_all"] == "on"


def test_goals_not_measured_say_so() -> None:
    assert {g.met for g in goals(Results("here"))} == {None}


def test_table_escapes_pipes_and_keeps_columns() -> None:
    rows = tables(table(["a", "b"], [["x|y", 1.5]]))[0]
    assert rows == [["a", "b"], ["x\\|y", "1.5"]]


def test_class_load_refuses_other_hosts() -> None:
    with pytest.raises(ValueError, match="loopback"):
        asyncio.run(class_load("http://192.0.2.1:8000", students=1, seconds=0.1))
    with pytest.raises(ValueError, match="loopback"):
        asyncio.run(follow_class(["http://192.0.2.1:8000"], students=1, steps=1))
    with pytest.raises(ValueError, match="loopback"):
        asyncio.run(move_class("http://192.0.2.1:8000", students=1, moves=1))


@pytest.mark.slow
def test_the_trust_bench_runs_and_reports_every_heavy_request() -> None:
    proc = subprocess.run([sys.executable, "-m", "bench.trust", "--quick"], cwd=REPO_ROOT, capture_output=True,
                          text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    rows, bombs = tables(proc.stdout)
    assert rows[0][0] == "heavy request"
    assert [r[0] for r in rows[1:-1]] == ["costliest page (POST /stages)", "export of the whole run (POST /export)",
                                          "100 training steps (POST /, learn-bank)",
                                          "a pin that inflates to 64 MB (POST /stages)"]
    assert rows[-1][0].startswith("mixed abuse: 1 clients, each looping on all of the above")
    assert all(re.fullmatch(r"\*\*\d+\.\d\d×\*\* \((met|NOT met)\)", r[4]) for r in rows[1:])
    assert "422" in rows[-2][1] and "200" in rows[-1][1]  # the bomb is refused, every time
    assert [b[1] for b in bombs[1:]] == ["quiet", "under the mixed abuse"]
    assert all(b[2] == "10× 422" and re.fullmatch(r"\*\*(met|NOT met)\*\*", b[5]) for b in bombs[1:])
    assert re.search(r"Resident memory: the worker \d+ MB at start", proc.stdout)


@pytest.mark.slow
def test_the_model_bench_runs_and_says_how_to_measure_hugging_face(tmp_path: Path) -> None:
    missing = tmp_path / "no-venv" / "python"  # the baseline's venv absent, as on a fresh machine
    proc = subprocess.run([sys.executable, "-m", "bench.model", "--quick", "--hf-python", str(missing)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=180)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rows,) = tables(proc.stdout)
    assert rows[0] == ["measure", "value", "ratio", "goal", "verdict"]
    by_name = {row[0]: row for row in rows[1:]}
    ours = by_name["POST /api/model, no compression (as curl)"]
    assert ours[1].endswith(" ms") and float(ours[1][:-3]) > 0 and ours[4] == "not measured"
    assert by_name["time to healthy (start → /healthz 200)"][4] in VERDICTS
    assert float(by_name["worker's resident memory after the first /api/model"][1][:-3]) > 0
    assert f"{missing} is missing" in proc.stdout and "pip install torch" in proc.stdout


@pytest.mark.slow
def test_the_decoder_bench_runs_and_says_how_to_measure_hugging_face(tmp_path: Path) -> None:
    missing = tmp_path / "no-venv" / "python"  # the baseline's venv absent, as on a fresh machine
    proc = subprocess.run([sys.executable, "-m", "bench.decoder", "--quick", "--hf-python", str(missing)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rows,) = tables(proc.stdout)
    assert rows[0] == ["measure", "value", "ratio", "goal", "verdict"]
    by_name = {row[0]: row for row in rows[1:]}
    forward = by_name["run_decoder, in process (a)"]
    assert forward[1].endswith(" ms") and float(forward[1][:-3]) > 0 and forward[4] == "not measured"
    assert {row[4] for row in rows[1:]} <= VERDICTS | {""}
    assert float(by_name["worker's VmRSS, both models loaded"][1][:-3]) > 0
    assert f"{missing} is missing" in proc.stdout and "pip install torch" in proc.stdout


@pytest.mark.slow
def test_the_translate_bench_runs_and_writes_its_own_block(tmp_path: Path) -> None:
    from bench.translate import MARKERS

    page = tmp_path / "performance.md"
    page.write_text(f"before\n{MARKERS[0]}\nold figures\n{MARKERS[1]}\nafter\n")
    proc = subprocess.run([sys.executable, "-m", "bench.translate", "--quick", "--docs", str(page)], cwd=REPO_ROOT,
                          capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    (rows,) = tables(proc.stdout)
    assert rows[0] == ["measure", "value", "ratio", "goal", "verdict"]
    by_name = {row[0]: row for row in rows[1:]}
    api = by_name["POST /api/translate, no compression (as curl)"]
    assert api[1].endswith(" ms") and float(api[1][:-3]) > 0 and api[2].endswith("× native")
    assert api[3] == "≤ 10×" and api[4] in VERDICTS - {"not measured"}
    assert float(by_name["the native engine (fast_translate._native), in process"][1][:-3]) > 0
    assert {row[4] for row in rows[1:]} <= VERDICTS | {""}
    assert "not measured" not in {row[4] for row in rows[1:]}
    assert float(by_name["… after every timed request"][1][:-3]) > 0
    assert "The same translation as the native engine: POST /api/translate 2 of 2" in proc.stdout
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old figures" not in text
    assert "Measured by `python -m bench.translate --quick`" in text
    assert tables(text) == [rows]


def test_the_faults_block_is_written_between_its_own_markers(tmp_path: Path) -> None:
    from bench.faults import DOCS_BEGIN as FAULTS_BEGIN
    from bench.faults import DOCS_END as FAULTS_END
    from bench.faults import FaultResult, docs_block, write_docs

    results = [FaultResult("an app server SIGKILLed", 2, back_s=[0.5, 3.5], teacher_status=200, predictions_kept=2,
                           predictions_sent=2, teacher_key=True, checks={"serves again": "ok"})]
    page = tmp_path / "performance.md"
    page.write_text(f"before\n{FAULTS_BEGIN}\nold figures\n{FAULTS_END}\nafter\n{DOCS_BEGIN}\nkept\n{DOCS_END}\n")
    assert write_docs(page, docs_block(results, "python -m bench.faults --students 2"))
    text = page.read_text()
    assert text.startswith("before\n") and "after\n" in text and "kept" in text and "old figures" not in text
    assert "a check failed" in text  # a student back after 3.5 s misses the goal
    assert "Repeat: `python -m bench.faults --students 2`" in text
    [found] = tables(text)
    assert found[0][:6] == ["fault", "students", "back p50 s", "back p95 s", "back max s", "within 3 s"]
    assert found[1][4:6] == ["3.50", "1 of 2"]
    plain = tmp_path / "plain.md"
    plain.write_text("no markers\n")
    assert not write_docs(plain, docs_block(results, "python -m bench.faults"))
    assert plain.read_text() == "no markers\n"


@pytest.mark.slow
def test_the_hall_bench_runs_and_writes_its_own_block(tmp_path: Path) -> None:
    from bench.hall import HEADER, MARKERS

    page = tmp_path / "performance.md"
    page.write_text(f"before\n{MARKERS[0]}\nold figures\n{MARKERS[1]}\nafter\n")
    proc = subprocess.run([sys.executable, "-m", "bench.hall", "--students", "6", "--docs", str(page)],
                          cwd=REPO_ROOT, capture_output=True, text=True, timeout=600)
    assert proc.returncode == 0, proc.stderr[-3000:]
    text = page.read_text()
    assert text.startswith("before\n") and text.endswith("after\n") and "old figures" not in text
    [rows] = tables(text)
    assert rows[0] == HEADER
    assert [row[0] for row in rows[1:]] == ["6 × one link: /decoder", "6 × one link: /model",
                                            "6 × one link: /embed/decoder", "6 × one link: /embed/model",
                                            "6 × own sentence: /decoder"]
    assert all(row[1] == "6/6" for row in rows[1:])  # every student got the model's answer
    assert "resident memory" in text

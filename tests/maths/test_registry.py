"""The shelf of real models (app.maths.registry): every spec checked the same way, so that a fourth model's spec is
held to what the three are. Its package pinned with its hashes, its licence shipped, its files installed, its
sizes its config's; and its shared interface's numbers recomputed: a text's pieces, every head's rows summing to
1, and one head's softmax and output worked again from its own q, k and v."""

from __future__ import annotations

import importlib
import inspect
import math
import re
from pathlib import Path

import numpy as np
import pytest

from app.maths.installed import installed_file
from app.maths.real_model import Tokenized
from app.maths.registry import REGISTRY, ModelSpec

ROOT = Path(__file__).resolve().parents[2]
SPECS = list(REGISTRY.values())
TEXT = "The bank of the river was muddy."
MODEL_MODULES = ("app.maths.bert", "app.maths.llama", "app.maths.marian", "app.maths.model_files",
                 "app.maths.decoder_files", "app.maths.marian_files")
# Names the model modules share on purpose, each meaning one thing (app.maths.real_model): the interface's, and
# the once-per-process read behind each load_*_files.
SHARED_NAMES = {"tokenize", "layer_attention_run", "_read_once"}
LICENCE_NAMES = {"Apache-2.0": "Apache License", "MPL-2.0": "Mozilla Public License 2.0"}


def test_the_shelf_holds_the_three_real_models_each_of_its_kind() -> None:
    assert {s.key: s.kind for s in SPECS} == {"encoder": "encoder", "decoder": "decoder",
                                                "translator": "encoder-decoder"}
    assert len({s.page for s in SPECS}) == len({s.route for s in SPECS}) == len({s.button for s in SPECS}) == 3


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.key)
def test_a_specs_package_is_pinned_with_its_hashes_and_its_licence_and_files_ship(spec: ModelSpec) -> None:
    for lock in ("requirements.lock", "requirements-test.lock"):
        text = (ROOT / lock).read_text()
        pinned = re.search(rf"^{re.escape(spec.package)}==[\w.]+ \\\n\s+--hash=sha256:[0-9a-f]{{64}}", text, re.M)
        assert pinned, f"{spec.package} is not pinned with its hashes in {lock}"
    folder = ROOT / "docs" / "licences" / spec.licence_folder
    assert (folder / "README.md").is_file(), f"{spec.key}: no README in {folder}"
    text = "".join(p.read_text() for p in folder.iterdir())
    assert spec.licence in text or LICENCE_NAMES[spec.licence] in text, f"{folder} does not state {spec.licence}"
    for path in spec.files:
        assert installed_file(spec.package, path).stat().st_size > 0


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: s.key)
def test_a_specs_sizes_are_its_configs(spec: ModelSpec) -> None:
    cfg = spec.config
    assert spec.heads == cfg.heads and spec.d_model == cfg.d_model and spec.d_k == cfg.d_k
    assert spec.d_model == spec.heads * spec.d_k
    assert spec.layers == getattr(cfg, "layers", getattr(cfg, "decoder_layers", None))
    assert spec.max_pieces > 0


@pytest.fixture(scope="module", params=SPECS, ids=lambda s: s.key)
def read(request: pytest.FixtureRequest) -> tuple[ModelSpec, object, object]:
    spec = request.param
    files = spec.read()
    return spec, files, spec.run(files, TEXT)


def test_the_interface_tokenizes_into_pieces_and_ids(read) -> None:
    spec, files, _ = read
    t = spec.tokenize(files, TEXT)
    assert isinstance(t, Tokenized) and t.text == TEXT
    assert t.ids.dtype == np.int64 and len(t.ids) == len(t.tokens) > 4
    assert any("bank" in piece.lower() for piece in t.tokens)


def test_the_interface_gives_every_heads_rows_summing_to_one(read) -> None:
    spec, files, run = read
    a = spec.attention(run)  # (layers, heads, T, S)
    assert a.shape[:2] == (spec.layers, spec.heads)
    assert a.shape[3] == len(spec.tokenize(files, TEXT).ids)
    np.testing.assert_allclose(a.sum(axis=-1), 1.0, atol=1e-5)
    assert (a >= 0).all()


@pytest.mark.parametrize("where", [(0, 0), (-1, -1)], ids=["first head", "last head"])
def test_the_interface_steps_one_head_through_and_its_numbers_work_again(read, where: tuple[int, int]) -> None:
    spec, files, run = read
    layer, head = where[0] % spec.layers, where[1] % spec.heads
    h = spec.head(files, run, layer, head)
    q = h.q_rot if h.q_rot is not None else h.q  # RoPE turns q and k before the product
    k = h.k_rot if h.k_rot is not None else h.k
    q64, k64, v64 = (np.asarray(m, dtype=np.float64) for m in (q, k, h.v))
    scores = q64 @ k64.T  # (T, S)
    np.testing.assert_allclose(h.scores, scores, atol=1e-4 * max(1.0, np.abs(scores).max()))
    np.testing.assert_allclose(h.scaled, h.scores / math.sqrt(spec.d_k), rtol=1e-5, atol=1e-6)
    masked = np.where(np.isneginf(h.masked), -np.inf, np.asarray(h.scaled, dtype=np.float64))
    e = np.exp(masked - masked.max(axis=-1, keepdims=True))
    softmax = e / e.sum(axis=-1, keepdims=True)
    np.testing.assert_allclose(h.softmax, softmax, atol=1e-5)
    np.testing.assert_allclose(h.output, softmax @ v64, atol=1e-5 * max(1.0, np.abs(v64).max()))
    np.testing.assert_allclose(h.softmax, spec.attention(run)[layer, head], atol=1e-5)  # the grid's own map


def test_no_two_model_modules_give_one_name_to_different_things() -> None:
    owners: dict[str, list[str]] = {}
    for name in MODEL_MODULES:
        module = importlib.import_module(name)
        for attr, value in vars(module).items():
            if (inspect.isfunction(value) or inspect.isclass(value)) and value.__module__ == name:
                owners.setdefault(attr, []).append(name)
    shared = {attr for attr, where in owners.items() if len(where) > 1}
    assert shared <= SHARED_NAMES, f"one name, several things: {shared - SHARED_NAMES}"
    for attr in ("tokenize",):  # the interface's: one meaning, one return type
        for name in MODEL_MODULES[:3]:
            assert inspect.signature(getattr(importlib.import_module(name), attr)).return_annotation == "Tokenized"

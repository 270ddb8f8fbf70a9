"""app.web.json_encoding: the same numbers as json.dumps of the lists, masked entries null, NaN refused."""

from __future__ import annotations

import json
import math

import numpy as np
import pytest

from app.web import json_encoding
from app.web.json_encoding import NotFinite, dumps


def as_lists(doc: object) -> object:
    """The document as json.dumps takes it: arrays as nested lists, masked entries None."""
    if isinstance(doc, dict):
        return {k: as_lists(v) for k, v in doc.items()}
    if isinstance(doc, list | tuple):
        return [as_lists(v) for v in doc]
    if isinstance(doc, np.ma.MaskedArray):
        return np.where(doc.mask, None, doc.data).tolist()
    return doc.tolist() if isinstance(doc, np.ndarray | np.generic) else doc


def bits(values: object) -> np.ndarray:
    return np.asarray(values, dtype=np.float64).view(np.int64)


def test_every_double_reads_back_as_itself() -> None:
    rng = np.random.default_rng(0)
    x = np.concatenate([
        rng.standard_normal(20_000) * 10.0 ** rng.integers(-300, 300, 20_000),  # every magnitude
        rng.uniform(-1000, 1000, 20_000),  # the inputs' range
        [0.0, -0.0, 5e-324, -5e-324, 2.2250738585072014e-308, 1.7976931348623157e308, 1e-5, 1e16, 0.1 + 0.2],
    ])
    back = json.loads(dumps(x))
    np.testing.assert_array_equal(bits(back), bits(x))


def test_a_document_reads_back_as_json_dumps_writes_it() -> None:
    rng = np.random.default_rng(1)
    scores = rng.standard_normal((3, 4))  # (T, S)
    mask = np.triu(np.ones((3, 4), dtype=bool), k=1)
    doc = {
        "tokens": ["the", "cat", '"quoted"<b>', "ünï"],
        "x": rng.standard_normal((4, 2)),
        "transposed": rng.standard_normal((2, 3)).T,  # not C-contiguous
        "every_other": np.arange(10.0)[::2],
        "empty": np.zeros((0, 3)),
        "mask": mask,
        "scaled": np.ma.masked_array(scores, mask),
        "heads": [{"q": rng.standard_normal((2, 2)), "linear": None}, {"q": rng.standard_normal((2, 2))}],
        "num_heads": 2, "scale": True, "temperature": 0.5, "window": None, "losses": [1.5, 0.25, 0.0],
        "scale_factor": np.float64(1.4142135623730951),
    }
    text = dumps(doc)
    assert b" " not in text  # compact
    assert json.loads(text) == as_lists(doc)
    assert list(json.loads(text)) == list(doc)  # the fields in the document's order


def test_masked_entries_are_null_and_the_rest_exact() -> None:
    scaled = np.array([[0.5, -1.25], [3.0, 2.0]])
    mask = np.array([[False, True], [False, False]])
    assert json.loads(dumps({"scaled": np.ma.masked_array(scaled, mask)})) == {"scaled": [[0.5, None], [3.0, 2.0]]}


def test_a_masked_entry_may_hold_anything() -> None:
    masked = np.ma.masked_array(np.array([[1.0, np.inf]]), np.array([[False, True]]))
    assert json.loads(dumps(masked)) == [[1.0, None]]


@pytest.mark.parametrize("bad", [math.nan, math.inf, -math.inf])
def test_a_number_that_is_not_finite_is_refused_naming_its_place(bad: float) -> None:
    grads = np.zeros((2, 2))
    grads[1, 0] = bad
    with pytest.raises(NotFinite) as caught:
        dumps({"loss": 0.5, "gradients": {"heads": [{"q": np.zeros(2)}, {"q": grads}]}})
    assert caught.value.path == "gradients.heads[1].q"


@pytest.mark.parametrize("doc", [
    {"loss": math.nan},
    {"losses": [0.5, math.inf]},
    {"scale_factor": np.float64(np.nan)},
    {"scaled": np.ma.masked_array(np.array([[np.nan, 1.0]]), np.array([[False, True]]))},
], ids=["scalar", "list", "numpy scalar", "unmasked entry"])
def test_nan_never_reaches_json(doc: dict) -> None:
    with pytest.raises(NotFinite) as caught:
        dumps(doc)
    assert caught.value.path == next(iter(doc))


def test_a_large_document_lets_go_of_the_gil_and_a_small_one_never(monkeypatch: pytest.MonkeyPatch) -> None:
    yields: list[None] = []
    monkeypatch.setattr(json_encoding, "let_go", lambda: yields.append(None))
    small = {"x": np.full((5, 3), 0.123456789), "heads": [{"q": np.ones((5, 3))}]}
    dumps(small)
    assert yields == []
    large = {"blocks": [{"h": np.random.default_rng(i).standard_normal((64, 256))} for i in range(8)]}
    assert len(dumps(large)) > 8 * json_encoding.YIELD_BYTES  # about 320 KB an array
    assert yields == [None] * 8  # once after each array, which passes YIELD_BYTES alone

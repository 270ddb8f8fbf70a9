"""Properties of app.maths.attention over every valid input, checked by Hypothesis.

Valid means what the API accepts: any sizes within app.config's bounds (kept small here, the
properties do not depend on size), every number finite with |value| <= 1000, any option. The
example counts come from the Hypothesis profile loaded in tests/conftest.py.
"""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Iterator
from typing import Any

import numpy as np
from hypothesis import assume, example, given, settings
from hypothesis import strategies as st
from hypothesis.extra import numpy as hnp

from app.config import settings as bounds
from app.maths.attention import (
    ATTENTION_MODES,
    SCORE_FUNCTIONS,
    attend,
    linear_attention,
    masked_softmax,
    run_attention,
    softmax_rows,
)
from app.maths.blocks import ACTIVATIONS, NORM_PLACEMENTS, run_transformer
from app.maths.masks import build_mask, causal_mask, default_window
from app.maths.records import AttentionRun, TransformerRun
from app.maths.weights import block_weight_shapes, weight_shapes
from tests.maths.test_attention import reference_multihead

LIMIT = bounds.max_abs_value
# Any number the API accepts, with its extremes drawn often: products of them are where overflow,
# underflow and cancellation would show.
ANY_VALUE = st.one_of(
    st.floats(-LIMIT, LIMIT, allow_nan=False, allow_infinity=False),
    st.sampled_from([-LIMIT, LIMIT, 0.0, 1e-300, -1e-300]),
)
# Numbers of a lesson's size, where comparisons at 1e-9 are meaningful.
MODERATE = st.floats(-4.0, 4.0, allow_nan=False, allow_infinity=False)
SIZE = st.integers(1, 5)


def slower(fraction: float) -> settings:
    """A share of the profile's example budget, for properties that run a whole pipeline per example."""
    return settings(max_examples=max(5, int(settings.default.max_examples * fraction)))


def matrices(rows: int, cols: int, elements: st.SearchStrategy[float] = MODERATE) -> st.SearchStrategy[np.ndarray]:
    return hnp.arrays(np.float64, (rows, cols), elements=elements)


@st.composite
def visible_masks(draw: st.DrawFn, t: int, s: int) -> np.ndarray:
    """A (T, S) boolean mask, True = hidden, that leaves every query at least one key."""
    hidden = draw(hnp.arrays(np.bool_, (t, s)))
    for i in range(t):
        if hidden[i].all():
            hidden[i, draw(st.integers(0, s - 1))] = False
    return hidden


@st.composite
def configurations(draw: st.DrawFn, elements: st.SearchStrategy[float] = ANY_VALUE) -> dict[str, Any]:
    """run_attention's (or run_transformer's) keyword arguments: any valid sizes, values and options."""
    t, d_model, h = draw(SIZE), draw(SIZE), draw(st.integers(1, 3))
    d_k, d_v = draw(st.integers(1, 4)), draw(st.integers(1, 4))
    cross = draw(st.booleans())
    s = draw(SIZE) if cross else t
    config: dict[str, Any] = {
        "x": draw(matrices(t, d_model, elements)),
        "num_heads": h, "d_k": d_k, "d_v": d_v,
        "seed": draw(st.integers(0, bounds.max_seed)),
        "scale": draw(st.booleans()),
        "temperature": draw(st.floats(0.05, 20.0)),
        "score": draw(st.sampled_from(SCORE_FUNCTIONS)),
        "attention": draw(st.sampled_from(ATTENTION_MODES)),
        "positional_encoding": draw(st.sampled_from(("none", "sinusoidal", "learned", "rope", "alibi"))),
        "context": draw(matrices(s, d_model, elements)) if cross else None,
    }
    mask = draw(st.sampled_from(("none", "causal", "local", "strided", "explicit")))
    config["mask"] = draw(visible_masks(t, s)) if mask == "explicit" else mask
    if mask in ("local", "strided"):
        config["window"] = draw(st.none() | st.integers(1, bounds.max_tokens))
        # Valid only if every query keeps a key (a local window can miss a short source): the API refuses others.
        hidden = build_mask(mask, t, s, config["window"] or default_window(mask, s))
        assume(not hidden.all(axis=1).any())
    if config["positional_encoding"] == "learned" and draw(st.booleans()):
        config["position_table"] = draw(matrices(max(t, s) + draw(st.integers(0, 2)), d_model, elements))
    if draw(st.booleans()):  # given weights, at the value bounds too; otherwise drawn from the seed
        config["weights"] = {name: draw(hnp.arrays(np.float64, shape, elements=elements))
                             for name, shape in weight_shapes(d_model, h, d_k, d_v).items()}
    return config


@st.composite
def stacks(draw: st.DrawFn, d_model: int, elements: st.SearchStrategy[float] = ANY_VALUE) -> dict[str, Any]:
    """run_transformer's own options: blocks, d_ff, activation, norm, and perhaps the first block's weights."""
    d_ff = draw(st.integers(1, 6))
    stack: dict[str, Any] = {"blocks": draw(st.integers(1, 2)), "d_ff": d_ff,
                             "activation": draw(st.sampled_from(ACTIVATIONS)),
                             "norm": draw(st.sampled_from(NORM_PLACEMENTS))}
    if draw(st.booleans()):
        stack["block_weights"] = {name: draw(hnp.arrays(np.float64, shape, elements=elements))
                                  for name, shape in block_weight_shapes(d_model, d_ff).items()}
    return stack


def run_any(config: dict[str, Any], stack: dict[str, Any] | None) -> tuple[AttentionRun, TransformerRun | None]:
    """The API's two paths: attention alone, or transformer blocks around it."""
    if stack is None:
        return run_attention(**config), None
    x = config.pop("x")
    transformer = run_transformer(x, **stack, **config)
    return transformer.blocks[0].attention, transformer


def arrays_in(record: object, path: str = "") -> Iterator[tuple[str, np.ndarray]]:
    """Every array in a pipeline record, with its path, walking nested records and tuples."""
    if isinstance(record, np.ndarray):
        yield path, record
    elif isinstance(record, tuple | list):
        for i, item in enumerate(record):
            yield from arrays_in(item, f"{path}[{i}]")
    elif dataclasses.is_dataclass(record):
        for f in dataclasses.fields(record):
            yield from arrays_in(getattr(record, f.name), f"{path}.{f.name}" if path else f.name)


# --- every output finite ----------------------------------------------------------------------------


@slower(2.0)
@given(configurations(), st.booleans(), st.data())
def test_every_output_is_finite(config: dict[str, Any], with_blocks: bool, data: st.DataObject) -> None:
    stack = data.draw(stacks(config["x"].shape[1])) if with_blocks else None
    first, transformer = run_any(config, stack)
    record = transformer if transformer is not None else first
    seen = 0
    for path, array in arrays_in(record):
        if path.endswith(".masked"):  # −∞ where hidden, by design; never sent or shown
            continue
        assert np.isfinite(array).all(), f"{path} is not finite"
        seen += 1
    assert seen >= 10


@settings(max_examples=10)
@given(st.integers(1, 4), st.sampled_from([-LIMIT, LIMIT]))
def test_linear_attention_survives_phi_underflowing_to_zero(t: int, sign: float) -> None:
    """q = x·W_Q reaches −10⁶ within the bounds, and φ(q) = exp(q) is then 0.0 in float64: the
    weights must still be a distribution (here uniform over identical keys), not 0/0."""
    x = np.full((t, 1), LIMIT)
    run = run_attention(x, weights={"w_q": np.array([[[-LIMIT]]]), "w_k": np.array([[[sign]]])},
                        attention="linear")
    lin = run.heads[0].linear
    assert lin is not None
    np.testing.assert_array_equal(lin.phi_q, np.zeros((t, 1)))  # the underflow itself
    np.testing.assert_allclose(lin.weights, np.full((t, t), 1.0 / t))
    np.testing.assert_allclose(run.heads[0].output, run.heads[0].v[[0] * t], rtol=1e-12)


@given(hnp.arrays(np.float64, st.tuples(SIZE, SIZE), elements=st.floats(-1e6, 1e6)),
       hnp.arrays(np.float64, st.tuples(SIZE, SIZE), elements=st.floats(-1e6, 1e6)), st.data())
def test_linear_attention_weights_are_a_distribution_for_any_q_and_k(q: np.ndarray, k: np.ndarray,
                                                                    data: st.DataObject) -> None:
    d = min(q.shape[1], k.shape[1])
    q, k = q[:, :d], k[:, :d]
    v = data.draw(matrices(k.shape[0], 2))
    mask = data.draw(st.none() | visible_masks(q.shape[0], k.shape[0]))
    lin = linear_attention(q, k, v, mask)
    assert np.isfinite(lin.weights).all() and np.isfinite(lin.output).all()
    assert (lin.weights >= 0).all()
    np.testing.assert_allclose(lin.weights.sum(axis=1), 1.0, rtol=1e-9)
    if mask is not None:
        assert (lin.weights[mask] == 0.0).all()
    np.testing.assert_allclose(lin.output, lin.weights @ v, rtol=1e-7, atol=1e-9)


# --- softmax: rows are distributions, shifting a row changes nothing ---------------------------------

SCORES = hnp.arrays(np.float64, st.tuples(SIZE, st.integers(1, 8)),
                    elements=st.floats(-1e300, 1e300, allow_nan=False, allow_infinity=False))


@given(SCORES)
@example(np.array([[1e300, -1e300, 0.0]]))
def test_softmax_rows_are_non_negative_and_sum_to_one(z: np.ndarray) -> None:
    a = softmax_rows(z)
    assert np.isfinite(a).all()
    assert (a >= 0).all() and (a <= 1).all()
    np.testing.assert_allclose(a.sum(axis=1), 1.0, rtol=1e-12)
    rows = np.arange(z.shape[0])
    np.testing.assert_array_equal(a[rows, z.argmax(axis=1)], a.max(axis=1))  # the largest score has the largest weight


@given(matrices(4, 6, st.floats(-1e3, 1e3)), hnp.arrays(np.float64, 4, elements=st.floats(-1e3, 1e3)))
def test_adding_a_constant_to_a_score_row_changes_nothing(z: np.ndarray, c: np.ndarray) -> None:
    np.testing.assert_allclose(softmax_rows(z + c[:, None]), softmax_rows(z), atol=1e-9)


@given(st.integers(1, 5), st.integers(1, 5), st.data())
def test_shifting_scaled_scores_leaves_weights_and_output_and_keeps_hidden_keys_at_zero(
    t: int, s: int, data: st.DataObject
) -> None:
    scores = data.draw(matrices(t, s, st.floats(-1e3, 1e3)))
    v = data.draw(matrices(s, 3))
    shift = data.draw(hnp.arrays(np.float64, t, elements=st.floats(-1e3, 1e3)))
    mask = data.draw(st.none() | visible_masks(t, s))
    divisor = data.draw(st.floats(0.05, 200.0))
    _, _, weights, output = attend(scores, v, divisor=divisor, mask=mask)
    _, _, shifted_weights, shifted_output = attend(scores + divisor * shift[:, None], v, divisor=divisor, mask=mask)
    np.testing.assert_allclose(shifted_weights, weights, atol=1e-9)
    np.testing.assert_allclose(shifted_output, output, atol=1e-8)
    if mask is not None:
        assert (shifted_weights[mask] == 0.0).all()


@given(st.integers(1, 5), st.integers(1, 6), st.data())
def test_masked_weights_are_the_softmax_of_the_visible_scores_alone(t: int, s: int, data: st.DataObject) -> None:
    scaled = data.draw(matrices(t, s, st.floats(-1e3, 1e3)))
    mask = data.draw(visible_masks(t, s))
    _, weights = masked_softmax(scaled, mask)
    assert (weights[mask] == 0.0).all()
    for i in range(t):
        seen = ~mask[i]
        np.testing.assert_allclose(weights[i, seen], softmax_rows(scaled[i, seen]), rtol=1e-12, atol=1e-15)


# --- permutations: without positions or a mask, attention does not know the order ------------------


@st.composite
def order_free_configurations(draw: st.DrawFn) -> dict[str, Any]:
    config = draw(configurations(MODERATE))
    config.update(mask="none", positional_encoding="none", temperature=draw(st.floats(0.5, 4.0)))
    config.pop("window", None)
    config.pop("position_table", None)
    if "weights" in config:  # lesson-sized weights, so outputs compare at 1e-9
        config["weights"] = {name: np.clip(w, -2.0, 2.0) for name, w in config["weights"].items()}
    return config


def assert_close(got: np.ndarray, want: np.ndarray, what: str) -> None:
    np.testing.assert_allclose(got, want, rtol=1e-9, atol=1e-9, err_msg=what)


@slower(1.0)
@given(order_free_configurations(), st.data())
def test_permuting_the_tokens_permutes_the_outputs(config: dict[str, Any], data: st.DataObject) -> None:
    t = config["x"].shape[0]
    p = np.array(data.draw(st.permutations(range(t))))
    cross = config["context"] is not None
    stack = data.draw(st.none() | stacks(config["x"].shape[1], MODERATE))
    first, transformer = run_any(dict(config), stack)
    moved, moved_transformer = run_any({**config, "x": config["x"][p]}, stack)
    for i, (a, b) in enumerate(zip(first.heads, moved.heads, strict=True)):
        assert_close(b.q, a.q[p], f"head {i} q")
        keys = slice(None) if cross else p  # cross-attention: the keys are the context, which stays
        assert_close(b.scores, a.scores[p][:, keys], f"head {i} scores")
        assert_close(b.softmax, a.softmax[p][:, keys], f"head {i} softmax")
        assert_close(b.output, a.output[p], f"head {i} output")
    assert_close(moved.concat, first.concat[p], "concat")
    assert_close(moved.output, first.output[p], "output")
    if transformer is not None and moved_transformer is not None:
        assert_close(moved_transformer.output, transformer.output[p], "the last block's output")


@slower(0.5)
@given(order_free_configurations(), st.data())
def test_permuting_the_source_in_cross_attention_changes_no_output(config: dict[str, Any],
                                                                  data: st.DataObject) -> None:
    if config["context"] is None:
        config["context"] = data.draw(matrices(data.draw(SIZE), config["x"].shape[1]))
    s = config["context"].shape[0]
    p = np.array(data.draw(st.permutations(range(s))))
    run = run_attention(**config)
    moved = run_attention(**{**config, "context": config["context"][p]})
    for a, b in zip(run.heads, moved.heads, strict=True):
        assert_close(b.softmax, a.softmax[:, p], "weights move with their keys")
    assert_close(moved.output, run.output, "output")


# --- the causal mask ---------------------------------------------------------------------------------


@slower(1.0)
@given(configurations(), st.booleans(), st.data())
def test_causal_weights_above_the_diagonal_are_exactly_zero(config: dict[str, Any], with_blocks: bool,
                                                           data: st.DataObject) -> None:
    config["mask"] = "causal"
    stack = data.draw(stacks(config["x"].shape[1])) if with_blocks else None
    first, transformer = run_any(config, stack)
    runs = [first] if transformer is None else [b.attention for b in transformer.blocks]
    t, s = first.heads[0].softmax.shape
    above = causal_mask(t, s)
    for run in runs:
        np.testing.assert_array_equal(run.mask, above)
        for head in run.heads:
            assert (head.softmax[above] == 0.0).all()
            np.testing.assert_allclose(head.softmax.sum(axis=1), 1.0, rtol=1e-12)
            if head.linear is not None:
                assert (head.linear.weights[above] == 0.0).all()
    assert all(head.softmax[0, 0] == 1.0 for head in first.heads)  # the first query sees only the first key


# --- multi-head is h independent heads ----------------------------------------------------------------


@given(SIZE, st.integers(1, 6), st.integers(1, 4), st.integers(1, 4), st.integers(1, 4), st.booleans(), st.data())
def test_multi_head_equals_a_per_head_loop(t: int, d_model: int, h: int, d_k: int, d_v: int, scale: bool,
                                           data: st.DataObject) -> None:
    x = data.draw(matrices(t, d_model))
    shapes = weight_shapes(d_model, h, d_k, d_v)
    w = {name: data.draw(hnp.arrays(np.float64, shapes[name], elements=st.floats(-2.0, 2.0)))
         for name in ("w_q", "w_k", "w_v", "w_o")}
    run = run_attention(x, num_heads=h, d_k=d_k, d_v=d_v, weights=w, scale=scale)
    heads, concat, output = reference_multihead(x, w["w_q"], w["w_k"], w["w_v"], w["w_o"], scale)
    for got, want in zip(run.heads, heads, strict=True):
        for name, value in want.items():
            np.testing.assert_allclose(getattr(got, name), value, rtol=1e-9, atol=1e-9, err_msg=name)
    np.testing.assert_allclose(run.concat, concat, rtol=1e-9, atol=1e-9)
    np.testing.assert_allclose(run.output, output, rtol=1e-9, atol=1e-9)
    assert run.scale_factor == (math.sqrt(d_k) if scale else 1.0)

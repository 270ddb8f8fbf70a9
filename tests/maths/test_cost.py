"""app.maths.cost: counts against a forward pass that counts what it actually does, a hand-written tiny case, the
paper's parameter numbers, the crossover's closed form, and linear attention's linear growth."""

from __future__ import annotations

import ast
import math
from collections import defaultdict
from collections.abc import Callable

import numpy as np
import pytest

from app.maths.attention import run_attention
from app.maths.cost import Cost, attention_cost, cost_growth, crossover

# --- an independent reference: do the work with loops and count every operation ---------------------


def elu(u: float) -> float:
    return u if u > 0 else math.expm1(u)


class Counter:
    """Counts multiply-adds done by naive matrix products and every other scalar operation."""

    def __init__(self) -> None:
        self.macs = 0
        self.ops = 0

    def matmul(self, a: np.ndarray, b: np.ndarray) -> np.ndarray:
        m, n = a.shape
        n2, p = b.shape
        assert n == n2
        out = np.zeros((m, p))
        for i in range(m):
            for j in range(p):
                acc = 0.0
                for k in range(n):
                    acc += a[i, k] * b[k, j]
                    self.macs += 1
                out[i, j] = acc
        return out

    def each(self, fn: Callable[..., float], *arrays: np.ndarray) -> np.ndarray:
        """fn applied to each entry (one operation per entry)."""
        flat = [np.asarray(a, dtype=float).ravel() for a in arrays]
        self.ops += flat[0].size
        return np.array([fn(*vals) for vals in zip(*flat, strict=True)]).reshape(np.shape(arrays[0]))

    def sum_rows(self, a: np.ndarray) -> np.ndarray:
        """Σⱼ a_ij with n − 1 additions per row."""
        out = []
        for row in a:
            acc = row[0]
            for v in row[1:]:
                acc += v
                self.ops += 1
            out.append(acc)
        return np.array(out)


def reference(
    x: np.ndarray, c: np.ndarray, *, h: int, d_k: int, d_v: int, score: str, d_a: int, attention: str,
    d_ff: int, blocks: int, seed: int = 0,
) -> tuple[dict[str, tuple[int, int]], np.ndarray]:
    """One layer with loops: {stage name: (MACs, elementwise ops)} and the layer's output."""
    rng = np.random.default_rng(seed)
    t, d_model = x.shape
    counters: dict[str, Counter] = defaultdict(Counter)
    heads = []
    for _ in range(h):
        w_q, w_k = rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_k))
        w_v = rng.normal(size=(d_model, d_v))
        q = counters["Q projection X·W_Q"].matmul(x, w_q)  # (T, d_k)
        k = counters["K projection C·W_K"].matmul(c, w_k)  # (S, d_k)
        v = counters["V projection C·W_V"].matmul(c, w_v)  # (S, d_v)
        if attention == "linear":
            phi = counters["φ(Q), φ(K) = elu + 1"]
            fq = phi.each(lambda u: u + 1, phi.each(elu, q))  # (T, d_k) two operations per entry
            fk = phi.each(lambda u: u + 1, phi.each(elu, k))  # (S, d_k)
            kv = counters["φ(K)ᵀ·V"].matmul(fk.T, v)  # (d_k, d_v)
            z = counters["Normaliser Σⱼ φ(kⱼ)"].sum_rows(fk.T)  # (d_k,)
            num = counters["Numerators φ(Q)·(φ(K)ᵀ·V)"].matmul(fq, kv)  # (T, d_v)
            den = counters["Denominators φ(Q)·Σφ(k)"].matmul(fq, z[:, None])  # (T, 1)
            heads.append(counters["Divide"].each(lambda a, b: a / b, num, np.broadcast_to(den, num.shape)))
            continue
        if score == "dot":
            scores = counters["Scores Q·Kᵀ"].matmul(q, k.T)  # (T, S)
            scores = counters["Scaling ÷ √d_k"].each(lambda u: u / math.sqrt(d_k), scores)
        elif score == "general":
            w = rng.normal(size=(d_k, d_k))
            qw = counters["General: Q·W"].matmul(q, w)  # (T, d_k)
            scores = counters["Scores (Q·W)·Kᵀ"].matmul(qw, k.T)  # (T, S)
            scores = counters["Scaling ÷ √d_k"].each(lambda u: u / math.sqrt(d_k), scores)
        else:
            w1, w2, va = rng.normal(size=(d_k, d_a)), rng.normal(size=(d_k, d_a)), rng.normal(size=(d_a, 1))
            a1 = counters["Additive: W₁·q"].matmul(q, w1)  # (T, d_a)
            a2 = counters["Additive: W₂·k"].matmul(k, w2)  # (S, d_a)
            pair = counters["Scores v_a·tanh(q_i·W₁ + k_j·W₂)"]
            scores = np.zeros((t, c.shape[0]))
            for i in range(t):
                for j in range(c.shape[0]):
                    hidden = pair.each(math.tanh, pair.each(lambda a, b: a + b, a1[i], a2[j]))  # (d_a,)
                    scores[i, j] = pair.matmul(hidden[None, :], va)[0, 0]
        soft = counters["Softmax (exp, sum, divide)"]
        e = soft.each(math.exp, scores)  # (T, S)
        total = soft.sum_rows(e)  # (T,)
        weights = soft.each(lambda a, b: a / b, e, np.broadcast_to(total[:, None], e.shape))
        heads.append(counters["A·V"].matmul(weights, v))  # (T, d_v)
    concat = np.concatenate(heads, axis=1)  # (T, h·d_v)
    out = counters["Concat·W_O"].matmul(concat, rng.normal(size=(h * d_v, d_model)))  # (T, d_model)
    if blocks:
        out = _add_norm(counters["Add & Norm 1"], x, out)
        ffn1, ffn2 = counters["FFN: X·W₁ + b₁, activation"], counters["FFN: ·W₂ + b₂"]
        hid = ffn1.matmul(out, rng.normal(size=(d_model, d_ff)))
        hid = ffn1.each(lambda a: max(a, 0.0), ffn1.each(lambda a: a + 0.1, hid))  # + b₁, ReLU
        y = ffn2.each(lambda a: a - 0.1, ffn2.matmul(hid, rng.normal(size=(d_ff, d_model))))  # + b₂
        out = _add_norm(counters["Add & Norm 2"], out, y)
    return {name: (ctr.macs, ctr.ops) for name, ctr in counters.items()}, out


def _add_norm(ctr: Counter, residual: np.ndarray, y: np.ndarray) -> np.ndarray:
    """LayerNorm(residual + y) with γ = 1, β = 0, operation by operation."""
    s = ctr.each(lambda a, b: a + b, residual, y)
    n = s.shape[1]
    rows = []
    for row in s:
        total = ctr.sum_rows(row[None, :])  # (1,)
        mean = ctr.each(lambda a: a / n, total)  # (1,)
        centred = ctr.each(lambda a, m: a - m, row, np.broadcast_to(mean, row.shape))
        var = ctr.each(lambda a: a / n, ctr.sum_rows(ctr.each(lambda a: a * a, centred)[None, :]))  # (1,)
        sd = ctr.each(math.sqrt, ctr.each(lambda a: a + 1e-5, var))  # (1,)
        normed = ctr.each(lambda a, d: a / d, centred, np.broadcast_to(sd, row.shape))
        rows.append(ctr.each(lambda a: a + 0.0, ctr.each(lambda a: a * 1.0, normed)))  # γ·x̂, + β
    return np.array(rows)


def counted(cost: Cost) -> dict[str, tuple[int, int]]:
    return {st.name: (st.macs, st.elementwise) for st in cost.stages}


# --- the tiny case, by hand ------------------------------------------------------------------------


def test_tiny_case_by_hand() -> None:
    """T = S = 2, d_model = 2, h = 1, d_k = d_v = 2: every product is 2·2·2 = 8 multiply-adds."""
    cost = attention_cost(t=2, s=2, d_model=2, num_heads=1, d_k=2, d_v=2)
    assert counted(cost) == {
        "Q projection X·W_Q": (8, 0),  # (2×2)·(2×2)
        "K projection C·W_K": (8, 0),
        "V projection C·W_V": (8, 0),
        "Scores Q·Kᵀ": (8, 0),  # (2×2)·(2×2)
        "Scaling ÷ √d_k": (0, 4),  # four scores, one division each
        "Softmax (exp, sum, divide)": (0, 10),  # per row: 2 exps, 1 addition, 2 divisions; two rows
        "A·V": (8, 0),
        "Concat·W_O": (8, 0),
    }
    assert cost.total_macs == 48 and cost.total_elementwise == 14
    assert cost.quadratic_macs == 16 and cost.linear_macs == 32
    assert cost.total_params == 16  # four 2×2 matrices


# --- every configuration against the counting forward pass ------------------------------------------

CONFIGS = [
    {"score": "dot", "attention": "softmax", "blocks": 0},
    {"score": "general", "attention": "softmax", "blocks": 0},
    {"score": "additive", "attention": "softmax", "blocks": 0},
    {"score": "dot", "attention": "linear", "blocks": 0},
    {"score": "dot", "attention": "softmax", "blocks": 1},
    {"score": "additive", "attention": "softmax", "blocks": 1},
    {"score": "dot", "attention": "linear", "blocks": 1},
]


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
@pytest.mark.parametrize("t, s", [(3, 3), (2, 4)])
def test_counts_equal_the_operations_a_loop_does(cfg: dict, t: int, s: int) -> None:
    d_model, h, d_k, d_v, d_a, d_ff = 4, 2, 3, 2, 5, 6
    rng = np.random.default_rng(1)
    x, c = rng.normal(size=(t, d_model)), rng.normal(size=(s, d_model))
    done, _ = reference(x, c, h=h, d_k=d_k, d_v=d_v, d_a=d_a, d_ff=d_ff, **cfg)
    cost = attention_cost(t=t, s=s, d_model=d_model, num_heads=h, d_k=d_k, d_v=d_v, d_a=d_a, d_ff=d_ff, **cfg)
    assert counted(cost) == done


def test_reference_really_computes_attention() -> None:
    """The counting pass is attention itself: its output equals the pipeline's for the same weights."""
    t, d_model, h, d_k, d_v = 3, 4, 2, 3, 2
    x = np.random.default_rng(2).normal(size=(t, d_model))
    _, out = reference(x, x, h=h, d_k=d_k, d_v=d_v, score="dot", d_a=0, attention="softmax", d_ff=0, blocks=0)
    rng = np.random.default_rng(0)  # the reference draws per head W_Q, W_K, W_V, then W_O
    w = [(rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_k)), rng.normal(size=(d_model, d_v)))
         for _ in range(h)]
    w_o = rng.normal(size=(h * d_v, d_model))
    run = run_attention(x, num_heads=h, d_k=d_k, d_v=d_v, weights={
        "w_q": np.stack([a for a, _, _ in w]), "w_k": np.stack([b for _, b, _ in w]),
        "w_v": np.stack([v for _, _, v in w]), "w_o": w_o})
    np.testing.assert_allclose(out, run.output, rtol=1e-10)


def test_reference_linear_attention_is_the_formula() -> None:
    """outᵢ = φ(qᵢ)ᵀ(Σⱼ φ(kⱼ)vⱼᵀ) / φ(qᵢ)ᵀΣⱼ φ(kⱼ), vectorised, against the counting pass."""
    t, s, d_model, h, d_k, d_v = 3, 4, 4, 2, 3, 2
    data = np.random.default_rng(4)
    x, c = data.normal(size=(t, d_model)), data.normal(size=(s, d_model))
    _, out = reference(x, c, h=h, d_k=d_k, d_v=d_v, score="dot", d_a=0, attention="linear", d_ff=0, blocks=0)
    rng = np.random.default_rng(0)
    heads = []
    for _ in range(h):
        w_q, w_k, w_v = (rng.normal(size=(d_model, n)) for n in (d_k, d_k, d_v))
        fq, fk = (np.where(m > 0, m, np.expm1(np.minimum(m, 0))) + 1 for m in (x @ w_q, c @ w_k))
        heads.append(fq @ (fk.T @ (c @ w_v)) / (fq @ fk.sum(axis=0))[:, None])
    np.testing.assert_allclose(out, np.concatenate(heads, axis=1) @ rng.normal(size=(h * d_v, d_model)), rtol=1e-10)


def test_scale_off_drops_only_the_division() -> None:
    sizes = {"t": 3, "s": 5, "d_model": 8, "num_heads": 2, "d_k": 4, "d_v": 4}
    for score in ("dot", "general"):
        on, off = attention_cost(score=score, **sizes), attention_cost(score=score, scale=False, **sizes)
        assert counted(on) == {**counted(off), "Scaling ÷ √d_k": (0, 2 * 3 * 5)}
        assert on.total_macs == off.total_macs
    additive = attention_cost(score="additive", **sizes)
    assert "Scaling ÷ √d_k" not in counted(additive)  # Bahdanau's score is never scaled


# --- the formulas say what the counts are ---------------------------------------------------------


def evaluate(formula: str, sizes: dict[str, int]) -> int:
    """A printed formula such as "h·T·(3·S − 1)" or "h·d_k²", evaluated without eval()."""
    text = formula.replace("·", "*").replace("−", "-").replace("²", "**2").replace(" × ", "*")
    tree = ast.parse(text, mode="eval")

    def walk(node: ast.AST) -> int:
        if isinstance(node, ast.Expression):
            return walk(node.body)
        if isinstance(node, ast.Constant) and isinstance(node.value, int):
            return node.value
        if isinstance(node, ast.Name):
            return sizes[node.id]
        if isinstance(node, ast.BinOp):
            ops = {ast.Add: int.__add__, ast.Sub: int.__sub__, ast.Mult: int.__mul__, ast.Pow: int.__pow__}
            return ops[type(node.op)](walk(node.left), walk(node.right))
        raise AssertionError(f"unexpected {ast.dump(node)} in {formula!r}")

    return walk(tree)


@pytest.mark.parametrize("cfg", CONFIGS, ids=lambda c: "-".join(str(v) for v in c.values()))
def test_printed_formulas_evaluate_to_the_counts(cfg: dict) -> None:
    sizes = {"T": 7, "S": 5, "d_model": 12, "h": 3, "d_k": 4, "d_v": 6, "d_a": 9, "d_ff": 20}
    cost = attention_cost(t=7, s=5, d_model=12, num_heads=3, d_k=4, d_v=6, d_a=9, d_ff=20, **cfg)
    for st in cost.stages:
        assert evaluate(st.macs_formula or "0", sizes) == st.macs, st.name
        assert evaluate(st.elementwise_formula or "0", sizes) == st.elementwise, st.name
    for p in cost.params:
        assert evaluate(p.formula, sizes) == p.count, p.name


# --- parameters ------------------------------------------------------------------------------------


def test_paper_base_model_parameters() -> None:
    """d_model = 512, h = 8, d_k = d_v = 64: 4·512² in attention; FFN 2·512·2048 + 2048 + 512."""
    attn = attention_cost(t=10, s=10, d_model=512, num_heads=8, d_k=64, d_v=64)
    assert attn.total_params == 4 * 512**2 == 1_048_576
    block = attention_cost(t=10, s=10, d_model=512, num_heads=8, d_k=64, d_v=64, d_ff=2048, blocks=6)
    ffn = sum(p.count for p in block.params if p.name.startswith("FFN"))
    assert ffn == 2 * 512 * 2048 + 2048 + 512 == 2_099_712
    norms = sum(p.count for p in block.params if p.name.startswith("LayerNorm"))
    assert norms == 2 * 2 * 512
    assert block.params_per_layer == 1_048_576 + 2_099_712 + 2048
    assert block.total_params == 6 * block.params_per_layer


def test_seed_004_three_d_squared() -> None:
    """One head with every projection d×d: W_Q, W_K, W_V hold 3d² ("total learnable parameters: 3d²")."""
    d = 10
    cost = attention_cost(t=4, s=4, d_model=d, num_heads=1, d_k=d, d_v=d)
    assert sum(p.count for p in cost.params if p.name in ("W_Q", "W_K", "W_V")) == 3 * d * d


def test_parameters_do_not_depend_on_t() -> None:
    sizes = {"d_model": 16, "num_heads": 2, "d_k": 8, "d_v": 8, "score": "additive", "d_ff": 32, "blocks": 2}
    assert attention_cost(t=3, s=3, **sizes).params == attention_cost(t=300, s=70, **sizes).params


def test_score_function_parameters() -> None:
    general = attention_cost(t=2, s=2, d_model=8, num_heads=2, d_k=4, d_v=4, score="general")
    additive = attention_cost(t=2, s=2, d_model=8, num_heads=2, d_k=4, d_v=4, score="additive", d_a=3)
    base = 4 * 2 * 8 * 4
    assert general.total_params == base + 2 * 4 * 4
    assert additive.total_params == base + 2 * (4 * 3) * 2 + 2 * 3
    assert additive.d_a == 3 and general.d_a is None
    assert attention_cost(t=2, s=2, d_model=8, num_heads=2, d_k=4, d_v=4, score="additive").d_a == 4  # d_a = d_k


# --- growth and the crossover --------------------------------------------------------------------


def closed_form(d_model: int, h: int, d_k: int, d_v: int, score: str, d_a: int, d_ff: int) -> int:
    """⌈linear coefficient / quadratic coefficient⌉, written out per score function."""
    lin = h * d_model * (2 * d_k + 2 * d_v) + 2 * d_model * d_ff  # Q, K, V, W_O (+ FFN)
    quad = h * (d_k + d_v)  # scores, A·V
    if score == "general":
        lin += h * d_k * d_k
    if score == "additive":
        lin += 2 * h * d_k * d_a
        quad = h * (d_a + d_v)
    return max(1, math.ceil(lin / quad))


def test_crossover_dot_is_two_d_model() -> None:
    """Without an FFN, h·T²·(d_k + d_v) ≥ 2·h·T·d_model·(d_k + d_v) ⇔ T ≥ 2·d_model, whatever h, d_k, d_v."""
    for d_model, h, d_k, d_v in [(512, 8, 64, 64), (64, 8, 8, 8), (6, 1, 3, 5), (30, 4, 7, 2)]:
        assert crossover(d_model=d_model, num_heads=h, d_k=d_k, d_v=d_v) == 2 * d_model


def test_crossover_with_ffn_paper_sizes() -> None:
    """512·2 + 2·512·2048 / (8·128) = 1024 + 2048."""
    assert crossover(d_model=512, num_heads=8, d_k=64, d_v=64, d_ff=2048, blocks=6) == 3072


@pytest.mark.parametrize("score", ["dot", "general", "additive"])
@pytest.mark.parametrize(
    "sizes", [(512, 8, 64, 64, 7, 0), (64, 8, 8, 8, 5, 256), (10, 3, 4, 2, 9, 17), (3, 1, 1, 1, 1, 1)]
)
def test_crossover_matches_closed_form_and_its_definition(score: str, sizes: tuple[int, ...]) -> None:
    d_model, h, d_k, d_v, d_a, d_ff = sizes
    blocks = 1 if d_ff else 0
    kw = {"d_model": d_model, "num_heads": h, "d_k": d_k, "d_v": d_v, "score": score, "d_a": d_a, "d_ff": d_ff,
          "blocks": blocks}
    t_star = crossover(**kw)
    assert t_star == closed_form(d_model, h, d_k, d_v, score, d_a, d_ff)
    at = attention_cost(t=t_star, s=t_star, **kw)
    assert at.quadratic_macs >= at.linear_macs
    if t_star > 1:
        before = attention_cost(t=t_star - 1, s=t_star - 1, **kw)
        assert before.quadratic_macs < before.linear_macs


def test_linear_attention_grows_linearly_and_softmax_does_not() -> None:
    sizes = {"d_model": 64, "num_heads": 8, "d_k": 8, "d_v": 8, "d_ff": 256, "blocks": 2}
    lin = [attention_cost(t=t, s=t, attention="linear", **sizes).total_macs for t in (16, 32, 64, 128)]
    soft = [attention_cost(t=t, s=t, **sizes).total_macs for t in (16, 32, 64, 128)]
    assert lin == [lin[0] * k for k in (1, 2, 4, 8)]  # exactly ∝ T
    assert all(b > 2 * a for a, b in zip(soft, soft[1:], strict=False))  # more than doubles per doubling
    assert all(not st.quadratic for st in attention_cost(t=4, s=4, attention="linear", **sizes).stages)


def test_cost_growth_splits_and_sums() -> None:
    sizes = {"d_model": 32, "num_heads": 4, "d_k": 8, "d_v": 8, "score": "general"}
    g = cost_growth(ts=[64, 1, 8, 8], **sizes)
    assert g.ts == (1, 8, 64)  # sorted, deduplicated
    for t, q, li, tot, la in zip(g.ts, g.quadratic, g.linear, g.total, g.linear_attention, strict=True):
        c = attention_cost(t=t, s=t, **sizes)
        assert (q, li, tot) == (c.quadratic_macs, c.linear_macs, c.total_macs)
        assert q + li == tot
        assert la == attention_cost(t=t, s=t, attention="linear", **{**sizes, "score": "dot"}).total_macs
        assert q == 4 * t * t * (8 + 8)  # h·T²·(d_k + d_v)
    assert g.crossover == crossover(**sizes)


# --- validation ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    "bad",
    [{"t": 0}, {"s": 0}, {"d_model": 0}, {"num_heads": 0}, {"d_k": 0}, {"d_v": 0}, {"score": "cosine"},
     {"attention": "sparse"}, {"d_a": 0}, {"blocks": -1}, {"d_ff": -1}, {"blocks": 1, "d_ff": 0}],
)
def test_invalid_sizes_raise(bad: dict) -> None:
    kw = {"t": 2, "s": 2, "d_model": 4, "num_heads": 1, "d_k": 2, "d_v": 2, **bad}
    with pytest.raises(ValueError):
        attention_cost(**kw)

"""Training goals from the seed articles: a starting scenario, a target, and gradient descent towards it.

Pure NumPy and the standard library, on top of app.maths.attention (the forward pass), app.maths.backward (losses,
gradients, ``train``), app.lesson.presets and app.lesson.seed_numbers (the lesson's sentences): nothing from the web
layer is imported here. The page's Learn panel reads :data:`GOALS`, runs :func:`train_goal`, and shows what it
returns.

Every goal starts from weights drawn by ``np.random.default_rng(seed)`` (app.maths.attention.seeded_weights),
so the same goal always trains the same way.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass

import numpy as np

from app.i18n import N_
from app.lesson.articles import cite
from app.lesson.presets import PRESETS
from app.lesson.seed_numbers import (
    PREVIOUS_TOKEN_SEED,
    PREVIOUS_TOKENS,
    WHY_SCALE_D_K,
    WHY_SCALE_D_V,
    WHY_SCALE_SEED,
    WHY_SCALE_TOKENS,
    previous_token_x,
    why_scale_x,
)
from app.maths.attention import run_attention
from app.maths.backward import (
    Gradients,
    TrainingResult,
    attention_loss,
    backward,
    descend,
    loss_and_gradients,
    train,
)
from app.maths.records import AttentionRun
from app.maths.weights import ALL_WEIGHT_NAMES


@dataclass(frozen=True, eq=False)
class GoalScenario:
    """One input a goal trains on: its tokens, embeddings, run_attention's options and the loss."""

    tokens: tuple[str, ...]
    x: np.ndarray  # (T, d_model)
    run_kwargs: Mapping  # run_attention's keywords: seed, sizes, mask, context, positional encoding, …
    loss: Mapping  # app.maths.backward's loss spec; an optional "rows" makes only those query rows count
    context_tokens: tuple[str, ...] = ()  # the source sentence, in cross-attention


@dataclass(frozen=True, eq=False)
class Goal:
    key: str
    title: str
    source: str  # which seed it comes from
    explanation: str  # two sentences, in the seeds' words
    scenarios: tuple[GoalScenario, ...]  # more than one: their losses are summed, the weights shared
    train: tuple[str, ...]  # the parameters gradient descent changes
    optimizer: str  # "sgd" or "adam"
    learning_rate: float
    steps: int  # suggested: enough to reach the target


@dataclass(frozen=True)
class GoalTraining(TrainingResult):
    """app.maths.backward's TrainingResult (``run`` and ``x`` are the first scenario's), with every scenario's run."""

    runs: tuple[AttentionRun, ...]  # one per scenario, after the last step


# --- the targets ------------------------------------------------------------------------------------

# Seed 003's table "how attention weights might look" translating "The cat sat on the mat" into French:
# rows Le, chat, assis, sur, le, tapis; columns The, cat, sat, on, the, mat. The seed gives all six rows.
SEED_003_ALIGNMENT = (
    (0.70, 0.05, 0.05, 0.05, 0.10, 0.05),
    (0.05, 0.80, 0.05, 0.02, 0.03, 0.05),
    (0.03, 0.10, 0.75, 0.05, 0.02, 0.05),
    (0.02, 0.02, 0.05, 0.80, 0.06, 0.05),
    (0.05, 0.03, 0.02, 0.05, 0.60, 0.25),
    (0.02, 0.05, 0.03, 0.05, 0.10, 0.75),
)


def normalised_rows(table: np.ndarray | tuple) -> np.ndarray:
    """Each row divided by its sum: the seed's rows sum to 1 to two decimals, these to the last bit."""
    t = np.asarray(table, dtype=np.float64)  # (T, S)
    return t / t.sum(axis=1, keepdims=True)


def one_row_target(t: int, s: int, row: int, key: int, mask: np.ndarray | None = None) -> np.ndarray:
    """All of ``row``'s weight on ``key``; every other row uniform over its visible keys (a valid
    placeholder for app.maths.backward's checks: only ``row`` is meant to count, see :func:`rows_attention_loss`)."""
    visible = np.ones((t, s)) if mask is None else (~mask).astype(np.float64)  # (T, S)
    target = visible / visible.sum(axis=1, keepdims=True)  # (T, S)
    target[row] = 0.0
    target[row, key] = 1.0
    return target


def previous_token_target(t: int) -> np.ndarray:
    """Row i puts all its weight on key i − 1; the first token, which has no predecessor, on itself."""
    target = np.zeros((t, t))  # (T, T)
    target[0, 0] = 1.0
    target[np.arange(1, t), np.arange(t - 1)] = 1.0
    return target


# --- losses over some rows, and over several scenarios ----------------------------------------------

def rows_attention_loss(
    run: AttentionRun, head: int, target: np.ndarray, rows: tuple[int, ...]
) -> tuple[float, np.ndarray]:
    """Cross-entropy of head ``head``'s weights against ``target``, on the query rows ``rows`` only:

        L = −(1/|rows|)·Σ_{i ∈ rows} Σ_j t_ij·log A_ij,    ∂L/∂A_ij = −t_ij / (|rows|·A_ij) for i ∈ rows, else 0.

    app.maths.backward's attention loss averages over all T rows; its ∂L/∂A times T/|rows| on the kept rows
    (and 0 on the others) is this one's. The target is checked there, so every row must be valid.
    """
    _, d_a = attention_loss(run, head, target)  # (T, S) checks the target too
    t = d_a.shape[0]
    keep = np.zeros(t, dtype=bool)  # (T,)
    keep[list(rows)] = True
    masked = run.heads[head].masked[keep]  # (R, S)
    top = masked.max(axis=1, keepdims=True)  # (R, 1)
    log_a = masked - top - np.log(np.exp(masked - top).sum(axis=1, keepdims=True))  # (R, S)
    kept_target = np.asarray(target, dtype=np.float64)[keep]  # (R, S)
    used = kept_target > 0
    loss = -float(np.sum(kept_target[used] * log_a[used])) / len(rows)
    return loss, np.where(keep[:, None], d_a * (t / len(rows)), 0.0)  # (T, S)


def goal_loss_and_gradients(run: AttentionRun, loss_spec: Mapping) -> tuple[float, Gradients]:
    """app.maths.backward.loss_and_gradients, or with ``"rows"`` in the spec, the loss of those rows only."""
    if "rows" not in loss_spec:
        return loss_and_gradients(run, loss_spec)
    head = int(loss_spec["head"])
    loss, d_a = rows_attention_loss(run, head, loss_spec["target"], tuple(loss_spec["rows"]))
    return loss, backward(run, d_softmax={head: d_a})


def _gradient(grads: Gradients, name: str) -> np.ndarray:
    g = getattr(grads.weights, name)
    if g is None:
        raise ValueError(f"{name} is not used with this score function, so it cannot be trained")
    return g


def train_scenarios(
    scenarios: tuple[GoalScenario, ...],
    *,
    steps: int,
    optimizer: str = "sgd",
    learning_rate: float = 0.1,
    train: tuple[str, ...] = ("w_q", "w_k"),
) -> GoalTraining:
    """Gradient descent on L = Σ_scenarios L_s with one set of weights shared by every scenario.

    The weights start as the first scenario's seeded ones; ∂L/∂W = Σ_s ∂L_s/∂W. The steps are
    app.maths.backward.train's: SGD p ← p − lr·g, or Adam (β₁ = 0.9, β₂ = 0.999, ε = 1e-8). Only weights can be
    trained here, not embeddings: the scenarios' embeddings are different arrays.
    """
    if steps < 1:
        raise ValueError("steps must be at least 1")
    if not train or any(name not in ALL_WEIGHT_NAMES for name in train):
        raise ValueError(f"train must name some of {', '.join(ALL_WEIGHT_NAMES)}")
    first = run_attention(scenarios[0].x, **scenarios[0].run_kwargs)
    params = {name: getattr(first.weights, name) for name in ALL_WEIGHT_NAMES}
    moments = {name: (np.zeros_like(params[name]), np.zeros_like(params[name])) for name in train}

    def forward() -> tuple[list[AttentionRun], float, list[Gradients]]:
        runs = [run_attention(s.x, **{**s.run_kwargs, "weights": params}) for s in scenarios]
        parts = [goal_loss_and_gradients(run, s.loss) for run, s in zip(runs, scenarios, strict=True)]
        return runs, sum(loss for loss, _ in parts), [grads for _, grads in parts]

    losses = []
    for step in range(1, steps + 1):
        _, loss, grads = forward()
        losses.append(loss)
        for name in train:
            g = sum(_gradient(gr, name) for gr in grads)  # ∂(Σ L_s)/∂W
            params[name] = descend(params[name], g, moments, name, step, optimizer, learning_rate)
    runs, loss, _ = forward()
    losses.append(loss)
    return GoalTraining(losses=tuple(losses), weights=runs[0].weights, x=runs[0].x_input, run=runs[0],
                        runs=tuple(runs))


def train_goal(goal: Goal, steps: int | None = None) -> GoalTraining:
    """Train ``goal`` for ``steps`` (its suggested number when None).

    A goal with one scenario and app.maths.backward's own loss goes through app.maths.backward.train; a goal whose
    loss counts some rows only, or sums several scenarios (bank), through :func:`train_scenarios`.
    """
    n = goal.steps if steps is None else steps
    if len(goal.scenarios) == 1 and "rows" not in goal.scenarios[0].loss:
        s = goal.scenarios[0]
        result = train(s.x, s.run_kwargs, s.loss, steps=n, optimizer=goal.optimizer,
                       learning_rate=goal.learning_rate, train=goal.train)
        return GoalTraining(losses=result.losses, weights=result.weights, x=result.x, run=result.run,
                            runs=(result.run,))
    return train_scenarios(goal.scenarios, steps=n, optimizer=goal.optimizer,
                           learning_rate=goal.learning_rate, train=goal.train)


# --- the goals --------------------------------------------------------------------------------------

def _translate() -> Goal:
    p = PRESETS["translate"]
    target = normalised_rows(SEED_003_ALIGNMENT)  # (6, 6)
    scenario = GoalScenario(
        tokens=p.tokens, x=np.array(p.x), context_tokens=p.context_tokens,
        run_kwargs={"context": np.array(p.context_x), "num_heads": 1, "seed": 3},
        loss={"kind": "attention", "head": 0, "target": target},
    )
    return Goal(
        key="translate",
        title=N_("Learn article 4's alignment table: Le chat assis sur le tapis → The cat sat on the mat"),
        source=cite(4, what=N_("the alignment table of a translation")),
        explanation=N_(
            "When generating chat, the model should focus on cat, not mat or on: starting from random "
            "W_Q and W_K, gradient descent makes the cross-attention weights match article 4's table. "
            "The largest weight in each row then shows where each French word focuses, le on the second "
            "the, and the loss cannot go below the table's own entropy."
        ),
        scenarios=(scenario,), train=("w_q", "w_k"), optimizer="adam", learning_rate=0.1, steps=100,
    )


def _bank() -> Goal:
    scenarios = []
    for key, place in (("bank-river", "river"), ("bank-money", "money")):
        p = PRESETS[key]
        t = len(p.tokens)
        target = one_row_target(t, t, p.tokens.index("bank"), p.tokens.index(place))
        scenarios.append(GoalScenario(
            tokens=p.tokens, x=np.array(p.x),
            run_kwargs={"num_heads": 1, "d_k": 2, "seed": 0},
            loss={"kind": "attention", "head": 0, "target": target, "rows": (p.tokens.index("bank"),)},
        ))
    return Goal(
        key="bank", title=N_("Learn a where head: bank attends to river in ①, to money in ②"),
        source=cite(1, what=N_("the homonym bank")),
        explanation=N_(
            "Without context, a computer doesn't know if bank is a place to fish or a place to store money: "
            "one head, trained on both sentences at once (the sum of their two losses), learns to connect "
            "bank to river in ① and to money in ②. Only bank's row counts in each loss, so the other "
            "tokens attend wherever the learned weights send them."
        ),
        scenarios=tuple(scenarios), train=("w_q", "w_k"), optimizer="adam", learning_rate=0.1, steps=100,
    )


def previous_token_scenario(positional_encoding: str = "rope") -> GoalScenario:
    """Seed 003's sentence, d_model = 8, causal mask, target: each token on the one before it
    (the page's preset learn-previous-token)."""
    t = len(PREVIOUS_TOKENS)
    return GoalScenario(
        tokens=PREVIOUS_TOKENS, x=np.array(previous_token_x()),
        run_kwargs={"num_heads": 1, "seed": PREVIOUS_TOKEN_SEED, "mask": "causal",
                    "positional_encoding": positional_encoding},
        loss={"kind": "attention", "head": 0, "target": previous_token_target(t)},
    )


def _previous_token() -> Goal:
    return Goal(
        key="previous-token", title=N_("Learn a previous-token head (causal mask, RoPE)"),
        source=cite(2, 4, 5, what=N_("masked attention and positional encodings")),
        explanation=N_(
            "Every token should attend to the token just before it, which is a relation between positions, "
            "not contents: without positions attention sees a set, so mat cannot tell the second the from "
            "the first and gives each half its weight. With RoPE the score of q_i and k_j depends on the "
            "offset i − j, so W_Q and W_K can learn to prefer an offset of one."
        ),
        scenarios=(previous_token_scenario("rope"),), train=("w_q", "w_k"), optimizer="adam",
        learning_rate=0.1, steps=100,
    )


GOALS: dict[str, Goal] = {g.key: g for g in (_translate(), _bank(), _previous_token())}


# --- why ÷√d_k (seeds 003, 004) ---------------------------------------------------------------------

WHY_SCALE_LEARNING_RATE = 0.1  # the same for both runs; from 0.3 the unscaled run overshoots (see why_scale)
WHY_SCALE_STEPS = 200
SATURATED = 0.9  # a row of A whose largest weight is at least this is "nearly one-hot"


def why_scale_scenario(scale: bool) -> GoalScenario:
    """X ~ N(0, 1) (rounded to two decimals, as the page's preset why-scale has it), d_model = 16, and
    seeded weights N(0, 1/d_model), so q and k (d_k = 64) have entries of variance about 1 and the
    scores a standard deviation of about √64 = 8. The goal: each token's output is the value of the token
    before it (the first token's: the last one's), A*·V·W_O, as a mean squared error on the output."""
    t = len(WHY_SCALE_TOKENS)
    x = np.array(why_scale_x())  # (T, d_model)
    run_kwargs = {"num_heads": 1, "d_k": WHY_SCALE_D_K, "d_v": WHY_SCALE_D_V, "seed": WHY_SCALE_SEED, "scale": scale}
    start = run_attention(x, **run_kwargs)  # V and W_O are not trained: the same in both runs
    wanted = np.roll(np.eye(t), -1, axis=1)  # (T, T) row i → key i − 1 (row 0 → the last key)
    target = wanted @ start.heads[0].v @ start.weights.w_o  # (T, d_model)
    return GoalScenario(tokens=WHY_SCALE_TOKENS, x=x, run_kwargs=run_kwargs, loss={"kind": "mse", "target": target})


def _descend_recording(scenario: GoalScenario, steps: int, learning_rate: float) -> dict:
    """SGD on W_Q and W_K, as app.maths.backward.train does it, keeping ∂L/∂Scores' size at every step."""
    kwargs = dict(scenario.run_kwargs)
    run = run_attention(scenario.x, **kwargs)
    params = {name: getattr(run.weights, name) for name in ALL_WEIGHT_NAMES}
    start = run.heads[0]  # step 0: the spread of the scores and of the softmax's input
    losses, norms, means, max_weights = [], [], [], []
    rows_start = None
    for step in range(steps + 1):
        loss, grads = loss_and_gradients(run, scenario.loss)
        d_scores = grads.heads[0].scores  # (T, T)
        losses.append(loss)
        norms.append(float(np.linalg.norm(d_scores)))
        means.append(float(np.abs(d_scores).mean()))
        max_weights.append([float(a) for a in run.heads[0].softmax.max(axis=1)])
        if step == 0:
            rows_start = [float(r) for r in np.linalg.norm(d_scores, axis=1)]
        if step == steps:
            break
        for name in ("w_q", "w_k"):
            params[name] = params[name] - learning_rate * getattr(grads.weights, name)
        run = run_attention(scenario.x, **{**kwargs, "weights": params})
    return {
        "losses": losses,  # steps + 1 values
        "grad_scores_norm": norms,  # ‖∂L/∂Scores‖_F, Scores = Q·Kᵀ before any ÷√d_k: steps + 1 values
        "grad_scores_mean_abs": means,  # mean |∂L/∂Scores|
        "grad_scores_rows_start": rows_start,  # ‖∂L/∂Scores_i‖ per query row at the start
        "max_weights": max_weights,  # each row's largest weight at every step: ≈ 1 is saturated
        "max_weight_start": max_weights[0],
        "scores_std_start": float(start.scores.std()),  # the spread of Q·Kᵀ at the start: the same in both runs
        "softmax_input_std_start": float(start.scaled.std()),  # of what the softmax gets: Q·Kᵀ/√d_k, or Q·Kᵀ
    }


def why_scale(steps: int = WHY_SCALE_STEPS, learning_rate: float = WHY_SCALE_LEARNING_RATE) -> dict:
    """The same start and goal trained twice with SGD, with ÷√d_k (scaled) and without (unscaled).

    Scores Q·Kᵀ of standard deviation about 8 push the unscaled softmax to near-one-hot rows, whose Jacobian
    diag(A) − A·Aᵀ is almost 0: little gradient reaches the scores, so with the same learning rate the unscaled
    loss barely moves while the scaled run learns. What the start must be for that to show:
    - Every row saturated. A row that is not passes more gradient than the scaled run's, which includes the
      factor 1/√d_k = 1/8 (∂L/∂Scores = ∂L/∂Scaled / √d_k); WHY_SCALE_SEED is a draw where all six rows are.
    - SGD, not Adam: Adam divides each step by the gradient's running size, so a tiny gradient would
      still take full-sized steps and hide what the seeds describe.
    - A loss on the output (mean squared error), not the cross-entropy of the weights: that one's
      gradient through the softmax is (A − t)/T, which the saturation does not shrink (log cancels exp).
    - A learning rate the unscaled run can take: without ÷√d_k one step moves the softmax's input 64 times as
      far for the same gradient there, so from η = 0.3 on its steps overshoot (here its loss zig-zags; in
      other draws a row swings from one key to another: a spike in ‖∂L/∂Scores‖ and a jump in the loss).
    ``grad_scores_norm`` is ‖∂L/∂Scores‖ for the trained W_Q, W_K (Scores = Q·Kᵀ, before any ÷√d_k),
    the same quantity in both runs: what reaches W_Q and W_K through ∂L/∂Q = ∂L/∂Scores·K.
    """
    if steps < 1:
        raise ValueError("steps must be at least 1")
    return {
        "d_k": WHY_SCALE_D_K, "tokens": list(WHY_SCALE_TOKENS), "steps": steps,
        "optimizer": "sgd", "learning_rate": learning_rate,
        "scaled": _descend_recording(why_scale_scenario(True), steps, learning_rate),
        "unscaled": _descend_recording(why_scale_scenario(False), steps, learning_rate),
    }

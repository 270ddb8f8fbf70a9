"""The Learn panel's state: a goal, how to descend it, and the loss curve so far, in plain form fields.

The server keeps nothing between requests. A goal (match head i's weights to a target, or match the
output to a target), the optimizer, the learning rate and the weights it trains travel in the form
with the rest of the page; a training step trains the scenario's weights and writes them back as the
scenario's edits, so the editor, the permalink and every stage show the trained weights. The loss
curve travels as a short list of numbers, and the state before the first step as a pinned scenario
(app.state.pin), which "reset" restores.

Pure NumPy and the standard library, on app.maths.backward and app.lesson.goals; the web layer renders it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass, replace
from functools import lru_cache

import numpy as np

from app.config import settings
from app.i18n import gettext as _
from app.lesson.goals import (
    GOALS,
    WHY_SCALE_LEARNING_RATE,
    GoalScenario,
    goal_loss_and_gradients,
    train_scenarios,
    why_scale_scenario,
)
from app.lesson.presets import PRESETS
from app.maths.attention import run_attention
from app.maths.backward import Gradients
from app.maths.cost import attention_cost
from app.maths.records import AttentionRun
from app.maths.weights import ALL_WEIGHT_NAMES, WEIGHT_NAMES
from app.state.form import FormError
from app.state.pin import encode_pin
from app.state.scenario import Scenario, diff_edits

GOAL_KINDS = ("attention", "output")  # the form's learn_goal; "" or absent: no goal
PAGE_TRAINABLE = WEIGHT_NAMES  # what the page trains (the API can train X too)
STEP_ACTIONS = {"learn_1": 1, "learn_10": 10, "learn_100": 100}
MAX_CURVE = 1000  # losses the curve keeps: the latest, with the step the first of them was at
MAX_LEARNING_RATE = 10.0
ROW_SUM_TOLERANCE = 1e-6


@dataclass(frozen=True, eq=False)
class Learning:
    """A goal and the state of its descent. ``target`` is (T, S) for "attention" (head ``head``'s
    weights; every row a distribution), (T, d_model) for "output" (the multi-head output)."""

    goal: str  # one of GOAL_KINDS
    head: int
    target: np.ndarray
    rows: tuple[int, ...] = ()  # the query rows the attention loss counts; () = all
    optimizer: str = "adam"
    learning_rate: float = 0.1
    train: tuple[str, ...] = ("w_q", "w_k")
    losses: tuple[float, ...] = ()  # the loss before the first step … after the last (the latest MAX_CURVE)
    first_step: int = 0  # the step losses[0] was measured at
    before: str = ""  # the scenario before the first step (app.state.pin's encoding), for "reset"
    companion: str = ""  # a second sentence (a preset's key) whose loss is added: the bank goal's ②

    @property
    def steps_taken(self) -> int:
        return self.first_step + len(self.losses) - 1 if self.losses else 0

    def query(self) -> list[tuple[str, str]]:
        """The form fields read_learning turns back into this learning (for the permalink)."""
        t, cols = self.target.shape
        q = [("learn_goal", self.goal), ("learn_shape", f"{self.goal},{t},{cols}")]
        if self.head:
            q.append(("learn_head", str(self.head)))
        q += [(f"target-{i}-{j}", _short(v)) for (i, j), v in np.ndenumerate(self.target)]
        if self.rows:
            q.append(("learn_rows", " ".join(str(r) for r in self.rows)))
        q += [("learn_optimizer", self.optimizer), ("learn_rate", _short(self.learning_rate)),
              ("learn_train", " ".join(self.train))]
        if self.losses:
            q.append(("learn_losses", curve_text(self.losses)))
            if self.first_step:
                q.append(("learn_first", str(self.first_step)))
            if self.before:
                q.append(("learn_before", self.before))
        return q

    def loss_spec(self) -> dict:
        """app.maths.backward's loss spec (app.lesson.goals' with "rows" when only some rows count)."""
        if self.goal == "output":
            return {"kind": "mse", "target": self.target}
        spec = {"kind": "attention", "head": self.head, "target": self.target}
        if self.rows:
            spec["rows"] = self.rows
        return spec


# --- defaults and presets ---------------------------------------------------------------------------

def default_target(sc: Scenario, goal: str) -> np.ndarray:
    """What a new goal starts from. Attention: each query on the key at its own position (the last
    visible one when it is hidden or out of range), a pattern every mechanism can learn to draw.
    Output: the input embeddings X, "make each token's output its own embedding"."""
    if goal == "output":
        return np.array(sc.x, dtype=np.float64)  # (T, d_model)
    t, s = len(sc.tokens), len(sc.key_tokens)
    mask = sc.mask_array()
    mask = np.zeros((t, s), dtype=bool) if mask is None else mask  # (T, S)
    target = np.zeros((t, s))  # (T, S)
    for i in range(t):
        visible = np.flatnonzero(~mask[i])
        j = min(i, s - 1)
        target[i, j if j in visible else visible[visible <= j][-1] if (visible <= j).any() else visible[0]] = 1.0
    return target


@lru_cache(maxsize=8)
def from_goal(key: str) -> Learning:
    """The Learn panel for one of app.lesson.goals' goals (its target, rows, optimizer and learning rate), or
    for "why-scale", the scaled run of app.lesson.goals.why_scale."""
    if key == "why-scale":
        scenario = why_scale_scenario(True)
        return Learning(goal="output", head=0, target=_frozen(scenario.loss["target"]), optimizer="sgd",
                        learning_rate=WHY_SCALE_LEARNING_RATE, train=("w_q", "w_k"))
    goal = GOALS[key]
    loss = goal.scenarios[0].loss
    companion = ""
    if len(goal.scenarios) > 1:  # the bank goal: the second sentence is another preset's
        companion = next(k for k, p in PRESETS.items() if p.goal == "" and p.tokens == goal.scenarios[1].tokens)
    return Learning(
        goal="output" if loss["kind"] == "mse" else "attention", head=int(loss.get("head", 0)),
        target=_frozen(loss["target"]), rows=tuple(loss.get("rows", ())),
        optimizer=goal.optimizer, learning_rate=goal.learning_rate, train=goal.train, companion=companion,
    )


def _frozen(m: np.ndarray) -> np.ndarray:
    """A read-only copy: from_goal's learnings are cached and shared by every request."""
    out = np.array(m, dtype=np.float64)
    out.setflags(write=False)
    return out


def preset_learning(sc: Scenario) -> Learning | None:
    p = PRESETS.get(sc.preset)
    return from_goal(p.goal) if p is not None and p.goal else None


def _short(v: float) -> str:
    text = f"{float(v):.12g}"
    return "0" if text == "-0" else text


def curve_text(losses: tuple[float, ...]) -> str:
    """The curve as the form carries it: six significant digits per loss, enough for a drawing."""
    return " ".join(f"{v:.6g}" for v in losses)


# --- the loss, its gradients, and training -----------------------------------------------------------

def _scenarios(sc: Scenario, learning: Learning) -> tuple[GoalScenario, ...]:
    """The sentence on screen and, for a goal over two sentences, the other one: its tokens, embeddings
    and target from the goal, everything else (sizes, mechanisms, the weights) from the page."""
    w = sc.weights()
    main = GoalScenario(tokens=sc.tokens, x=sc.x, run_kwargs=sc.run_options(sc.mask_array(), w),
                        loss=learning.loss_spec())
    second = companion_scenario(learning)
    if second is None or second.x.shape[1] != sc.d_model or sc.cross:
        return (main,)
    other = replace(sc, tokens=second.tokens, x=second.x, blocked=frozenset(), padding=frozenset())
    return main, replace(second, run_kwargs=other.run_options(other.mask_array(), w))


def companion_scenario(learning: Learning) -> GoalScenario | None:
    """The goal's second sentence (the bank goal's ②), as app.lesson.goals has it; None for one sentence."""
    if not learning.companion:
        return None
    tokens = PRESETS[learning.companion].tokens
    return next((s for g in GOALS.values() for s in g.scenarios[1:] if s.tokens == tokens), None)


def companion_run(sc: Scenario, run: AttentionRun, learning: Learning) -> AttentionRun | None:
    """The second sentence's run with the page's weights, for the Learn panel's second figure."""
    scenarios = _scenarios(sc, learning)
    if len(scenarios) < 2:
        return None
    return run_attention(scenarios[1].x, **scenarios[1].run_kwargs)


def learning_loss_and_gradients(run: AttentionRun, learning: Learning) -> tuple[float, Gradients]:
    """The loss of the sentence on screen and its gradients."""
    with np.errstate(over="ignore", invalid="ignore"):
        return goal_loss_and_gradients(run, learning.loss_spec())


def companion_loss(learning: Learning, run: AttentionRun) -> float:
    """The loss of the goal's other sentence, given its run (companion_run)."""
    return goal_loss_and_gradients(run, companion_scenario(learning).loss)[0]


def check_steps(sc: Scenario, learning: Learning, steps: int) -> None:
    """The same bound as POST /api/train: steps × the operations of one forward pass."""
    cost = attention_cost(t=len(sc.tokens), s=len(sc.key_tokens), d_model=sc.d_model, num_heads=sc.num_heads,
                          d_k=sc.d_k, d_v=sc.d_v, score=sc.score, attention=sc.attention, scale=sc.scale)
    per_step = (cost.total_macs + cost.total_elementwise) * (2 if learning.companion else 1)
    if steps * per_step > settings.max_train_operations:
        most = max(settings.max_train_operations // per_step, 0)
        raise FormError("learn_goal", _("learn: {steps} steps of this size are more than one request may compute; "
                                        "at most {most} steps at a time here").format(steps=steps, most=most))


def train_page(sc: Scenario, learning: Learning, steps: int) -> tuple[Scenario, Learning]:
    """``steps`` steps of the learning's optimizer on the weights it trains. The trained weights become
    the scenario's edits; the curve grows by ``steps`` losses. Adam's moment estimates start afresh
    with every press of a button (the form carries weights, not optimizer state)."""
    if sc.attention == "linear" and learning.goal == "attention":
        raise FormError("learn_goal", _("learn: linear attention has no softmax weights to match; "
                                        "choose the output goal or softmax attention"))
    check_steps(sc, learning, steps)
    with np.errstate(over="ignore", invalid="ignore"):
        result = train_scenarios(_scenarios(sc, learning), steps=steps, optimizer=learning.optimizer,
                                 learning_rate=learning.learning_rate, train=learning.train)
    trained = {name: getattr(result.weights, name) for name in ALL_WEIGHT_NAMES}
    if not all(np.isfinite(v).all() for v in trained.values()) or not all(map(math.isfinite, result.losses)):
        raise FormError("learn_rate", _("learning rate: training diverged (a weight or the loss overflowed); "
                                        "lower the learning rate"))
    weights = sc.weights()
    weights.update(trained)
    trained_sc = replace(sc, edits=diff_edits(weights, sc.base_weights()))
    losses = learning.losses[:-1] + result.losses if learning.losses else result.losses
    first = learning.first_step
    if len(losses) > MAX_CURVE:
        first += len(losses) - MAX_CURVE
        losses = losses[-MAX_CURVE:]
    return trained_sc, replace(learning, losses=tuple(losses), first_step=first,
                               before=learning.before or encode_pin(sc))


def fit(learning: Learning | None, sc: Scenario) -> Learning | None:
    """The learning for a scenario whose structure an action changed (a token added or removed): a
    target that no longer fits starts again from the default, with an empty curve."""
    if learning is None:
        return None
    if sc.blocks:
        return None
    if learning.goal == "attention" and sc.attention == "linear":
        learning = replace(learning, goal="output")  # no softmax weights to match
    cols = len(sc.key_tokens) if learning.goal == "attention" else sc.d_model
    head = min(learning.head, sc.num_heads - 1)
    if learning.target.shape == (len(sc.tokens), cols) and head == learning.head:
        return learning
    return replace(learning, head=head, target=default_target(sc, learning.goal), rows=(), losses=(),
                   first_step=0, before="", companion="")

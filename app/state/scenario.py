"""The page's state: what a student has in front of them, read from and written to a plain form.

A scenario is a base (a preset, or a seed) plus the student's values. X is always sent whole;
of the weights the page shows one head's matrices as inputs and carries edits of the other heads
in one compact hidden field, so a form stays small whatever the number of heads.

Pure Python and NumPy: the web layer hands this module a mapping of form fields and renders what
it returns.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from functools import lru_cache
from typing import Any

import numpy as np

from app.config import settings
from app.i18n import gettext as _
from app.lesson.presets import DEFAULT_PRESET, PRESETS, Preset
from app.maths.attention import run_attention, seeded_weights
from app.maths.blocks import run_transformer, seeded_block_weights
from app.maths.masks import build_mask, default_window
from app.maths.positions import seeded_position_table
from app.maths.records import AttentionRun, TransformerRun
from app.maths.weights import ALL_WEIGHT_NAMES, BLOCK_WEIGHT_NAMES
from app.state.form import FormError


@dataclass(frozen=True)
class Scenario:
    preset: str  # the preset this scenario started from, "" after "new random weights"
    tokens: tuple[str, ...]
    x: np.ndarray  # (T, d_model)
    num_heads: int
    d_k: int
    d_v: int
    seed: int
    scale: bool
    # Edited weights relative to the base: (name, head, row, col) → value. Per-head weights
    # (app.maths.weights, per_head) carry the head; the rest use head 0, vectors row 0.
    edits: dict[tuple[str, int, int, int], float] = field(default_factory=dict)
    mask_mode: str = "none"  # one of MASK_MODES
    blocked: frozenset[tuple[int, int]] = frozenset()  # (query, key) cells the student hid
    padding: frozenset[int] = frozenset()  # key positions marked as padding: hidden from every query
    positional_encoding: str = "none"
    temperature: float = 1.0
    context_tokens: tuple[str, ...] = ()  # cross-attention when not empty
    context_x: np.ndarray | None = None  # (S, d_model)
    position_table: np.ndarray | None = None  # (max(T, S), d_model), learned encodings only
    window: int = 2  # local: ±window keys; strided: the stride
    score: str = "dot"
    attention: str = "softmax"
    blocks: int = 0  # 0: attention only; 1–4 transformer blocks
    d_ff: int = 0  # the FFN's hidden size (0: 4·d_model)
    activation: str = "relu"
    norm: str = "post"

    @property
    def ffn_size(self) -> int:
        return self.d_ff or 4 * self.d_model

    @property
    def cross(self) -> bool:
        return bool(self.context_tokens)

    @property
    def key_tokens(self) -> tuple[str, ...]:
        """The tokens keys and values come from: the source sentence, or the tokens themselves."""
        return self.context_tokens if self.cross else self.tokens

    def mask_array(self) -> np.ndarray | None:
        """(T, S) booleans, True = hidden: the pattern (causal, local, strided) ∪ the clicked cells ∪
        the padding columns."""
        t, s = len(self.tokens), len(self.key_tokens)
        if self.mask_mode == "none" and not self.blocked and not self.padding:
            return None
        pattern = build_mask(self.mask_mode, t, s, self.window)
        hidden = np.zeros((t, s), dtype=bool) if pattern is None else pattern
        for i, j in self.blocked:
            if i < t and j < s:
                hidden[i, j] = True
        for j in self.padding:
            if j < s:
                hidden[:, j] = True
        return hidden

    @property
    def d_model(self) -> int:
        return int(self.x.shape[1])

    @property
    def preset_obj(self) -> Preset | None:
        return PRESETS.get(self.preset)

    def base_weights(self) -> dict[str, np.ndarray]:
        """The preset's weights when the sizes still fit it, else the seeded ones; with blocks,
        the first block's FFN and LayerNorm weights too. Fresh copies, free to edit."""
        return {name: value.copy() for name, value in self._base.items()}

    @property
    def _base(self) -> dict[str, np.ndarray]:
        """Read-only; drawn once per combination of sizes, seed and preset, then shared."""
        return _base_weights(self.d_model, self.num_heads, self.d_k, self.d_v, self.seed, self.preset,
                             self.ffn_size if self.blocks else 0)

    def weights(self) -> dict[str, np.ndarray]:
        w = self.base_weights()
        for (name, h, r, c), value in self.edits.items():
            if name not in w:
                continue
            stack = as_stack(name, w[name])
            if h < stack.shape[0] and r < stack.shape[1] and c < stack.shape[2]:
                stack[h, r, c] = value
        return w

    def compute(self) -> tuple[AttentionRun, TransformerRun | None]:
        """The first block's attention (or the attention alone) and, with blocks, the stack.

        Raises FormError when the mask hides every key of some query."""
        mask = self.mask_array()
        if mask is not None and mask.all(axis=1).any():
            row = int(np.argmax(mask.all(axis=1)))
            raise FormError("mask", _("mask: query {n} ({token}) would see no key at all; unhide at least one key in "
                                      "its row, or widen the window").format(n=row + 1, token=self.tokens[row]))
        w = self.weights()
        options = self.run_options(mask, w)
        if not self.blocks:
            return run_attention(self.x, **options), None
        stack = run_transformer(
            self.x, blocks=self.blocks, d_ff=self.ffn_size, activation=self.activation, norm=self.norm,
            block_weights={name: w[name] for name in BLOCK_WEIGHT_NAMES}, **options,
        )
        return stack.blocks[0].attention, stack

    def run_options(self, mask: np.ndarray | None, w: Mapping[str, np.ndarray]) -> dict:
        """run_attention's keyword arguments (all but X) for this scenario, its mask and weights ``w``."""
        return dict(
            num_heads=self.num_heads, d_k=self.d_k, d_v=self.d_v, scale=self.scale, mask=mask,
            temperature=self.temperature, score=self.score, attention=self.attention,
            context=self.context_x if self.cross else None, seed=self.seed,
            positional_encoding=self.positional_encoding, position_table=self.position_table,
            weights={name: w[name] for name in ALL_WEIGHT_NAMES},
        )

    def run(self) -> AttentionRun:
        return self.compute()[0]


def as_stack(name: str, m: np.ndarray) -> np.ndarray:
    """A (stacks, rows, cols) view of any weight, so edits address every cell as (head, row, col)."""
    if m.ndim == 1:
        return m[None, None, :]
    if m.ndim == 2:
        return m[:, None, :] if name == "v_a" else m[None]
    return m


@dataclass(frozen=True)
class View:
    """How the scenario is shown; never changes a number."""

    stage: str = "x"
    head: int = 0
    show_all: bool = False
    decimals: int = 3
    inspect: str = ""  # "<matrix>.<head>.<row>.<col>", e.g. "softmax.0.2.1"
    block: int = 0  # which transformer block the stages show
    panels: frozenset[str] = frozenset()  # the extra panels open (and so computed): "lab", "cost"
    present: bool = False  # presenter mode: large type, one stage per screen, no editor
    quiz: bool = False  # predict-then-reveal: the stage in view hides its results
    revealed: frozenset[str] = frozenset()  # quiz cells shown again, as cell refs ("softmax.0.1.2")
    guess: str = ""  # the prediction just checked, as typed
    guess_ref: str = ""  # and the cell it was for
    pin: str = ""  # a pinned state (app.state.pin): every stage also shows its difference from it
    # The Learn panel's goal and training (app.state.learning.Learning), None without a goal. It adds the
    # backward stages; the trained weights themselves are the scenario's edits.
    learning: Any = None

    def __post_init__(self) -> None:
        # A projector shows one stage at a time; a quiz hides one stage's results, which the
        # other stages would show.
        if (self.present or self.quiz) and self.show_all:
            object.__setattr__(self, "show_all", False)


# The form fields that set the view: a link may add them to a preset (?preset=bank-river&stage=softmax).
VIEW_FIELDS = ("stage", "head", "block", "show_all", "decimals", "inspect", "panels", "present", "quiz", "revealed",
               "pin")


@lru_cache(maxsize=16)
def _base_weights(d_model: int, num_heads: int, d_k: int, d_v: int, seed: int, preset: str,
                  d_ff: int) -> dict[str, np.ndarray]:
    """The preset's weights where their shapes fit, else the seeded ones; with an FFN (d_ff > 0)
    the first block's FFN and LayerNorm weights too. Every edit, by every student, starts from
    these, so they are drawn once and frozen (Scenario.base_weights hands out copies)."""
    seeded = seeded_weights(d_model, num_heads, d_k, d_v, seed)
    base = {name: getattr(seeded, name) for name in ALL_WEIGHT_NAMES}
    p = PRESETS.get(preset)
    if p is not None and p.weights:
        for name, value in p.weight_arrays().items():
            if value.shape == base[name].shape:
                base[name] = value
    if d_ff:
        block = seeded_block_weights(d_model, d_ff, seed)
        base.update({name: getattr(block, name) for name in BLOCK_WEIGHT_NAMES})
    for value in base.values():
        value.setflags(write=False)
    return base


def from_preset(key: str) -> tuple[Scenario, View]:
    p = PRESETS.get(key) or PRESETS[DEFAULT_PRESET]
    x = np.array(p.x, dtype=np.float64)
    d_k = p.d_k if p.d_k is not None else max(1, x.shape[1] // p.num_heads)
    d_v = p.d_v if p.d_v is not None else d_k
    scenario = Scenario(
        preset=p.key, tokens=p.tokens, x=x, num_heads=p.num_heads,
        d_k=d_k, d_v=d_v, seed=p.seed, scale=p.scale, mask_mode=p.mask,
        positional_encoding=p.positional_encoding,
        context_tokens=p.context_tokens,
        context_x=np.array(p.context_x, dtype=np.float64) if p.context_tokens else None,
        window=p.window if p.window is not None else default_window(p.mask, len(p.context_tokens or p.tokens)),
        score=p.score, attention=p.attention, blocks=p.blocks, d_ff=p.d_ff,
    )
    return with_position_table(scenario), View(decimals=p.decimals, stage=p.stage)


def departure(sc: Scenario) -> tuple[bool, bool]:
    """How far the scenario has moved from its preset: (structure, values). Structure: the tokens,
    the sizes or a mechanism differ, so the preset's summary no longer describes the page. Values:
    only numbers differ (X, C, or an edited weight). (False, False) without a preset."""
    if sc.preset_obj is None:
        return False, False
    base, _ = from_preset(sc.preset)
    fields = ("tokens", "d_model", "num_heads", "d_k", "d_v", "scale", "temperature", "mask_mode", "blocked",
              "padding", "positional_encoding", "context_tokens", "score", "attention", "blocks")
    structure = any(getattr(sc, name) != getattr(base, name) for name in fields)
    structure |= sc.mask_mode in ("local", "strided") and sc.window != base.window
    structure |= bool(sc.blocks) and (sc.ffn_size, sc.activation, sc.norm) != (base.ffn_size, base.activation,
                                                                                 base.norm)
    if structure:
        return True, False
    same_c = sc.context_x is None or np.array_equal(sc.context_x, base.context_x)
    return False, bool(sc.edits) or not np.array_equal(sc.x, base.x) or not same_c


def with_position_table(sc: Scenario) -> Scenario:
    """Learned encodings need a table with a row per position; other encodings need none."""
    if sc.positional_encoding != "learned":
        return replace(sc, position_table=None)
    rows = max(len(sc.tokens), len(sc.key_tokens))
    table = seeded_position_table(rows, sc.d_model, sc.seed)
    if sc.position_table is not None:
        r = min(rows, sc.position_table.shape[0])
        c = min(sc.d_model, sc.position_table.shape[1])
        table[:r, :c] = sc.position_table[:r, :c]
    return replace(sc, position_table=table)


def filler_values(rows: int, cols: int, seed: int) -> np.ndarray:
    """Deterministic values for cells a size change creates (new token rows, new dimensions)."""
    rng = np.random.default_rng([seed, 1])  # a stream apart from the weights' stream
    return np.round(rng.uniform(-1.0, 1.0, (rows, cols)), 2)


def starting_source(preset: str, seed: int, t: int, d_model: int) -> tuple[tuple[str, ...], np.ndarray]:
    """The source sentence cross-attention starts from when it is ticked: the preset's own context
    (translate) when it fits d_model; else the preset's source_tokens, or "src 1" … "src T", with an
    embedding C of (S, d_model) drawn from the seed, so that C differs from X and K, V and the
    scores change visibly."""
    p = PRESETS.get(preset)
    if p is not None and p.context_tokens and p.d_model == d_model:
        return p.context_tokens, np.array(p.context_x, dtype=np.float64)
    tokens = p.source_tokens if p is not None and p.source_tokens else tuple(f"src {i + 1}" for i in range(t))
    rng = np.random.default_rng([seed, 2])  # a stream apart from the weights' and filler_values'
    return tokens, np.round(rng.uniform(-1.0, 1.0, (len(tokens), d_model)), 2)  # (S, d_model)


def encode_edits(edits: Mapping[tuple[str, int, int, int], float]) -> str:
    return " ".join(f"{n}.{h}.{r}.{c}={_num(v)}" for (n, h, r, c), v in sorted(edits.items()))


def diff_edits(weights: Mapping[str, np.ndarray], base: Mapping[str, np.ndarray]) -> dict:
    """Every cell of ``weights`` that differs from ``base``, as edits."""
    edits: dict[tuple[str, int, int, int], float] = {}
    for name in base:
        w, b = as_stack(name, weights[name]), as_stack(name, base[name])
        for h, r, c in zip(*np.nonzero(w != b), strict=True):
            edits[(name, int(h), int(r), int(c))] = float(w[h, r, c])
    return edits


def _num(v: float) -> str:
    return repr(float(v)).removesuffix(".0") if float(v).is_integer() else repr(float(v))


def format_input(v: float) -> str:
    """How a number appears in an input: short, and exact for what a student typed. A value that
    rounds to zero shows as 0, never -0 (adding 0.0 turns −0.0 into +0.0)."""
    return _num(round(float(v), 6) + 0.0)


def resize(sc: Scenario, *, d_model: int, num_heads: int, d_k: int, d_v: int) -> Scenario:
    """The same scenario at new sizes: values that still fit are kept, new cells are filled."""
    if (d_model, num_heads, d_k, d_v) == (sc.d_model, sc.num_heads, sc.d_k, sc.d_v):
        return normalise(sc)
    full = sc.weights()
    keep = min(d_model, sc.d_model)

    def widen(m: np.ndarray | None) -> np.ndarray | None:
        if m is None:
            return None
        out = filler_values(m.shape[0], d_model, sc.seed)
        out[:, :keep] = m[:, :keep]
        return out

    resized = replace(
        sc, x=widen(sc.x), context_x=widen(sc.context_x), position_table=widen(sc.position_table),
        num_heads=num_heads, d_k=d_k, d_v=d_v, edits={},
    )
    base = resized.base_weights()
    new = {name: value.copy() for name, value in base.items()}
    for name in ("w_q", "w_k", "w_v"):
        h = min(num_heads, sc.num_heads)
        r = min(d_model, sc.d_model)
        c = min(new[name].shape[2], full[name].shape[2])
        new[name][:h, :r, :c] = full[name][:h, :r, :c]
    # W_O rows belong to heads: keep head i's rows for the heads that remain.
    for h in range(min(num_heads, sc.num_heads)):
        rows = min(d_v, sc.d_v)
        new["w_o"][h * d_v : h * d_v + rows, :keep] = full["w_o"][h * sc.d_v : h * sc.d_v + rows, :keep]
    return replace(resized, edits=diff_edits(new, base))


def normalise(sc: Scenario) -> Scenario:
    """Drop edits that equal the base or no longer fit, so the hidden field stays minimal: the
    same edits as diff_edits(sc.weights(), sc.base_weights()), read off the edits alone."""
    stacks = {name: (stack.shape, stack.tolist()) for name, m in sc._base.items() for stack in [as_stack(name, m)]}
    edits = {}
    for key, value in sc.edits.items():
        name, h, r, c = key
        shape, stack = stacks.get(name, ((0, 0, 0), None))
        if h < shape[0] and r < shape[1] and c < shape[2] and stack[h][r][c] != value:
            edits[key] = value
    return replace(sc, edits=edits)


def add_token(sc: Scenario, source: bool = False) -> Scenario:
    """A new token at the end of the sentence (or of the source sentence)."""
    tokens, x = (sc.context_tokens, sc.context_x) if source else (sc.tokens, sc.x)
    field_name = "ctoken-0" if source else "token-0"
    if len(tokens) >= settings.max_tokens:
        raise FormError(field_name, _("tokens: at most {most}").format(most=settings.max_tokens))
    row = filler_values(len(tokens) + 1, sc.d_model, sc.seed)[-1:]
    new_tokens, new_x = (*tokens, "new"), np.vstack([x, row])
    changed = replace(sc, context_tokens=new_tokens, context_x=new_x) if source else (
        replace(sc, tokens=new_tokens, x=new_x))
    return with_position_table(changed)


def remove_token(sc: Scenario, index: int, source: bool = False) -> Scenario:
    """Drop one token; the cells hidden by hand and the padding marks are cleared (indices shift)."""
    tokens, x = (sc.context_tokens, sc.context_x) if source else (sc.tokens, sc.x)
    field_name = "ctoken-0" if source else "token-0"
    if len(tokens) <= 1:
        raise FormError(field_name, _("tokens: at least one token is needed"))
    if not 0 <= index < len(tokens):
        raise FormError(field_name, _("tokens: no such token"))
    new_tokens, new_x = tokens[:index] + tokens[index + 1 :], np.delete(x, index, axis=0)
    changed = replace(sc, context_tokens=new_tokens, context_x=new_x) if source else (
        replace(sc, tokens=new_tokens, x=new_x))
    return replace(changed, blocked=frozenset(), padding=frozenset())


def new_weights(sc: Scenario) -> Scenario:
    """"New random weights": leave the preset's designed weights and draw all from the seed."""
    return replace(sc, preset="", edits={})

"""The posted form read, in one place: the scenario and the view (read_form), the Learn panel
(read_learning), the pinned state (decode_pin), and the page's whole state from all three (read_page).

The named fields are validated once by app.state.form.PageForm, the grids by app.state.grids, every
number by app.state.numbers; each error is a FormError naming its field. The form carries the shape its
inputs were rendered with (``shape``) and the sizes the student asks for (``d_model``, ``num_heads``,
``d_k``, ``d_v``); when they differ the matrices are resized, keeping every value that still fits.
Pure Python and NumPy: the web layer hands this module a mapping of form fields.
"""

from __future__ import annotations

import math
from collections.abc import Mapping
from dataclasses import replace
from functools import lru_cache

import numpy as np

from app.i18n import gettext as _
from app.lesson.stages import read_goto
from app.maths.arithmetic import BLOCK_CELLS
from app.maths.backward import OPTIMIZERS
from app.maths.masks import default_window
from app.maths.weights import WEIGHTS, Sizes
from app.state.form import PANELS, FormError, read_fields
from app.state.grids import grid_rows, has_grid, read_matrix
from app.state.learning import GOAL_KINDS, MAX_CURVE, PAGE_TRAINABLE, Learning, default_target, preset_learning
from app.state.numbers import is_number, read_number, read_numbers
from app.state.pin import pin_fields
from app.state.scenario import Scenario, View, as_stack, normalise, resize, starting_source, with_position_table

MAX_LEARNING_RATE = 10.0
CACHED_PIN_CHARS = 64 * 1024  # pins up to this long are kept once read (64 of them: at most 4 MB of text)


def read_page(form: Mapping[str, str]) -> tuple[Scenario, View]:
    """The page's whole state: read_form, the pinned state checked too (a bad pin is a FormError
    naming ``pin``), and the Learn panel's goal and training."""
    sc, view = read_form(form)
    if view.pin:
        decode_pin(view.pin)
    return sc, replace(view, learning=read_learning(form, sc))


# --- the scenario and the view ----------------------------------------------------------------


def read_form(form: Mapping[str, str]) -> tuple[Scenario, View]:
    """The scenario and the view from a posted form, without the Learn panel. Raises FormError
    naming the first bad field."""
    f = read_fields(form)
    tokens = f.tokens
    t = len(tokens)
    r_d_model, r_heads, r_d_k, r_d_v, r_head, r_d_ff = f.shape
    x = read_matrix(form, "x", t, r_d_model, "X")
    # The inputs on screen (the selected head's matrices, the first block's) win over the hidden edits:
    # (name, head, first row, values), applied once the base they are compared with is known.
    shown: list[tuple[str, int, int, np.ndarray]] = []
    sizes = Sizes(d_model=r_d_model, h=r_heads, d_k=r_d_k, d_v=r_d_v, d_ff=r_d_ff)
    for name, spec in WEIGHTS.items():
        rows, cols = spec.grid(sizes)
        if name != "w_o" and rows and cols and has_grid(form, name):  # W_O: this head's rows, below
            label = (_("{matrix} (head {head})").format(matrix=spec.label, head=r_head + 1) if spec.per_head
                     else spec.label)
            shown.append((name, r_head if spec.per_head else 0, 0, read_matrix(form, name, rows, cols, label)))
    if has_grid(form, "w_o"):
        m = read_matrix(form, "w_o", r_d_v, r_d_model, _("W_O rows of head {head},").format(head=r_head + 1))
        shown.append(("w_o", 0, r_head * r_d_v, m))  # W_O is one matrix: this head's rows of it

    d_model = f.d_model or r_d_model
    num_heads = f.num_heads or r_heads
    # d_k follows d_model // h, and d_v follows d_k, unless the student set them explicitly.
    d_k = f.d_k or r_d_k
    if d_k == r_d_k and (d_model, num_heads) != (r_d_model, r_heads):
        d_k = max(1, d_model // num_heads)
    d_v = f.d_v or r_d_v
    if d_v == r_d_v and r_d_v == r_d_k:
        d_v = d_k

    # Cross-attention: a source sentence of S tokens; switched on, it starts as starting_source.
    context_tokens: tuple[str, ...] = ()
    context_x = None
    if f.cross:
        if f.ctokens:
            context_tokens = f.ctokens
            context_x = read_matrix(form, "c", len(context_tokens), r_d_model, "C")
        else:
            context_tokens, context_x = starting_source(f.preset, f.seed or 0, t, r_d_model)
    # Switching cross-attention on or off changes what the keys are: cells hidden by hand and
    # padding marks named the old keys.
    switched = f.cross != bool(f.ctokens)
    s_len = len(context_tokens) or t
    if switched:
        blocked = frozenset()
    elif "mask_grid" in form:  # the mask stage is on screen: its checkboxes are the truth
        blocked = frozenset((i, j) for i in range(t) for j in range(s_len) if f"block-{i}-{j}" in form)
    else:
        blocked = f.blocked
    position_table = None
    if f.positional_encoding == "learned" and has_grid(form, "pos"):
        # The rows on screen: a longer source sentence just switched on has more positions than
        # the form has rows; with_position_table fills them from the seed.
        position_table = read_matrix(form, "pos", grid_rows(form, "pos", max(t, s_len)), r_d_model, "P")
    d_ff = f.d_ff or r_d_ff or 4 * d_model
    if d_ff == r_d_ff and d_model != r_d_model:
        d_ff = 4 * d_model  # d_ff follows d_model unless the student set it

    rendered = Scenario(
        preset=f.preset, tokens=tokens, x=x, num_heads=r_heads, d_k=r_d_k, d_v=r_d_v,
        seed=f.seed or 0, scale=f.scale, edits=dict(f.edits),
        mask_mode=f.mask,
        window=f.window or default_window(f.mask, s_len),
        score=f.score,
        attention=f.attention,
        blocks=f.blocks or 0,
        d_ff=r_d_ff or d_ff,
        activation=f.activation,
        norm=f.norm,
        blocked=blocked,
        padding=frozenset() if switched else frozenset(j for j in range(s_len) if f"pad-{j}" in form),
        positional_encoding=f.positional_encoding,
        temperature=f.temperature,
        context_tokens=context_tokens,
        context_x=context_x,
        position_table=position_table,
    )
    rendered = replace(rendered, edits=with_shown(rendered.edits, shown, rendered._base))
    resized = resize(rendered, d_model=d_model, num_heads=num_heads, d_k=d_k, d_v=d_v)
    scenario = with_position_table(normalise(replace(resized, d_ff=d_ff)) if d_ff != resized.d_ff else resized)
    head = min(r_head if f.head is None else f.head, scenario.num_heads - 1)
    goto, goto_block = read_goto(f.goto)  # Next past a block's last stage names the next block
    block = min((f.block or 0) if goto_block is None else goto_block, max(0, scenario.blocks - 1))
    inspect = f.inspect
    if f.action == "inspect":  # the row/column form, for keyboards and no JavaScript
        inspect = _cell_ref(*f.cell_ref("inspect"), head, block)
    quiz, revealed = f.quiz, f.revealed
    guess = guess_ref = ""
    if quiz and f.action == "guess":  # a prediction: check it, then show the cell and its arithmetic
        guess, guess_ref = f.guess, _cell_ref(*f.cell_ref("guess"), head, block)
        if is_number(guess):
            revealed |= {guess_ref}
            inspect = guess_ref
    elif f.action == "reveal_all":
        quiz, revealed = False, frozenset()
    view = View(
        stage=goto or f.stage or "x",
        head=head,
        show_all=f.show_all,
        decimals=f.decimals or 3,
        inspect=inspect,
        block=block,
        panels=f.panels | ({f.show_panel} if f.show_panel in PANELS else set()),
        present=f.present,
        quiz=quiz,
        revealed=revealed if quiz else frozenset(),
        guess=guess,
        guess_ref=guess_ref,
        pin="" if f.action == "unpin" else f.pin,
    )
    return scenario, view


def _cell_ref(matrix: str, row: int, col: int, head: int, block: int) -> str:
    """"<matrix>.<owner>.<row>.<col>" from the inspector's (or a prediction's) row/column form; the
    owner is the head in view, the block in view for a block's matrix, 0 for the final output."""
    owner = 0 if matrix in ("final", "g_final", "g_w_o") else (block if matrix in BLOCK_CELLS else head)
    return f"{matrix}.{owner}.{row}.{col}"


def with_shown(edits: Mapping[tuple[str, int, int, int], float], shown: list[tuple[str, int, int, np.ndarray]],
               base: Mapping[str, np.ndarray]) -> dict[tuple[str, int, int, int], float]:
    """The edits once the matrices on screen are read: each shown cell replaces any edit of that
    cell, and is an edit itself only where it differs from ``base`` (a whole 64 × 64 grid compared
    in one NumPy call, not stored cell by cell and then normalised). Cells outside the base's
    shape are left out, as normalise and Scenario.weights leave them out."""
    regions = {}  # (name, head) → the rows and columns of it on screen, the values, the base
    for name, head, row0, m in shown:  # m: (rows, cols), from row row0 of the head's matrix
        stack = as_stack(name, base[name]) if name in base else None  # (stacks, R, C)
        if stack is not None and head < stack.shape[0]:
            rows, cols = max(0, min(m.shape[0], stack.shape[1] - row0)), min(m.shape[1], stack.shape[2])
            regions[(name, head)] = (row0, row0 + rows, cols, m[:rows, :cols], stack[head, row0:row0 + rows, :cols])
    out = {}
    for key, value in edits.items():  # one pass: an edit stays unless a shown cell replaces it
        region = regions.get(key[:2])
        if region is None or not (region[0] <= key[2] < region[1] and key[3] < region[2]):
            out[key] = value
    for (name, head), (row0, _end, _width, m, b) in regions.items():
        rows, cols = np.nonzero(m != b)  # m, b: (rows, cols)
        out.update(zip(((name, head, row0 + r, c) for r, c in zip(rows.tolist(), cols.tolist(), strict=True)),
                       m[rows, cols].tolist(), strict=True))
    return out


# --- the Learn panel ----------------------------------------------------------------------------

def _number(form: Mapping[str, str], name: str, label: str, lo: float, hi: float, default: float) -> float:
    raw = (form.get(name) or "").strip()
    if not raw:
        return default
    try:
        value = read_number(raw) if len(raw) <= 24 else math.nan
    except ValueError:
        value = math.nan
    if not (lo < value <= hi):  # also refuses nan
        raise FormError(name, _("{field}: enter a number above {lo} and at most {hi}").format(
            field=label, lo=f"{lo:g}", hi=f"{hi:g}"))
    return value


def _form_whole(form: Mapping[str, str], name: str, label: str, lo: int, hi: int, default: int) -> int:
    raw = (form.get(name) or "").strip()
    if not raw:
        return default
    if not (raw.isascii() and raw.isdigit() and len(raw) <= 9 and lo <= int(raw) <= hi):
        raise FormError(name, _("{field}: enter a whole number from {lo} to {hi}").format(field=label, lo=lo, hi=hi))
    return int(raw)


def _losses(form: Mapping[str, str]) -> tuple[float, ...]:
    parts = (form.get("learn_losses") or "").split()
    if len(parts) > MAX_CURVE:
        raise FormError("learn_losses", _("learn_losses: at most {most} values").format(most=MAX_CURVE))
    try:
        values = tuple(read_numbers([p for p in parts if len(p) <= 32], bounded=False))
    except ValueError:
        raise FormError("learn_losses", _("learn_losses: the loss curve cannot be read; reset the training")) from None
    if len(values) != len(parts) or not all(math.isfinite(v) and v >= 0 for v in values):
        raise FormError("learn_losses", _("learn_losses: the loss curve cannot be read; reset the training"))
    return values


def check_target(target: np.ndarray, sc: Scenario, goal: str, mask: np.ndarray | None) -> np.ndarray:
    """An attention target as the student typed it, each row divided by its sum (so 1 2 1 means
    ¼ ½ ¼). A negative entry, a row of zeros, or weight on a hidden key is a FormError naming it."""
    if goal == "output":
        return target
    for (i, j), v in np.ndenumerate(target):
        if v < 0:
            raise FormError(f"target-{i}-{j}", _("target row {row}, column {col}: a weight cannot be negative").format(
                row=i + 1, col=j + 1))
        if v > 0 and mask is not None and mask[i, j]:
            raise FormError(f"target-{i}-{j}", _("target row {row}, column {col}: key {col} ({token}) is hidden from "
                                                 "this query by the mask").format(row=i + 1, col=j + 1,
                                                                                   token=sc.key_tokens[j]))
    sums = target.sum(axis=1)  # (T,)
    for i, total in enumerate(sums):
        if total <= 0:
            raise FormError(f"target-{i}-0",
                            _("target row {row}: put some weight on at least one key").format(row=i + 1))
    return target / sums[:, None]  # (T, S)


def read_learning(form: Mapping[str, str], sc: Scenario) -> Learning | None:
    """The Learn panel's fields, or None without a goal. A target whose shape no longer fits the
    scenario (cross-attention switched, a size changed) starts again from the preset's or the default."""
    goal = form.get("learn_goal") or ""
    if goal == "":
        return None
    if goal not in GOAL_KINDS:
        raise FormError("learn_goal", _("{field}: choose one of {options}").format(field="learn_goal",
                                                                                   options=", ".join(GOAL_KINDS)))
    if sc.blocks:  # gradients cover attention without blocks: the Learn panel says so, and keeps no goal
        return None
    if goal == "attention" and sc.attention == "linear":  # no softmax weights to match: the output goal
        goal = "output"
    head = _form_whole(form, "learn_head", "learn_head", 0, sc.num_heads - 1, 0) if goal == "attention" else 0
    t = len(sc.tokens)
    cols = len(sc.key_tokens) if goal == "attention" else sc.d_model
    shape = (form.get("learn_shape") or "").strip()
    target = None
    if shape == f"{goal},{t},{cols}" and has_grid(form, "target"):
        target = check_target(read_matrix(form, "target", t, cols, _("target")), sc, goal, sc.mask_array())
    fresh = target is None
    preset = preset_learning(sc)
    if fresh:
        fits = preset is not None and preset.goal == goal and preset.target.shape == (t, cols)
        target = preset.target if fits else default_target(sc, goal)
    shown = "learn_shown" in form  # the panel's inputs were on screen: its checkboxes are the truth
    if shown:
        train = tuple(name for name in PAGE_TRAINABLE if form.get(f"learn_{name}") in ("on", "1", "true"))
        if not train:
            raise FormError("learn_w_q", _("learn: tick at least one weight to train"))
    else:
        train = tuple(w for w in (form.get("learn_train") or "").split() if w in PAGE_TRAINABLE) or (
            preset.train if preset is not None else ("w_q", "w_k"))
    rows: tuple[int, ...] = ()
    if goal == "attention" and not fresh:
        if shown:
            rows = tuple(i for i in range(t) if f"learn_row-{i}" in form)
            if not rows:
                raise FormError("learn_row-0", _("learn: tick at least one query row for the loss to count"))
            rows = () if len(rows) == t else rows
        else:
            rows = tuple(int(r) for r in (form.get("learn_rows") or "").split() if r.isdigit() and int(r) < t)
    elif fresh and preset is not None and preset.goal == goal:
        rows = preset.rows
    optimizer = form.get("learn_optimizer") or (preset.optimizer if preset else "adam")
    if optimizer not in OPTIMIZERS:
        raise FormError("learn_optimizer", _("{field}: choose one of {options}").format(
            field="learn_optimizer", options=", ".join(sorted(OPTIMIZERS))))
    learning_rate = _number(form, "learn_rate", _("learning rate"), 0.0, MAX_LEARNING_RATE,
                            preset.learning_rate if preset else 0.1)
    losses = () if fresh else _losses(form)
    first = _form_whole(form, "learn_first", "learn_first", 0, 10**9, 0) if losses else 0
    same = preset is not None and preset.goal == goal and preset.rows == rows
    companion = preset.companion if same else ""
    return Learning(goal=goal, head=head, target=target, rows=rows, optimizer=optimizer,
                    learning_rate=learning_rate, train=train, losses=losses, first_step=first,
                    before=(form.get("learn_before") or "") if losses else "", companion=companion)


# --- the pinned state ----------------------------------------------------------------------------


def decode_pin(text: str) -> Scenario:
    """The pinned scenario. Raises FormError naming ``pin`` when the text is not a pinned state.

    Every edit after a pin posts the same text, and a request both checks it (read_page) and uses it
    (app.view.context.page_context): a pin of ordinary size is inflated and read once, then shared (a
    Scenario is frozen). A large one is read each time, in the heavy lane (app.web.page_work.is_large_form),
    so the cache stays small."""
    if len(text) <= CACHED_PIN_CHARS:
        return _decode_cached(text)
    return _decode(text)


@lru_cache(maxsize=64)
def _decode_cached(text: str) -> Scenario:
    return _decode(text)


def _decode(text: str) -> Scenario:
    fields = pin_fields(text)
    try:
        sc, _view = read_form(fields)
    except FormError as e:
        raise FormError("pin", _("pin: the pinned state is not valid ({problem}); unpin it").format(
            problem=e.message)) from None
    return sc

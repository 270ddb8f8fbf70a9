"""What a page request costs, known before any array is made, and what its work hands back.

A page request (an edit, a step, a preset, an export) is answered on the event loop when it is light,
and in a worker process of the heavy lane (app.web.lanes) when it is not. Whether it is heavy is decided
from the form before the work starts: a form of many values or a large pinned state is heavy as it
stands; otherwise the scenario is read (a fraction of a millisecond at these sizes) and its work
estimated from its sizes, as the JSON API does (app.web.api.estimated_operations), plus the cells the page
will draw. The work itself is a function of plain data (``PageRequest``, the posted fields) that
returns plain data (``Rendered``), so it runs the same in this process or in another.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from types import SimpleNamespace

from app.maths.cost import attention_cost
from app.state.grids import count_values
from app.state.learning import STEP_ACTIONS
from app.state.scenario import Scenario, View

# A form of at most this many values (the default preset posts 84, a 16-token d_model 16 page about
# 1,000 without JavaScript) may be answered on the event loop; a joined grid counts each of its cells.
INLINE_VALUES = 400
INLINE_PIN_CHARS = 16 * 1024  # a pinned state this long is a 16-token d_model 16 scenario with edits
# Work answered on the event loop at most, in operations (about 4 ms a million on this project's 2-core
# test machine): the default preset's page is 0.05 M (1 ms), a 16-token d_model 16 page 0.4 M (2 ms); a
# 32-token page, or every stage of most scenarios, is over it; every stage at T = 64, d_model 64, 16 M.
INLINE_OPERATIONS = 600_000
PASS_OVERHEAD = 10_000  # a pass's Python and NumPy calls, some 50 of them
NUMPY_SPEEDUP = 10  # NumPy does this many operations of a pass in the time the page draws one
TRAIN_PASSES = 4  # a training step: the forward pass, the backward pass (about twice) and the optimiser
LEARNING_OPERATIONS = 1_000_000  # the Learn panel: its loss, gradient stages, curve and lines (4–20 ms)
CELL_OPERATIONS = 400  # drawing one heatmap cell (its colour, its number, its label)
BLOCK_OPERATIONS = 150_000  # a transformer block's place in the map, its stages' links and editors
PAGE_STAGES = 20  # the stages a page with every stage draws, a block's included, at the most


@dataclass(frozen=True)
class PageRequest:
    """What a page's work needs of its HTTP request: plain data, so that it crosses to a worker process."""

    htmx: bool
    urls: SimpleNamespace  # app.web.respond.page_urls
    port: int | None  # the server's port, for the class panel's hint
    accept_encoding: str = ""  # a large answer is compressed where it is made (app.web.compression)
    value_edit: bool = False  # htmx, and only numbers in the editor's grids changed (the stage body is enough)


@dataclass(frozen=True)
class Rendered:
    """A page's answer as plain data: its status, body, headers and, after a good edit, the state shown
    (a teacher's edit in a live class is kept in the room from it)."""

    status: int
    body: str | bytes
    media_type: str = "text/html; charset=utf-8"
    headers: Mapping[str, str] | None = None
    shown: tuple[Scenario, View] | None = None


def is_large_form(fields: Mapping[str, str]) -> bool:
    """A form that is heavy to read at all: many values, or a large pinned state to inflate."""
    return (count_values(fields) > INLINE_VALUES or len(fields.get("pin", "")) > INLINE_PIN_CHARS
            or len(fields.get("learn_before", "")) > INLINE_PIN_CHARS)


def page_operations(sc: Scenario, view: View, action: str = "") -> int:
    """The work a page of ``sc`` and ``view`` asks for, in operations: its forward pass (and a pinned
    state's), training steps when ``action`` is one, and the heatmap cells it will draw."""
    t, s = len(sc.tokens), len(sc.key_tokens)
    cost = attention_cost(t=t, s=s, d_model=sc.d_model, num_heads=sc.num_heads, d_k=sc.d_k, d_v=sc.d_v,
                          score=sc.score, attention=sc.attention, blocks=sc.blocks,
                          d_ff=sc.ffn_size if sc.blocks else 0)
    forward = (cost.total_macs + cost.total_elementwise) // NUMPY_SPEEDUP + PASS_OVERHEAD
    passes = 1 + (1 if view.pin else 0)
    learning = 0
    if view.learning is not None:  # the loss, gradients, curve and lines are drawn; then any steps taken
        learning = LEARNING_OPERATIONS + TRAIN_PASSES * STEP_ACTIONS.get(action, 0) * forward
    # A stage draws its inputs and results (the head and block in view): the widest are T × S, T × d_model,
    # S × d_model and, in a block, T × d_ff.
    stage_cells = (t + s) * max(s, sc.d_model, sc.d_k, sc.d_v, sc.ffn_size if sc.blocks else 0)
    stages = PAGE_STAGES if view.show_all else 2
    return (passes * forward + learning + CELL_OPERATIONS * stages * stage_cells
            + BLOCK_OPERATIONS * sc.blocks)

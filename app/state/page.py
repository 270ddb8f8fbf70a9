"""The page's state changed: a preset's, the buttons applied (tokens, weights, the pin, training and its
reset), and a lenient read that keeps what a student typed when a field is bad (the form itself is read
by app.state.reading). Pure: no request, no markup."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import replace

from app.config import settings
from app.i18n import gettext as _
from app.lesson.presets import DEFAULT_PRESET, PRESETS
from app.state.form import FormError, is_index
from app.state.grids import expand_grids
from app.state.learning import STEP_ACTIONS, Learning, fit, preset_learning, train_page
from app.state.permalink import state_query
from app.state.pin import encode_pin
from app.state.reading import decode_pin, read_page
from app.state.scenario import VIEW_FIELDS, Scenario, View, add_token, from_preset, new_weights, remove_token
from app.state.tokens import visible


def preset_page(key: str) -> tuple[Scenario, View]:
    """A preset's scenario and view, with its training goal in the Learn panel when it has one."""
    sc, view = from_preset(key)
    return sc, replace(view, learning=preset_learning(sc))


def link_fields(params: Mapping[str, str]) -> dict[str, str]:
    """A link's query as the form it stands for: a whole state (it has ``shape``), or a preset's state with the
    view settings the link gives (``?preset=bank-river&stage=softmax``)."""
    if "shape" in params:
        return dict(params)
    key = params.get("preset", DEFAULT_PRESET)
    sc, view = preset_page(key if key in PRESETS else DEFAULT_PRESET)
    return {**dict(state_query(sc, view)), **{k: params[k] for k in VIEW_FIELDS if k in params}}


def apply_action(sc: Scenario, view: View, action: str) -> tuple[Scenario, View]:
    """The buttons: pin the state or go back to the pin, add or remove a token, new random weights,
    and the Learn panel's training steps and reset."""
    if action == "pin":
        return sc, replace(view, pin=encode_pin(sc))
    if action == "restore_pin" and view.pin:
        sc = decode_pin(view.pin)
        return sc, replace(view, learning=fit(view.learning, sc))
    if view.learning is not None and action in STEP_ACTIONS:
        sc, learning = train_page(sc, view.learning, STEP_ACTIONS[action])
        return sc, replace(view, learning=learning)
    if view.learning is not None and action == "learn_reset" and view.learning.before:
        sc, learning = reset(view.learning)
        return sc, replace(view, learning=learning)
    sc = _structural(sc, action)
    return sc, replace(view, learning=fit(view.learning, sc))


def reset(learning: Learning) -> tuple[Scenario, Learning]:
    """The scenario before the first step, and an empty curve."""
    try:
        sc = decode_pin(learning.before)
    except FormError:
        raise FormError("learn_before",
                        _("learn: the state before training cannot be read; reload the preset")) from None
    return sc, replace(learning, losses=(), first_step=0, before="")


def _structural(sc: Scenario, action: str) -> Scenario:
    if action in ("add_token", "add_ctoken"):
        return add_token(sc, source=action == "add_ctoken")
    for prefix, source in (("remove_token-", False), ("remove_ctoken-", True)):
        if action.startswith(prefix):
            index = action.removeprefix(prefix)
            return remove_token(sc, int(index) if is_index(index) else -1, source=source)
    if action == "new_weights":
        return new_weights(sc)
    return sc


def lenient_read(fields: dict[str, str]) -> tuple[Scenario, View]:
    """The student's scenario with each bad field set aside (a number cell read as 0, anything
    else as its default), so a page without JavaScript comes back with every token, size and value
    the student had; the bad text itself stays in its input, marked, beside the message. A bad
    cell is set aside in its own field, so the grids are read one field per cell here."""
    patched = expand_grids(fields)
    patched.pop("action", None)
    set_aside: set[str] = set()
    for _attempt in range(50):
        try:
            sc, view = read_page(patched)
            sc.run()
            return sc, view
        except FormError as e:
            if e.field in set_aside or e.field == "shape":
                break  # setting it aside did not help: the preset's page instead
            set_aside.add(e.field)
            if e.field == "mask":  # a query with no key: drop the hand-hidden cells
                patched = {k: v for k, v in patched.items() if not k.startswith("block-")}
                patched["blocked"] = ""
                patched["mask"] = "none"
            elif "-" in e.field and not e.field.startswith(("token-", "ctoken-")):
                patched[e.field] = "0"  # a grid cell, bad or missing
            elif e.field in patched and e.field.startswith(("token-", "ctoken-")):
                patched[e.field] = visible(patched[e.field])[: settings.max_token_chars]
            else:
                patched.pop(e.field, None)
    return preset_page(fields.get("preset") if fields.get("preset") in PRESETS else DEFAULT_PRESET)

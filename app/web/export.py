"""Export: any panel's matrix as CSV, JSON or LaTeX, and the whole run as the API's JSON.

- POST /export   the page's own form plus ``export=<ref>|<format>`` (the pressed button) or
                 ``export_ref`` and ``export_format``; answers with an attachment
- POST /export/notebook, GET /export/notebook?<a permalink's query>
                 the state as a Jupyter notebook that rebuilds every stage and checks itself

The format functions are pure (NumPy and the standard library). The numbers are the pipeline's,
found through the page's PanelBuilder (app.view.context.panel_matrix), so a file holds what its panel
shows: CSV and JSON at full precision, LaTeX rounded as the panel prints it.
"""

from __future__ import annotations

import csv
import io
import json
import math
import re
from collections.abc import Callable, Sequence

import numpy as np
from fastapi import APIRouter, Request
from fastapi.responses import Response

from app.i18n import gettext as _
from app.state.form import FormError
from app.state.page import link_fields
from app.state.reading import read_form, read_page
from app.state.scenario import Scenario, View
from app.view.context import panel_matrix
from app.view.heatmap import format_numbers
from app.view.notebook import notebook_text
from app.web.api_answers import run_json
from app.web.lanes import LaneBusy, LaneTimeout
from app.web.page_work import INLINE_OPERATIONS, Rendered, is_large_form, page_operations
from app.web.respond import busy_message, encoded, field_error, posted_fields, refused_pin, respond

router = APIRouter()

# format → (file extension, media type)
FORMATS = {
    "csv": ("csv", "text/csv; charset=utf-8"),
    "json": ("json", "application/json"),
    "latex": ("tex", "application/x-latex"),
    "run": ("json", "application/json"),
}
RUN_FILENAME = "attention-run"
NOTEBOOK_MEDIA_TYPE = "application/x-ipynb+json"
MAX_REF = 40
# Files and messages are data, never a page: browsers must not sniff them into HTML.
NO_SNIFF = {"X-Content-Type-Options": "nosniff"}
# A cell starting with one of these is read as a formula by spreadsheets (CSV injection).
FORMULA_START = ("=", "+", "-", "@", "\t", "\r")
LATEX_MAX_COLS = 10  # amsmath's default MaxMatrixCols


def spreadsheet_safe(label: str) -> str:
    """A label a spreadsheet shows as text: one that could start a formula gets a leading apostrophe."""
    return "'" + label if label.startswith(FORMULA_START) else label


def matrix_csv(m: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str]) -> str:
    """A header row (an empty corner, then the column labels), then one row per matrix row: its
    label and every value at full precision (repr round-trips the float exactly)."""
    out = io.StringIO()
    writer = csv.writer(out)  # RFC 4180: quotes what needs quoting, CRLF line ends
    writer.writerow(["", *map(spreadsheet_safe, col_labels)])
    for label, row in zip(row_labels, np.asarray(m, dtype=np.float64).tolist(), strict=True):
        writer.writerow([spreadsheet_safe(label), *map(repr, row)])
    return out.getvalue()


def matrix_json(m: np.ndarray, row_labels: Sequence[str], col_labels: Sequence[str], name: str,
                title: str = "") -> str:
    """``{name, title, shape, row_labels, col_labels, values}``, values at full precision; a
    non-finite value (never in a panel today) becomes null, as JSON has no Infinity."""
    values = [[v if math.isfinite(v) else None for v in row] for row in np.asarray(m, dtype=np.float64).tolist()]
    body = {"name": name, "title": title, "shape": list(np.shape(m)), "row_labels": list(row_labels),
            "col_labels": list(col_labels), "values": values}
    return json.dumps(body, ensure_ascii=False, allow_nan=False)


def latex_number(text: str) -> str:
    """A number as the heatmap prints it, for LaTeX math mode, where "-" is typeset as a minus
    sign (a Unicode − would break pdfLaTeX)."""
    return {"inf": r"\infty", "-inf": r"-\infty", "nan": r"\mathrm{NaN}"}.get(text, text)


def matrix_latex(m: np.ndarray, decimals: int = 3) -> str:
    """``\\begin{bmatrix} a & b \\\\ c & d \\end{bmatrix}`` rounded as the panel prints it. Numbers
    only: no label goes into LaTeX. Wider than amsmath's 10 columns, MaxMatrixCols is raised first."""
    rows = [" & ".join(map(latex_number, row)) for row in format_numbers(np.asarray(m, dtype=np.float64), decimals)]
    cols = int(np.shape(m)[1]) if np.ndim(m) == 2 else 0
    setup = f"\\setcounter{{MaxMatrixCols}}{{{cols}}}\n" if cols > LATEX_MAX_COLS else ""
    return setup + "\\begin{bmatrix}\n  " + " \\\\\n  ".join(rows) + "\n\\end{bmatrix}\n"


def safe_filename(ref: str, ext: str) -> str:
    """An ASCII file name from a panel's ref: "softmax.0" → "softmax_0.csv"."""
    stem = re.sub(r"[^A-Za-z0-9_-]+", "_", ref).strip("_") or "matrix"
    return f"{stem}.{ext}"


def export_target(fields: dict[str, str]) -> tuple[str, str]:
    """(ref, format) from the pressed button (``export=ref|format``) or from ``export_ref`` and
    ``export_format``. Raises FormError for a missing or unknown format or an overlong ref."""
    if "export" in fields:
        ref, _bar, fmt = fields["export"].rpartition("|")
    else:
        ref, fmt = fields.get("export_ref", ""), fields.get("export_format", "")
    if fmt not in FORMATS:
        raise FormError("export_format", _("export_format: choose csv, json, latex or run"))
    if fmt != "run" and not 0 < len(ref) <= MAX_REF:
        raise FormError("export_ref", _("export_ref: name the matrix to export, e.g. softmax.0"))
    return ref, fmt


def _unprocessable(error: FormError, status: int = 422, headers: dict[str, str] | None = None) -> Rendered:
    """422 in the shape of the app's validation errors (app.main.validation_error)."""
    return field_error(error, "body", status, headers)


def _attachment(body: str | bytes, filename: str, media_type: str) -> Rendered:
    return Rendered(200, body, media_type, {"Content-Disposition": f'attachment; filename="{filename}"', **NO_SNIFF})


@router.post("/export", include_in_schema=False)
async def export(request: Request) -> Response:
    """A matrix's file, or the whole run's JSON."""
    return await _answer(request, await posted_fields(request), export_file)


@router.post("/export/notebook", include_in_schema=False)
async def notebook(request: Request) -> Response:
    """The page's state as a Jupyter notebook that rebuilds every stage and checks itself."""
    return await _answer(request, await posted_fields(request), notebook_file)


@router.get("/export/notebook", include_in_schema=False)
async def notebook_link(request: Request) -> Response:
    """The same from a permalink's query: ``/export/notebook?preset=causal&stage=softmax`` or a whole state."""
    return await _answer(request, link_fields(request.query_params), notebook_file)


async def _answer(request: Request, fields: dict[str, str], make: Callable[..., Rendered]) -> Response:
    """``make``'s file, on the event loop for a light scenario and in the heavy lane (app.web.lanes) for a large
    one. A pinned state that cannot be one is refused first (a bomb never waits for the heavy lane)."""
    refused = await refused_pin(fields)
    if refused is not None:
        return respond(_unprocessable(refused))
    if not is_large_form(fields):
        try:
            read = read_page(fields)
        except FormError as e:
            return respond(_unprocessable(e))
        if page_operations(*read) <= INLINE_OPERATIONS:
            return respond(make(fields, read))
    try:
        accept_encoding = request.headers.get("accept-encoding", "")
        return respond(await request.app.state.lanes.in_process(encoded, accept_encoding, make, fields, None))
    except (LaneBusy, LaneTimeout) as e:
        return respond(_unprocessable(FormError("export", busy_message(request, e)), 503, {"Retry-After": "5"}))


def notebook_file(fields: dict[str, str], read: tuple[Scenario, View] | None = None) -> Rendered:
    """The notebook (app.view.notebook), or the 422 naming the field that stops it."""
    try:
        sc, view = read or read_page(fields)
        body = notebook_text(sc, view)
    except FormError as e:
        return _unprocessable(e)
    return _attachment(body, f"attention-{sc.preset or 'scenario'}.ipynb", NOTEBOOK_MEDIA_TYPE)


def export_file(fields: dict[str, str], read: tuple[Scenario, View] | None = None) -> Rendered:
    """The file the form asks for (``export``), or the 422 naming the field that stops it."""
    try:
        ref, fmt = export_target(fields)
        sc, view = read or read_form(fields)
        ext, media_type = FORMATS[fmt]
        if fmt == "run":
            first, stack = sc.compute()
            body = run_json(first, list(sc.tokens), stack)
            return _attachment(body, f"{RUN_FILENAME}.{ext}", media_type)
        found = panel_matrix(sc, view, ref)
        if found is None:
            raise FormError("export_ref", _("export_ref: no panel shows that matrix for this scenario"))
    except FormError as e:
        return _unprocessable(e)
    m, rows, cols, title = found
    if fmt == "csv":
        body = matrix_csv(m, rows, cols)
    elif fmt == "json":
        body = matrix_json(m, rows, cols, ref, title)
    else:
        body = matrix_latex(m, view.decimals)
    return _attachment(body, safe_filename(ref, ext), media_type)

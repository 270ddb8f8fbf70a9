"""The cells of a run a student can point at: forward matrices, and with a goal's gradients, backward ones.

The inspector, the quiz and the live class's predictions all name a cell by a reference such as
"softmax.0.2.1"; this is where such a reference is checked against the run and its matrix found.
"""

from __future__ import annotations

import numpy as np

from app.maths.arithmetic import CellRef, cell_matrix, parse_ref
from app.maths.backward import Gradients
from app.maths.gradient_arithmetic import GRADIENT_CELLS, gradient_matrix, parse_gradient_ref
from app.maths.records import AttentionRun, TransformerRun


def parse_cell(text: str, run: AttentionRun, stack: TransformerRun | None = None,
               grads: Gradients | None = None) -> CellRef | None:
    """A cell reference of this run, forward or (with ``grads``) backward; None when it names no cell."""
    return parse_ref(text, run, stack) or (parse_gradient_ref(text, grads) if grads is not None else None)


def matrix_of(ref: CellRef, run: AttentionRun, stack: TransformerRun | None = None,
              grads: Gradients | None = None) -> np.ndarray:
    """The whole matrix a valid reference points into (its cell is ``[ref.row, ref.col]``)."""
    if ref.matrix in GRADIENT_CELLS:
        return gradient_matrix(grads, ref.matrix, ref.head)
    return cell_matrix(run, ref, stack)

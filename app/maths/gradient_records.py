"""The records of a gradient's arithmetic (app.maths.gradient_arithmetic): each kind of cell's worked example, as the
page's inspector shows it (app.view.gradient_worked)."""

from __future__ import annotations

import math
from dataclasses import dataclass

from app.maths.arithmetic import CellRef, Term


@dataclass(frozen=True)
class Indexed:
    """One entry of a matrix in a formula: ``name`` ("A", "W_O", "∂Scores" for ∂L/∂Scores, …) at
    (row, col), each a number counted from 1 or the letter of the index summed over."""

    name: str
    row: str
    col: str


@dataclass(frozen=True)
class LossTerm:
    """The attention loss's own term on A: ∂/∂A_ij of −(1/T)·Σ t·log A is −t_ij / (T·A_ij), 0 where t_ij = 0."""

    target: float  # t_ij
    weight: float  # A_ij
    count: int  # T
    value: float


@dataclass(frozen=True)
class LossGradient:
    """∂L/∂MultiHead_ij, where the backward pass starts: 2·(MultiHead_ij − target_ij) / (T·d_model)
    for the mean squared error, 0 for the attention loss (it is on a head's weights, not the output)."""

    kind = "grad_loss"
    ref: CellRef
    title: str
    loss: str  # "mse" or "attention"
    output: float | None  # MultiHead_ij (mse only)
    target: float | None  # target_ij (mse only)
    count: int  # T·d_model, the number of entries the mean is over
    result: float
    head: int | None = None  # the attention loss's head


@dataclass(frozen=True)
class GradientSum:
    """``of`` = Σ_index left·right (+ the attention loss's term), written term by term."""

    kind = "grad_sum"
    ref: CellRef
    title: str
    of: Indexed  # the gradient entry being explained
    index: str  # the letter summed over
    left: Indexed
    right: Indexed
    terms: tuple[Term, ...]
    total: float  # Σ products (+ direct)
    direct: LossTerm | None = None
    # Where an operand comes from when the page does not show it: prose with $…$ maths, written here
    # (never a token), for app.view.typeset.prose.
    note: str = ""


@dataclass(frozen=True)
class SoftmaxBackwardEntry:
    token: str
    weight: float  # A_ik
    grad: float  # ∂L/∂A_ik
    product: float  # A_ik · ∂L/∂A_ik
    selected: bool
    hidden: bool = False  # a hidden key: A_ik = 0 and ∂L/∂A_ik = 0


@dataclass(frozen=True)
class SoftmaxBackward:
    """∂L/∂Scaled_ij = A_ij·(∂L/∂A_ij − Σ_k A_ik·∂L/∂A_ik): the gradient on A times the softmax's
    Jacobian diag(A_i) − A_i·A_iᵀ, with the row sum written out key by key."""

    kind = "grad_softmax"
    ref: CellRef
    title: str
    entries: tuple[SoftmaxBackwardEntry, ...]
    row_sum: float  # Σ_k A_ik · ∂L/∂A_ik
    weight: float  # A_ij
    grad: float  # ∂L/∂A_ij
    result: float
    target: float | None = None  # t_ij when the attention loss is on this head: then result = (A_ij − t_ij)/T
    count: int = 0  # T, with ``target``


@dataclass(frozen=True)
class GradientDivision:
    """∂L/∂Scores_ij = ∂L/∂Scaled_ij / (√d_k·τ): the scaling divides the gradient as it divided the score."""

    kind = "grad_division"
    ref: CellRef
    title: str
    grad: float  # ∂L/∂Scaled_ij
    divisor: float
    divisor_text: str
    result: float
    bias: bool = False  # ALiBi's bias was added: a constant, it passes the gradient on unchanged


@dataclass(frozen=True)
class RopeGradient:
    """∂L/∂Q through RoPE's rotation (or ∂L/∂K): the gradient on the rotated pair, turned back by −α.

    ∂L/∂Q_{i,2p} = ∂L/∂Q̃_{i,2p}·cos α + ∂L/∂Q̃_{i,2p+1}·sin α,
    ∂L/∂Q_{i,2p+1} = −∂L/∂Q̃_{i,2p}·sin α + ∂L/∂Q̃_{i,2p+1}·cos α,   α = pos·θ_p, θ_p = 10000^(−2p/d_k).
    An odd last dimension is not rotated: its gradient is passed on as it is.
    """

    kind = "grad_rope"
    ref: CellRef
    title: str
    rotated: tuple[GradientSum, ...]  # ∂L/∂Q̃ at (2p, 2p+1), or at the one unrotated last dimension
    first: bool  # the cell is the pair's first member (2p)
    position: int  # pos, counted from 0 as RoPE turns: the first token is not turned
    pair: int  # p, counted from 0
    theta: float  # θ_p
    angle: float  # α = pos·θ_p (0 for an unrotated dimension)
    d_k: int
    result: float

    @property
    def paired(self) -> bool:
        return len(self.rotated) == 2

    @property
    def cos(self) -> float:
        return math.cos(self.angle)

    @property
    def sin(self) -> float:
        return math.sin(self.angle)


@dataclass(frozen=True)
class HiddenKey:
    """A hidden key's ∂L/∂A, ∂L/∂Scaled or ∂L/∂Scores: the weight is the constant exp(−∞) = 0."""

    kind = "grad_hidden"
    ref: CellRef
    title: str
    reason: str  # plain text, naming the tokens
    query_token: str
    key_token: str
    result: float = 0.0


@dataclass(frozen=True)
class GradientNote:
    """A gradient whose arithmetic is not a short sum (linear attention's ∂L/∂Q, ∂L/∂K): its value and why."""

    kind = "grad_note"
    ref: CellRef
    title: str
    reason: str  # prose with $…$ maths, written here (never a token)
    result: float


GradientExplanation = (LossGradient | GradientSum | SoftmaxBackward | GradientDivision | RopeGradient | HiddenKey
                       | GradientNote)

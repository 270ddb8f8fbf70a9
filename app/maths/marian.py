"""A real translator's forward pass: a Marian transformer (Bergamot's "tiny" English ↔ Portuguese students),
greedy, in NumPy, as the wheel's own engine computes it (app.maths.marian_files reads the files).

The encoder–decoder of seed 003, with the decoder's self-attention replaced by a recurrent unit:

    X⁰  = √d_model · Wemb[source] + PE(0..S)          (S, d_model); PE: sin on the first half, cos on the second
    for each of the 6 encoder layers:
        A   = LayerNorm(X + MultiHead(X, X, X)·W_O + b_O)                       (post-norm, Marian's "dan")
        X   = LayerNorm(A + ReLU(A·W₁ + b₁)·W₂ + b₂)
    H   = X                                                                       (S, d_model): K and V's source

    step t (the first input is a zero vector, then √d_model · Wemb[yₜ₋₁]; + PE(t)):
        for each of the 2 decoder layers, on its input y (1, d_model):
            fₜ = σ(y·W_f + b_f);  cₜ = fₜ ⊙ cₜ₋₁ + (1 − fₜ) ⊙ (y·W)                  SSRU (Kim et al., 2019)
            y  = LayerNorm(y + ReLU(cₜ))
            Qᵢ = y·W_Qⁱ + b_Qⁱ;  Kᵢ = H·W_Kⁱ + b_Kⁱ;  Vᵢ = H·W_Vⁱ + b_Vⁱ           cross-attention: Q from the
            y  = LayerNorm(y + Concat(softmax(Qᵢ·Kᵢᵀ/√d_k)·Vᵢ)·W_O + b_O)         decoder, K and V from the encoder
            y  = LayerNorm(y + ReLU(y·W₁ + b₁)·W₂ + b₂)
        logits = y·Wembᵀ + b over the shortlist's pieces; yₜ = argmax, until </s> (or 2.5 × S pieces)

The SSRU has no attention over the earlier target words: its state cₜ carries them, one multiply-add per step, so
a step costs the same however long the translation is. Every product is float32; the weights are the 8-bit values
the model ships (int8 ÷ their multiplier), as the wheel's engine uses them: its greedy translations are ours
(tests/maths/test_marian_reference.py). Bergamot's own engine would also round the activations to 8 bits.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from app.maths.attention import concat_heads, masked_softmax
from app.maths.blocks import layer_norm
from app.maths.marian_files import TranslatorFiles
from app.maths.real_model import Tokenized
from app.maths.records import HeadResult

END = 0  # </s>, the end of a sentence, in both vocabularies
CANDIDATES = 5
MAX_SOURCE_PIECES = 128


@dataclass(frozen=True)
class Step:
    """One greedy step: the piece chosen, its probability and the next best."""

    id: int
    token: str
    probability: float  # softmax of the logits over the shortlist's pieces
    candidates: tuple[tuple[int, str, float], ...]  # the best CANDIDATES: (id, piece, probability)


@dataclass(frozen=True)
class Translation:
    """One sentence translated, every attention map and what each step chose."""

    direction: str
    source: tuple[str, ...]  # SentencePiece pieces (▁ for a space), then "</s>"
    source_ids: np.ndarray  # (S,)
    target: tuple[str, ...]  # the translation's pieces, without the end
    target_ids: np.ndarray  # (T,)
    text: str  # the translation, detokenised
    encoder_inputs: np.ndarray  # (6, S, d_model): each encoder layer's input
    encoder_output: np.ndarray  # (S, d_model): H, where the cross-attention's K and V come from
    encoder_attention: np.ndarray  # (6, h, S, S)
    decoder_queries: np.ndarray  # (2, T, d_model): each decoder layer's input to its cross-attention (after the SSRU)
    cross_attention: np.ndarray  # (2, h, T, S): each target piece's row over the source's pieces
    steps: tuple[Step, ...]  # one per piece of the target, and the step that chose </s> if it came
    shortlist: np.ndarray  # the target pieces this sentence may be translated into

    @property
    def alignment(self) -> np.ndarray:
        """(T, S): the last layer's first head, the head Marian trains to follow word alignments
        (transformer-guided-alignment-layer: last; its alignment is that layer's first head's weights)."""
        return self.cross_attention[-1, 0]


def positions(start: int, count: int, d_model: int) -> np.ndarray:
    """Marian's sinusoids: PE(p)ᵢ = sin(p·10000^(−i/(d/2−1))) for i < d/2, then the cosines, (count, d_model)."""
    half = d_model // 2
    increment = np.float32(math.log(10000.0) / (half - 1))
    p = np.arange(start, start + count, dtype=np.float32)[:, None]  # (count, 1)
    angles = p * np.exp(np.arange(half, dtype=np.float32) * -increment)[None, :]  # (count, d/2)
    return np.concatenate([np.sin(angles), np.cos(angles)], axis=1).astype(np.float32)


def affine(files: TranslatorFiles, x: np.ndarray, name: str, bias: str | None = None) -> np.ndarray:
    """x·B (+ b), B one of the model's matrices (k, m)."""
    y = x @ files.matrix(name)
    return y + files.weights[bias] if bias else y


def norm(files: TranslatorFiles, x: np.ndarray, prefix: str) -> np.ndarray:
    w = files.weights
    return layer_norm(x, w[f"{prefix}_ln_scale"], w[f"{prefix}_ln_bias"], files.config.eps).output.astype(np.float32)


def split(x: np.ndarray, heads: int) -> np.ndarray:
    """(T, h·d_k) → (h, T, d_k)."""
    t, d = x.shape
    return x.reshape(t, heads, d // heads).transpose(1, 0, 2)


@dataclass(frozen=True)
class Heads:
    q: np.ndarray  # (h, T, d_k)
    k: np.ndarray  # (h, S, d_k)
    v: np.ndarray  # (h, S, d_k)
    scores: np.ndarray  # (h, T, S)  Q·Kᵀ
    scaled: np.ndarray  # (h, T, S)  × 1/√d_k
    weights: np.ndarray  # (h, T, S)  softmax
    output: np.ndarray  # (h, T, d_k)

    def head(self, i: int) -> HeadResult:
        return HeadResult(q=self.q[i], k=self.k[i], v=self.v[i], scores=self.scores[i], scaled=self.scaled[i],
                          masked=self.scaled[i], softmax=self.weights[i], output=self.output[i])


def attention_heads(files: TranslatorFiles, prefix: str, x_q: np.ndarray, k: np.ndarray, v: np.ndarray) -> Heads:
    """Every head of one attention layer: Q from ``x_q``, K and V already projected and split (h, S, d_k).
    Marian scales by multiplying with 1/√d_k (not dividing: the last bit of a float can differ)."""
    heads = files.config.heads
    q = split(affine(files, x_q, f"{prefix}_Wq", f"{prefix}_bq"), heads)  # (h, T, d_k)
    scores = q @ k.transpose(0, 2, 1)  # (h, T, S)
    scaled = scores * np.float32(1.0 / math.sqrt(files.config.d_k))
    _, weights = masked_softmax(scaled, None)
    weights = weights.astype(np.float32)
    return Heads(q=q, k=k, v=v, scores=scores, scaled=scaled, weights=weights, output=weights @ v)


def keys_values(files: TranslatorFiles, prefix: str, x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    heads = files.config.heads
    return (split(affine(files, x, f"{prefix}_Wk", f"{prefix}_bk"), heads),
            split(affine(files, x, f"{prefix}_Wv", f"{prefix}_bv"), heads))  # (h, S, d_k) twice


def attend_block(files: TranslatorFiles, prefix: str, x: np.ndarray, heads: Heads) -> np.ndarray:
    """LayerNorm(x + Concat(heads)·W_O + b_O)."""
    return norm(files, x + affine(files, concat_heads(heads.output), f"{prefix}_Wo", f"{prefix}_bo"), f"{prefix}_Wo")


def ffn_block(files: TranslatorFiles, prefix: str, x: np.ndarray) -> np.ndarray:
    """LayerNorm(x + ReLU(x·W₁ + b₁)·W₂ + b₂)."""
    hidden = np.maximum(affine(files, x, f"{prefix}_W1", f"{prefix}_b1"), np.float32(0))
    return norm(files, x + affine(files, hidden, f"{prefix}_W2", f"{prefix}_b2"), f"{prefix}_ffn")


def encode(files: TranslatorFiles, ids: np.ndarray) -> tuple[np.ndarray, np.ndarray, np.ndarray]:
    """The encoder: every layer's input (6, S, d), its output H (S, d) and every head's weights (6, h, S, S)."""
    d = files.config.d_model
    x = files.embedding(ids) * np.float32(math.sqrt(d)) + positions(0, len(ids), d)  # (S, d_model)
    inputs, maps = [], []
    for layer in range(1, files.config.encoder_layers + 1):
        inputs.append(x)
        prefix = f"encoder_l{layer}_self"
        heads = attention_heads(files, prefix, x, *keys_values(files, prefix, x))
        maps.append(heads.weights)
        x = ffn_block(files, f"encoder_l{layer}_ffn", attend_block(files, prefix, x, heads))
    return np.stack(inputs), x, np.stack(maps)


def ssru(files: TranslatorFiles, prefix: str, y: np.ndarray, c: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """One SSRU step: fₜ = σ(y·W_f + b_f), cₜ = fₜ ⊙ cₜ₋₁ + (1 − fₜ) ⊙ (y·W); out LayerNorm(y + ReLU(cₜ))."""
    f = np.float32(1) / (np.float32(1) + np.exp(-affine(files, y, f"{prefix}_Wf", f"{prefix}_bf")))
    c = f * c + (np.float32(1) - f) * affine(files, y, f"{prefix}_W")
    return norm(files, y + np.maximum(c, np.float32(0)), f"{prefix}_ffn"), c


def softmax(z: np.ndarray) -> np.ndarray:
    e = np.exp(z - z.max())
    return e / e.sum()


def tokenize(files: TranslatorFiles, text: str) -> Tokenized:
    """The source text as the encoder reads it: SentencePiece pieces (▁ for a space), then the end piece."""
    encoding = files.tokenizer.encode(text)
    return Tokenized(text=text, tokens=(*encoding.tokens, "</s>"),
                     ids=np.asarray([*encoding.ids, END], dtype=np.int64))


def translate(files: TranslatorFiles, text: str) -> Translation:
    """Greedy translation of ``text``, every map recorded."""
    cfg, tokenizer = files.config, files.tokenizer
    read = tokenize(files, text)
    source_ids = read.ids  # (S,)
    if len(source_ids) > MAX_SOURCE_PIECES:
        raise ValueError(f"text: {len(source_ids)} pieces, more than {MAX_SOURCE_PIECES}")
    encoder_inputs, h, encoder_attention = encode(files, source_ids)
    cross = [keys_values(files, f"decoder_l{layer}_context", h) for layer in range(1, cfg.decoder_layers + 1)]
    allowed = files.shortlist.allowed(source_ids)  # (n,)
    output_rows = files.embedding(allowed)  # (n, d_model): the output layer's Wemb, tied
    output_bias = files.weights["decoder_ff_logit_out_b"][allowed]  # (n,)

    d = cfg.d_model
    states = [np.zeros((1, d), np.float32) for _ in range(cfg.decoder_layers)]  # the SSRUs' cₜ
    queries: list[list[np.ndarray]] = [[] for _ in range(cfg.decoder_layers)]
    rows: list[list[np.ndarray]] = [[] for _ in range(cfg.decoder_layers)]
    steps: list[Step] = []
    previous = None
    for t in range(int(cfg.max_length_factor * len(source_ids))):
        if previous is None:  # Marian starts from a zero vector, not from a start piece
            word = np.zeros((1, d), np.float32)
        else:
            word = files.embedding([previous]) * np.float32(math.sqrt(d))
        y = word + positions(t, 1, d)  # (1, d_model)
        for layer in range(cfg.decoder_layers):
            y, states[layer] = ssru(files, f"decoder_l{layer + 1}_rnn", y, states[layer])
            prefix = f"decoder_l{layer + 1}_context"
            heads = attention_heads(files, prefix, y, *cross[layer])
            queries[layer].append(y[0])
            rows[layer].append(heads.weights[:, 0, :])  # (h, S)
            y = ffn_block(files, f"decoder_l{layer + 1}_ffn", attend_block(files, prefix, y, heads))
        logits = (y @ output_rows.T)[0] + output_bias  # (n,)
        best = np.argsort(-logits, kind="stable")[:CANDIDATES]
        p = softmax(logits.astype(np.float64))
        chosen = int(allowed[best[0]])
        steps.append(Step(id=chosen, token=tokenizer.id_to_token(chosen), probability=float(p[best[0]]),
                          candidates=tuple((int(allowed[i]), tokenizer.id_to_token(int(allowed[i])), float(p[i]))
                                           for i in best)))
        if chosen == END:
            break
        previous = chosen

    produced = [s.id for s in steps if s.id != END]
    n = len(produced)
    return Translation(
        direction=files.direction, source=read.tokens, source_ids=source_ids,
        target=tuple(tokenizer.id_to_token(i) for i in produced), target_ids=np.asarray(produced, dtype=np.int64),
        text=tokenizer.decode(produced), encoder_inputs=encoder_inputs, encoder_output=h,
        encoder_attention=encoder_attention,
        decoder_queries=np.stack([np.stack(q[:n]) if n else np.zeros((0, d), np.float32) for q in queries]),
        cross_attention=np.stack([np.stack(r[:n], axis=1) if n else np.zeros((cfg.heads, 0, len(source_ids)),
                                                                           np.float32) for r in rows]),
        steps=tuple(steps), shortlist=allowed)


def cross_head(files: TranslatorFiles, run: Translation, layer: int, head: int) -> HeadResult:
    """One cross-attention head stepped through: Q from the decoder's states (T, d_k), K and V from the
    encoder's output H (S, d_k), and everything between."""
    prefix = f"decoder_l{layer + 1}_context"
    heads = attention_heads(files, prefix, run.decoder_queries[layer], *keys_values(files, prefix, run.encoder_output))
    return heads.head(head)


def encoder_head(files: TranslatorFiles, run: Translation, layer: int, head: int) -> HeadResult:
    """One encoder self-attention head stepped through, from its layer's input."""
    prefix = f"encoder_l{layer + 1}_self"
    x = run.encoder_inputs[layer]
    return attention_heads(files, prefix, x, *keys_values(files, prefix, x)).head(head)

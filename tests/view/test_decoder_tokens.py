"""How the decoder's byte-level pieces are shown (app.view.decoder_view): a space as ␣, a newline as ↵, a tab as
⇥, whole characters as themselves, and the bytes of a character split across tokens as ⟨f0 9f⟩; never "�" (but
for the piece that is "�") nor the byte alphabet's stand-ins ("Ã©" for é). Checked on named pieces, on every
tokenizer text of tests/fixtures/smollm2_reference.npz (whose pieces Hugging Face's tokenizer wrote) and on
every piece of the vocabulary."""

from __future__ import annotations

import re
from pathlib import Path

import numpy as np
import pytest

from app.maths.decoder_files import load_decoder_files
from app.view.pieces import piece_bytes, readable, token_text

FIXTURE = Path(__file__).resolve().parents[1] / "fixtures" / "smollm2_reference.npz"
SHOWN = {"␣": b" ", "↵": b"\n", "⇥": b"\t", "␍": b"\r"}
HEX_GROUP = re.compile(r"⟨([0-9a-f]{2}(?: [0-9a-f]{2})*)⟩")


def _tokenizer_texts() -> list[tuple[str, list[str]]]:
    with np.load(FIXTURE) as npz:
        return [(str(npz[f"tok_text_{i}"]), npz[f"tok_tokens_{i}"].tolist()) for i in range(int(npz["tok_n"]))]


TEXTS = _tokenizer_texts()


def bytes_shown(shown: str) -> bytes:
    """What a reader of ``readable``'s output gets back: ⟨hex⟩ groups as their bytes, ␣ ↵ ⇥ ␍ as the
    characters they stand for, every other character as its UTF-8."""
    out, i = bytearray(), 0
    while i < len(shown):
        group = HEX_GROUP.match(shown, i)
        if group:
            out += bytes.fromhex(group.group(1))
            i = group.end()
        else:
            out += SHOWN.get(shown[i], shown[i].encode("utf-8"))
            i += 1
    return bytes(out)


@pytest.mark.parametrize(("piece", "shown", "raw", "text"), [
    ("Ġcapital", "␣capital", b" capital", " capital"),
    ("Ċ", "↵", b"\n", "\n"),
    ("ĉ", "⇥", b"\t", "\t"),
    ("čĊ", "␍↵", b"\r\n", "\r\n"),
    ("ĊĠĠĠ", "↵␣␣␣", b"\n   ", "\n   "),
    ("Ã©", "é", "é".encode(), "é"),
    ("ĠdÃ©", "␣dé", " dé".encode(), " dé"),
    ("ĠðŁĺ", "␣⟨f0 9f 98⟩", b" \xf0\x9f\x98", " "),  # the first three bytes of 😀 … 😿: only the space is whole
    ("Ģ", "⟨80⟩", b"\x80", ""),  # a continuation byte alone
])
def test_a_piece_is_shown_as_the_characters_its_bytes_make(piece: str, shown: str, raw: bytes, text: str) -> None:
    assert piece_bytes(piece) == raw
    assert readable(piece) == shown
    assert token_text(piece) == text
    assert "\ufffd" not in readable(piece) and not set("ÃĠĊĉčðŁĺĢ") & set(readable(piece))


def test_a_special_token_stays_as_it_is() -> None:
    assert readable("<|im_end|>") == "<|im_end|>"
    assert token_text("<|im_end|>") == "<|im_end|>"


@pytest.mark.parametrize(("text", "pieces"), TEXTS, ids=[f"text{i}" for i in range(len(TEXTS))])
def test_every_tokenizer_text_is_shown_faithfully(text: str, pieces: list[str]) -> None:
    raw = [piece_bytes(p) for p in pieces]
    assert all(b is not None for b in raw)
    assert b"".join(raw).decode("utf-8") == text  # the pieces' bytes, joined, are the text
    shown = [readable(p) for p in pieces]
    assert not any("\ufffd" in s for s in shown)
    assert [bytes_shown(s) for s in shown] == raw  # what is shown reads back to the very bytes
    allowed = set(text) | set(SHOWN) | set("⟨⟩0123456789abcdef ")
    assert all(set(HEX_GROUP.sub("", s)) <= allowed for s in shown), shown  # no stand-in like "Ã" or "Ġ"
    for piece, b in zip(pieces, raw, strict=True):  # token_text: the piece's text when its bytes are whole
        if _whole(b):
            assert token_text(piece) == b.decode("utf-8")
    if all(_whole(b) for b in raw):
        assert "".join(token_text(p) for p in pieces) == text


def _whole(raw: bytes) -> bool:
    """Whether the bytes are whole UTF-8 characters, none split with another piece."""
    try:
        raw.decode("utf-8")
    except UnicodeDecodeError:
        return False
    return True


def test_a_text_whose_emoji_are_split_shows_their_bytes() -> None:
    text, pieces = next((t, p) for t, p in TEXTS if "🤖" in t)
    shown = [readable(p) for p in pieces]
    assert any(HEX_GROUP.search(s) for s in shown)  # some piece holds part of a character
    assert "".join(token_text(p) for p in pieces) != text  # so its whole characters alone are not the text


def test_every_piece_of_the_vocabulary_reads_back_to_its_bytes() -> None:
    vocabulary = load_decoder_files().vocabulary  # 49,152 pieces, the special tokens among them
    assert len(vocabulary) == 49_152
    for piece in vocabulary:
        raw, shown = piece_bytes(piece), readable(piece)
        if raw is None:  # a piece that is no bytes is shown as it is
            assert shown == piece
            continue
        assert bytes_shown(shown) == raw, piece
        assert "\ufffd" not in shown or "\ufffd".encode() in raw, piece  # only the piece that is "�" itself

"""A byte-level BPE piece (the language model's: "Ġ" is a space) as a student reads it, as the text it adds, and
numbered as a row's label. GPT-2's byte-level alphabet writes each byte as one printable character."""

from __future__ import annotations


# GPT-2's byte-level alphabet: each byte as a printable character ("Ġ" is the space byte 0x20).
def _byte_alphabet() -> dict[str, int]:
    printable = list(range(ord("!"), ord("~") + 1)) + list(range(ord("¡"), ord("¬") + 1)) + list(
        range(ord("®"), ord("ÿ") + 1))
    chars, extra = {}, 0
    for b in range(256):
        if b in printable:
            chars[chr(b)] = b
        else:
            chars[chr(256 + extra)] = b
            extra += 1
    return chars


BYTE_OF = _byte_alphabet()
SHOWN_CONTROLS = {"\n": "↵", "\t": "⇥", "\r": "␍"}


def piece_bytes(piece: str) -> bytes | None:
    """The bytes a byte-level piece stands for, or None for a special token (<|im_end|>)."""
    if not all(c in BYTE_OF for c in piece):
        return None
    return bytes(BYTE_OF[c] for c in piece)


def readable(piece: str) -> str:
    """A token as a student reads it: a leading space as "␣", a newline as "↵", a tab as "⇥", and bytes that do
    not make a whole character (an emoji split across tokens) as ⟨f0 9f⟩ — never "�" or mojibake like "Ã©"."""
    raw = piece_bytes(piece)
    if raw is None:
        return piece
    out, i = [], 0
    while i < len(raw):
        for n in (1, 2, 3, 4):  # the shortest run of bytes that decodes to a character
            try:
                ch = raw[i : i + n].decode("utf-8")
            except UnicodeDecodeError:
                continue
            out.append(SHOWN_CONTROLS.get(ch, "␣" if ch == " " else ch))
            i += n
            break
        else:
            j = i + 1  # bytes that begin or end a character in another token
            while j < len(raw) and not _starts_character(raw, j):
                j += 1
            out.append("⟨" + " ".join(f"{b:02x}" for b in raw[i:j]) + "⟩")
            i = j
    return "".join(out)


def _starts_character(raw: bytes, j: int) -> bool:
    for n in (1, 2, 3, 4):
        try:
            raw[j : j + n].decode("utf-8")
            return True
        except UnicodeDecodeError:
            continue
    return False


def token_text(piece: str) -> str:
    """The text a piece adds when appended (the space as a space), for a link that appends it."""
    raw = piece_bytes(piece)
    return piece if raw is None else raw.decode("utf-8", errors="ignore")


def labels(tokens: tuple[str, ...]) -> list[str]:
    """"1 The", "2 ␣capital", …"""
    return [f"{i + 1} {readable(t)}" for i, t in enumerate(tokens)]

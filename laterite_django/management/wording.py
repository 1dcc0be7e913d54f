"""Small pieces of the commands' wording: counted nouns and errors cut to a width."""

from __future__ import annotations

__all__ = ["count", "shorten"]

ELLIPSIS = "…"


def count(number: int, noun: str, plural: str | None = None) -> str:
    """`1 job`, `2 jobs`, `0 jobs` (`plural` for nouns not made with an s)."""
    return f"{number} {noun if number == 1 else plural or noun + 's'}"


def shorten(text: str, width: int) -> str:
    """`text` whole if it fits in `width` characters, else cut at the last word boundary
    that leaves room for an ellipsis (mid-word only for a word longer than that)."""
    if len(text) <= width:
        return text
    room = text[: width - len(ELLIPSIS) + 1]
    cut = room.rfind(" ")
    head = room[:cut] if cut > 0 else room[:-1]
    return head.rstrip(" ,;:.-") + ELLIPSIS

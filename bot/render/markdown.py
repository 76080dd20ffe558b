"""Making outside text inert in Markdown: test names and messages never become links, mentions,
HTML or our hidden marker, and every text is cut to a bound."""

from __future__ import annotations

import re

_BACKTICKS = re.compile(r"`+")


def truncate(text: str, limit: int) -> str:
    return text if len(text) <= limit else text[: max(0, limit - 1)] + "…"


def neutralise(text: str, *, keep_newlines: bool = False) -> str:
    """Control characters (and line breaks, unless kept) become spaces; ``<!--`` can never open a comment."""
    text = "".join(
        c if c == "\n" and keep_newlines else " " if (ord(c) < 32 or 0x7F <= ord(c) < 0xA0) else c for c in text
    )
    return text.replace("<!--", "<\u200b!--").replace("-->", "-\u200b->")


def code(text: str, limit: int = 200) -> str:
    """An inline code span that holds ``text`` literally, safe inside a table cell."""
    text = neutralise(truncate(text, limit)).replace("|", "\u2223")
    longest = max((len(m) for m in _BACKTICKS.findall(text)), default=0)
    fence = "`" * (longest + 1)
    pad = " " if text.startswith("`") or text.endswith("`") or not text.strip() else ""
    return f"{fence}{pad}{text}{pad}{fence}"


_SPECIAL = re.compile(r"([\\`*_{}\[\]()#+\-.!|<>@~&:])")


def plain(text: str, limit: int = 500) -> str:
    """Text shown as prose: every Markdown, HTML and mention character escaped."""
    return _SPECIAL.sub(r"\\\1", neutralise(truncate(text, limit)))

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


def block(text: str, *, limit: int = 1500, lines: int = 25) -> str:
    """A fenced block that shows ``text`` literally (a fence longer than any run of backticks in it),
    cut to ``lines`` lines and ``limit`` characters with a line saying so."""
    kept = text.splitlines()
    cut = len(kept) > lines or len(text) > limit
    shown = truncate("\n".join(kept[:lines]), limit)
    shown = neutralise(shown, keep_newlines=True)
    longest = max((len(m) for m in _BACKTICKS.findall(shown)), default=0)
    fence = "`" * max(3, longest + 1)
    return f"{fence}text\n{shown}\n{fence}" + ("\n(cut; the check run's annotation holds more)" if cut else "")

"""What every Flaketally page shares (the analysis report, the weekly digest): the Jinja environment over
``templates/``, a page rendered on ``base.html`` with its stylesheet and script inline and a
Content-Security-Policy that allows only those two (by hash), the header's figures, and the SVG bar chart.
"""

from __future__ import annotations

import base64
import functools
import hashlib
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path

from jinja2 import Environment, FileSystemLoader, StrictUndefined
from markupsafe import Markup

from bot.render.findings import money as cents
from bot.render.markdown import truncate

TEMPLATES = Path(__file__).with_name("templates")


@dataclass(frozen=True, slots=True)
class Bar:
    label: str  # cut to fit; ``title`` holds it whole
    title: str
    text: str
    y: int
    width: float


@dataclass(frozen=True, slots=True)
class BarChart:
    """A horizontal bar chart laid out for ``macros.html``: each bar under its label, its figure after it."""

    width: int
    height: int
    bar_height: int
    row_height: int
    bars: tuple[Bar, ...]


@dataclass(frozen=True, slots=True)
class Stat:
    label: str
    value: str
    tone: str = ""  # a CellState value to colour the figure, or empty
    previous: str = ""  # the figure it is compared with (the digest's previous week), or empty


@dataclass(frozen=True, slots=True)
class Header:
    """The top of a page (``base.html``): a title, figures, and lines of context under them."""

    title: str
    stats: tuple[Stat, ...]
    notes: tuple[str, ...] = ()


def money(value: float, currency: str) -> str:
    """A sum to the cent with its currency: ``22.50 USD`` (``bot.render.findings.money``)."""
    return f"{cents(value)} {currency}"


_CONTROLS = dict.fromkeys([*range(32), *range(0x7F, 0xA0)], " ")
_CONTROLS_BUT_NEWLINE = {c: v for c, v in _CONTROLS.items() if c != ord("\n")}


def printable(text: str, *, keep_newlines: bool = False) -> str:
    """Control characters become spaces (a newline stays when asked): escaping leaves them, a reader cannot use them."""
    return text.translate(_CONTROLS_BUT_NEWLINE if keep_newlines else _CONTROLS)


def bar_layout(
    rows: Sequence[tuple[str, float, str]], *, width: int = 760, text_width: int = 180, label_chars: int = 100
) -> BarChart:
    """Bars for (label, value, text) rows, each as long as its value against the largest; the text (the figure)
    is written after the bar, so the chart reads without hovering."""
    row_height, bar_height, top = 34, 12, 4
    span = width - text_width
    largest = max((value for _, value, _ in rows), default=0.0)
    bars = []
    for i, (name, value, text) in enumerate(rows):
        length = span * value / largest if largest > 0 else 0.0
        shown, whole, figure = (printable(truncate(t, n)) for t, n in ((name, label_chars), (name, 1000), (text, 100)))
        bars.append(Bar(shown, whole, figure, top + i * row_height, max(length, 1.0) if value > 0 else 0.0))
    return BarChart(width, top * 2 + row_height * len(rows), bar_height, row_height, tuple(bars))


def bar_chart(rows: Sequence[tuple[str, float, str]], *, title: str = "") -> Markup:
    """An inline SVG horizontal bar chart (``macros.html``), for any page."""
    page = _environment().from_string('{% from "macros.html" import bar_chart %}{{ bar_chart(chart, title) }}')
    return Markup(page.render(chart=bar_layout(rows), title=title))


def content_security_policy(css: str, script: str) -> str:
    """Nothing may load; only the page's own stylesheet and script (by hash) may apply and run."""

    def digest(text: str) -> str:
        return "'sha256-" + base64.b64encode(hashlib.sha256(text.encode()).digest()).decode() + "'"

    return (
        f"default-src 'none'; style-src {digest(css)}; script-src {digest(script)}; img-src data:; "
        "base-uri 'none'; form-action 'none'"
    )


@functools.cache
def _environment() -> Environment:
    return Environment(
        loader=FileSystemLoader(TEMPLATES),
        autoescape=True,
        undefined=StrictUndefined,
        trim_blocks=True,
        lstrip_blocks=True,
        keep_trailing_newline=True,
    )


@functools.cache
def _asset(name: str) -> str:
    return (TEMPLATES / name).read_text(encoding="utf-8")


def render_page(template: str, context: Mapping[str, object]) -> str:
    """A page extending ``base.html``, given the shared stylesheet, script and the policy that allows only them."""
    css, script = _asset("report.css"), _asset("report.js")
    page = {"css": Markup(css), "script": Markup(script), "csp": content_security_policy(css, script)}
    return _environment().get_template(template).render({**context, **page})

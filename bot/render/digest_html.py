"""``flaketally digest --format html``: the weekly digest (``bot.core.digest``) as one self-contained page on the
analysis report's layout (``bot.render.page``, ``templates/base.html``): the week's figures against the previous
week's in the header and in a table, the cost of the last weeks and the tests to fix first as SVG bar charts with
the same numbers in tables beside them, then the issue body's lists. Its words and figures are the issue body's
(``bot.render.digest``), so the two never disagree.

The page loads nothing and its policy allows only its own style and script. Names, evidence and reasons from
reports are text that Jinja escapes, each cut to the issue body's bound; each list stops at ``MAX_LINES`` with a
line saying how many were left out, so 500 repositories still make a small page. A quiet week is one line.
"""

from __future__ import annotations

from dataclasses import dataclass
from urllib.parse import quote

from bot.core.digest import Digest
from bot.render.digest import (
    NO_FLAKE,
    comparison_rows,
    headline,
    list_words,
    more_flaked,
    quarantine_order,
    quiet_line,
    run_url,
    suggested,
    title,
    trend_rows,
)
from bot.render.markdown import truncate
from bot.render.page import Header, Stat, bar_layout, money, printable, render_page

MAX_LINES = 100  # lines per list; the figures above them still count everything
REPO_LIMIT, TEST_LIMIT, CONTEXT_LIMIT, EVIDENCE_LIMIT = 100, 200, 100, 300  # the issue body's bounds


def text(value: str, limit: int) -> str:
    """Outside text as the page shows it: cut to ``limit``, control characters made spaces (Jinja escapes it)."""
    return printable(truncate(value, limit))


@dataclass(frozen=True, slots=True)
class TopRow:
    rank: int
    repo: str
    test: str
    context: str
    events: int
    cost: str
    evidence: str
    latest: str | None  # the address of the latest run it flaked in


@dataclass(frozen=True, slots=True)
class Line:
    """One line of a list: a test of a repository in a context, and what is said of it."""

    repo: str
    test: str
    context: str
    note: str = ""  # the list's last column: a count, the evidence, the reason
    due: bool = False  # in quarantine and due to leave


@dataclass(frozen=True, slots=True)
class Suggestion:
    repo: str
    tests: tuple[tuple[str, str], ...]  # (test, context), the first ``SUGGESTED``
    more: int


@dataclass(frozen=True, slots=True)
class Listing:
    """One of the lists after the tests to fix first: its heading, its lines (or suggestions), what was left out."""

    key: str  # the section's id: new, fixed, broken, undetermined, quarantine, suggestions
    heading: str
    note: str  # the heading of the last column; empty when there is none
    numeric: bool  # the last column is a count
    lines: tuple[Line, ...] = ()
    suggestions: tuple[Suggestion, ...] = ()
    left_out: str = ""  # the line saying how many were not shown; empty when none was cut


def header(d: Digest, organisation: str, rates_from: str) -> Header:
    """The week, and this week's figures each over the previous week's."""
    name = title(text(organisation, REPO_LIMIT), d.week)
    if d.quiet:
        return Header(name, (Stat("repositories", str(d.repositories)),))
    this, before, cur = d.this, d.previous, d.rates.currency
    then = f"{before.week}: "
    stats = (
        Stat("flaky events", str(this.events), "flaky" if this.events else "", then + str(before.events)),
        Stat("flaky cost", money(this.cost, cur), "", then + money(before.cost, cur)),
        Stat(
            "reruns (by people / automatic)",
            f"{this.reruns_human} / {this.reruns_automatic}",
            "",
            then + f"{before.reruns_human} / {before.reruns_automatic}",
        ),
        Stat("repositories", str(d.repositories)),
    )
    rates = f"Rates: {text(d.rates.describe(), 500)} (from {text(rates_from, 200)})."
    return Header(name, stats, (headline(d), rates))


def top_rows(d: Digest, server: str) -> list[TopRow]:
    """The tests to fix first, the dearest first, each with the address of the latest run it flaked in."""
    return [
        TopRow(
            rank,
            text(t.repo, REPO_LIMIT),
            text(t.test, TEST_LIMIT),
            text(t.context, CONTEXT_LIMIT),
            t.events,
            money(t.cost, d.rates.currency),
            text(t.evidence, EVIDENCE_LIMIT),
            run_url(server, quote(t.repo, safe="/"), t.latest_run) if t.latest_run else None,
        )
        for rank, t in enumerate(d.top, 1)
    ]


def _line(repo: str, test: str, context: str, note: str = "", due: bool = False) -> Line:
    return Line(text(repo, REPO_LIMIT), text(test, TEST_LIMIT), text(context, CONTEXT_LIMIT), note, due)


def listings(d: Digest, max_lines: int = MAX_LINES) -> list[Listing]:
    """The lists that have something, in the issue body's order and under its headings, each cut to ``max_lines``."""
    lines: dict[str, tuple[str, bool, list[Line]]] = {
        "new": ("flaky events", True, [_line(t.repo, t.test, t.context, str(t.events)) for t in d.new_flakes]),
        "fixed": ("", False, [_line(repo, test, context) for repo, test, context in d.fixed]),
        "broken": (
            "evidence",
            False,
            [_line(r, t, c, text(evidence, EVIDENCE_LIMIT)) for r, t, c, evidence in d.broken],
        ),
        "undetermined": (
            "commits left undetermined",
            True,
            [_line(repo, test, context, str(n)) for repo, test, context, n in d.undetermined],
        ),
        "quarantine": (
            "why",
            False,
            [
                _line(r, t, c, text(why, EVIDENCE_LIMIT if due else 200), due)
                for r, t, c, due, why in quarantine_order(d)
            ],
        ),
    }
    suggestions = [
        Suggestion(
            text(repo, REPO_LIMIT),
            tuple((text(t.test, TEST_LIMIT), text(t.context, CONTEXT_LIMIT)) for t in tests),
            more,
        )
        for repo, tests, more in suggested(d)
    ]
    found = []
    for key, words in list_words(d).items():
        count = len(suggestions) if key == "suggestions" else len(lines[key][2])
        if not count:
            continue
        cut = count - max_lines
        left_out = f"… and {cut} more {words.what} not shown, to keep the page small." if cut > 0 else ""
        if key == "suggestions":
            found.append(Listing(key, words.heading(count), "", False, (), tuple(suggestions[:max_lines]), left_out))
        else:
            note, numeric, shown = lines[key]
            found.append(Listing(key, words.heading(count), note, numeric, tuple(shown[:max_lines]), (), left_out))
    return found


def digest_html(
    digest: Digest, organisation: str, *, server: str = "https://github.com", rates_from: str = "the defaults"
) -> str:
    """The digest as one page that needs nothing but itself (module docstring)."""
    d, cur = digest, digest.rates.currency
    if d.quiet:
        return render_page("digest.html", {"header": header(d, organisation, rates_from), "quiet": quiet_line(d)})
    top = top_rows(d, server)
    return render_page(
        "digest.html",
        {
            "header": header(d, organisation, rates_from),
            "quiet": "",
            "currency": cur,
            "this_week": d.this.week,
            "previous_week": d.previous.week,
            "comparison": comparison_rows(d),
            "trend": trend_rows(d),
            "trend_chart": bar_layout([(w.week, w.cost, money(w.cost, cur)) for w in d.trend]),
            "top": top,
            "top_chart": bar_layout(
                [(f"#{r.rank} {r.test} ({r.repo})", t.cost, r.cost) for r, t in zip(top, d.top, strict=True)]
            ),
            "no_flake": NO_FLAKE,
            "more_top": more_flaked(d) if d.more_top else "",
            "listings": listings(d),
        },
    )

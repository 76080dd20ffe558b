"""The weekly digest as the Markdown of a GitHub issue: the week against the previous one, the cost trend and
the tests to fix first as Mermaid charts GitHub draws (with the same numbers in a table beside them), new
flakes, fixed flakes and the tests left undetermined most often.

A quiet week is one line. The body stays under GitHub's 65,536 characters however many repositories
there are: the long lists are cut, each with a line saying how many were left out. Names from reports
go into tables as code spans and never into the Mermaid source (the charts label tests by rank).

The words and figures the page shares (``bot.render.digest_html``) are the public functions here: the title, the
headline, the comparison and trend rows, each list's heading, the quarantine's order and the suggestions.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import timedelta

from bot.core.digest import Digest, TestWeek, Week, week_start
from bot.render.findings import money, prose
from bot.render.markdown import code

MAX_BODY = 65_536
MARKER = "<!-- flaketally:digest -->"
TITLE = "Flaketally digest"
_TITLE_WEEK = re.compile(rf"^{TITLE} (\d{{4}}-W\d{{2}}) ")
_LIST_CAPS = (10**9, 50, 20, 10, 5, 0)  # every line first; the long lists shrink through these until it fits
SUGGESTED = 5  # tests named per repository in a quarantine suggestion
NO_FLAKE = "No test flaked this week."


def days(week: str) -> str:
    """``Nov 23 – Nov 29, 2026``: the Monday to Sunday of an ISO week."""
    start = week_start(week)
    end = start + timedelta(days=6)
    return f"{start:%b} {start.day} – {end:%b} {end.day}, {end.year}"


def title(organisation: str, week: str) -> str:
    """The digest's title; ``organisation`` comes escaped as its page needs it."""
    return f"{TITLE} · {organisation} · {week} ({days(week)})"


def headline(d: Digest) -> str:
    """The week in one sentence: its flaky events and their cost, against the week before's."""
    return (
        f"{d.this.events} flaky events cost {money(d.this.cost)} {d.rates.currency} this week across "
        f"{counted(d.repositories, 'repository')} ({money(d.previous.cost)} the week before)."
    )


def quiet_line(d: Digest) -> str:
    return f"A quiet week: no test flaked in {counted(d.repositories, 'repository')}, and nothing was rerun."


def more_flaked(d: Digest) -> str:
    """What the tests to fix first leave out (``Digest.more_top``)."""
    return f"{d.more_top} more tests flaked this week."


def run_url(server: str, repo: str, run_id: int) -> str:
    return f"{server.rstrip('/')}/{repo}/actions/runs/{run_id}"


def share(w: Week) -> str:
    share = w.all_flaky_share
    return f"{w.all_flaky_runs} of {w.failed_runs} ({share:.0%})" if share is not None else "no failed run"


def comparison_rows(d: Digest) -> list[tuple[str, str, str]]:
    """The week against the previous one: (what, this week's figure, the previous week's)."""
    this, before = d.this, d.previous
    cur = d.rates.currency
    rows: list[tuple[str, Callable[[Week], str]]] = [
        ("flaky events", lambda w: str(w.events)),
        ("reruns (by people / automatic)", lambda w: f"{w.reruns_human} / {w.reruns_automatic}"),
        ("measured rerun minutes", lambda w: f"{w.rerun_minutes:.1f}"),
        ("measured wait for reruns", lambda w: f"{w.wait_minutes:.0f} min"),
        (f"cost ({cur})", lambda w: money(w.cost)),
        ("failed runs whose failures were all flaky", share),
    ]
    return [(label, show(this), show(before)) for label, show in rows]


def _comparison(d: Digest) -> list[str]:
    return [
        f"| | {d.this.week} | {d.previous.week} |",
        "|---|---|---|",
        *(f"| {label} | {this} | {before} |" for label, this, before in comparison_rows(d)),
    ]


def trend_rows(d: Digest) -> list[tuple[str, str, str, str]]:
    """Each week of the trend, oldest first: (week, flaky events, reruns, cost)."""
    return [(w.week, str(w.events), str(w.reruns_human + w.reruns_automatic), money(w.cost)) for w in d.trend]


def _trend(d: Digest) -> list[str]:
    weeks = [w.week.split("-")[1] for w in d.trend]
    costs = [round(w.cost, 2) for w in d.trend]
    top = max(costs, default=0.0) or 1.0
    chart = [
        "```mermaid",
        "xychart-beta",
        f'    title "Flaky cost per week ({d.rates.currency})"',
        "    x-axis [" + ", ".join(f'"{w}"' for w in weeks) + "]",
        f'    y-axis "{d.rates.currency}" 0 --> {top * 1.1:.2f}',
        "    bar [" + ", ".join(f"{c:.2f}" for c in costs) + "]",
        "```",
    ]
    table = [
        "| week | flaky events | reruns | cost |",
        "|---|---|---|---|",
        *(f"| {week} | {events} | {reruns} | {cost} |" for week, events, reruns, cost in trend_rows(d)),
    ]
    return [*chart, "", *table]


def _top(d: Digest, run_url: Callable[[str, int], str]) -> list[str]:
    if not d.top:
        return [NO_FLAKE]
    cur = d.rates.currency
    chart = [
        "```mermaid",
        "xychart-beta",
        f'    title "Tests to fix first: cost this week ({cur})"',
        "    x-axis [" + ", ".join(f'"#{n}"' for n in range(1, len(d.top) + 1)) + "]",
        f'    y-axis "{cur}"',
        "    bar [" + ", ".join(f"{t.cost:.2f}" for t in d.top) + "]",
        "```",
    ]
    rows = [
        "| # | repository | test | context | events | cost | evidence | latest |",
        "|---|---|---|---|---|---|---|---|",
    ]
    for n, t in enumerate(d.top, 1):
        latest = f"[run]({run_url(t.repo, t.latest_run)})" if t.latest_run else "–"
        rows.append(
            f"| {n} | {code(t.repo, 100)} | {code(t.test)} | {prose(t.context, 100)} | {t.events} | "
            f"{money(t.cost)} | {prose(t.evidence, 300)} | {latest} |"
        )
    if d.more_top:
        rows.append(f"\n{more_flaked(d)}")
    return [*chart, "", *rows]


def counted(count: int, word: str) -> str:
    """``1 commit``, ``2 commits``."""
    plural = word[:-1] + "ies" if word.endswith("y") else word + "s"
    return f"{count} {word if count == 1 else plural}"


def _capped(lines: Sequence[str], cap: int, what: str) -> list[str]:
    shown = list(lines[:cap])
    if len(lines) > cap:
        shown.append(f"- … and {len(lines) - cap} more {what} not shown (the body must stay under GitHub's limit)")
    return shown


@dataclass(frozen=True, slots=True)
class ListWords:
    """How one of the digest's lists is headed, ``title (count: why)``; ``what`` names its lines in the line saying
    how many were left out."""

    title: str
    what: str
    why: str

    def heading(self, count: int) -> str:
        return f"{self.title} ({count}: {self.why})"


def list_words(d: Digest) -> dict[str, ListWords]:
    """The lists after the tests to fix first, by key, in the order they are written."""
    leaving = sum(1 for q in d.quarantined if q[3])
    return {
        "new": ListWords("New flakes", "new flakes", "first flaky this week"),
        "fixed": ListWords("Fixed flakes", "fixed flakes", "flaky last week, passing this week"),
        "broken": ListWords("Broken on a default branch", "tests", "failing on every recent run there: not flakes"),
        "undetermined": ListWords(
            "Left undetermined most often", "tests", "single failures with no rerun: candidates for reruns"
        ),
        "quarantine": ListWords("In quarantine", "tests", f"{leaving} due to leave"),
        "suggestions": ListWords("Quarantine suggestions", "repositories", "flaky this week and not quarantined"),
    }


def quarantine_order(d: Digest) -> list[tuple[str, str, str, bool, str]]:
    """The quarantine, those due to leave first, then by repository and test."""
    return sorted(d.quarantined, key=lambda q: (not q[3], q[0], q[1]))


def suggested(d: Digest) -> list[tuple[str, list[TestWeek], int]]:
    """Per repository, by name: the first ``SUGGESTED`` tests its quarantine file could add, and how many more."""
    return [
        (repo, tests[:SUGGESTED], max(0, len(tests) - SUGGESTED)) for repo, tests in sorted(d.suggestions().items())
    ]


def _lists(d: Digest, cap: int) -> list[str]:
    out: list[str] = []
    new = [
        f"- {code(t.test)} in {code(t.repo, 100)} ({prose(t.context, 100)}): {counted(t.events, 'event')}"
        for t in d.new_flakes
    ]
    fixed = [f"- {code(test)} in {code(repo, 100)} ({prose(context, 100)})" for repo, test, context in d.fixed]
    lone = [
        f"- {code(test)} in {code(repo, 100)} ({prose(context, 100)}): {counted(n, 'commit')}"
        for repo, test, context, n in d.undetermined
    ]
    broken = [
        f"- {code(test)} in {code(repo, 100)} ({prose(context, 100)}): {prose(evidence, 300)}"
        for repo, test, context, evidence in d.broken
    ]
    held = [
        f"- {code(test)} in {code(repo, 100)} ({prose(context, 100)}): "
        + (f"**due to leave**: {prose(why, 300)}" if due else prose(why, 200))
        for repo, test, context, due, why in quarantine_order(d)
    ]
    suggestions = [
        f"- {code(repo, 100)}: "
        + ", ".join(f"{code(t.test)} ({prose(t.context, 100)})" for t in tests)
        + (f" and {more} more" if more else "")
        for repo, tests, more in suggested(d)
    ]
    lines = {
        "new": new,
        "fixed": fixed,
        "broken": broken,
        "undetermined": lone,
        "quarantine": held,
        "suggestions": suggestions,
    }
    for key, words in list_words(d).items():
        if lines[key]:
            out += [f"### {words.heading(len(lines[key]))}", "", *_capped(lines[key], cap, words.what), ""]
    return out


def digest_title(week: str) -> str:
    """The digest issue's title: the week, said twice (its ISO name, which finds it again, and its days)."""
    return f"{TITLE} {week} ({days(week)})"


def week_of_title(title: str) -> str | None:
    """The ISO week a digest issue's title names; None for any other title."""
    found = _TITLE_WEEK.match(title)
    return found.group(1) if found else None


def superseded(body: str, week: str, number: int) -> str:
    """A digest issue's body once the next week's is posted: a first line pointing at it, the rest kept."""
    line = f"Closed: the digest of {week} is #{number}.\n\n"
    return line + body[: MAX_BODY - len(line)]


def digest_markdown(
    d: Digest,
    organisation: str,
    *,
    server: str = "https://github.com",
    rates_from: str = "the defaults",
    previous: int | None = None,
) -> str:
    """The digest issue's body (module docstring); ``previous``: last week's digest issue, linked at the end."""

    head = [MARKER, f"## {title(prose(organisation, 100), d.week)}", ""]
    foot = ["", f"Last week's digest: #{previous}."] if previous else []
    if d.quiet:
        return "\n".join([*head, quiet_line(d), *foot])
    head += [f"{headline(d)} Rates: {prose(d.rates.describe())} (from {prose(rates_from, 200)}).", ""]
    body: list[str] = []
    for cap in _LIST_CAPS:
        body = [
            "### The week against the previous one",
            "",
            *_comparison(d),
            "",
            f"### Cost, the last {len(d.trend)} weeks",
            "",
            *_trend(d),
            "",
            "### Tests to fix first",
            "",
            *_top(d, lambda repo, run_id: run_url(server, repo, run_id)),
            "",
            *_lists(d, cap),
        ]
        if len("\n".join([*head, *body, *foot])) <= MAX_BODY:
            break
    ending = "\n".join(["", *foot]) if foot else ""
    return "\n".join([*head, *body]).rstrip("\n")[: MAX_BODY - len(ending)] + ending

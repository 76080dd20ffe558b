"""The weekly digest as the Markdown of a GitHub issue: the week against the previous one, the cost trend and
the tests to fix first as Mermaid charts GitHub draws (with the same numbers in a table beside them), new
flakes, fixed flakes and the tests left undetermined most often.

A quiet week is one line. The body stays under GitHub's 65,536 characters however many repositories
there are: the long lists are cut, each with a line saying how many were left out. Names from reports
go into tables as code spans and never into the Mermaid source (the charts label tests by rank).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from datetime import timedelta

from bot.core.digest import Digest, Week, week_start
from bot.render.findings import money, prose
from bot.render.markdown import code

MAX_BODY = 65_536
MARKER = "<!-- flaketally:digest -->"
_LIST_CAPS = (10**9, 50, 20, 10, 5, 0)  # every line first; the long lists shrink through these until it fits


def _days(week: str) -> str:
    start = week_start(week)
    end = start + timedelta(days=6)
    return f"{start:%b} {start.day} – {end:%b} {end.day}, {end.year}"


def _share(w: Week) -> str:
    share = w.all_flaky_share
    return f"{w.all_flaky_runs} of {w.failed_runs} ({share:.0%})" if share is not None else "no failed run"


def _comparison(d: Digest) -> list[str]:
    this, before = d.this, d.previous
    cur = d.rates.currency
    rows: list[tuple[str, Callable[[Week], str]]] = [
        ("flaky events", lambda w: str(w.events)),
        ("reruns (by people / automatic)", lambda w: f"{w.reruns_human} / {w.reruns_automatic}"),
        ("measured rerun minutes", lambda w: f"{w.rerun_minutes:.1f}"),
        ("measured wait for reruns", lambda w: f"{w.wait_minutes:.0f} min"),
        (f"cost ({cur})", lambda w: money(w.cost)),
        ("failed runs whose failures were all flaky", _share),
    ]
    return [
        f"| | {this.week} | {before.week} |",
        "|---|---|---|",
        *(f"| {label} | {show(this)} | {show(before)} |" for label, show in rows),
    ]


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
        *(f"| {w.week} | {w.events} | {w.reruns_human + w.reruns_automatic} | {money(w.cost)} |" for w in d.trend),
    ]
    return [*chart, "", *table]


def _top(d: Digest, run_url: Callable[[str, int], str]) -> list[str]:
    if not d.top:
        return ["No test flaked this week."]
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
        rows.append(f"\n{d.more_top} more tests flaked this week.")
    return [*chart, "", *rows]


def _n(count: int, word: str) -> str:
    plural = word[:-1] + "ies" if word.endswith("y") else word + "s"
    return f"{count} {word if count == 1 else plural}"


def _capped(lines: Sequence[str], cap: int, what: str) -> list[str]:
    shown = list(lines[:cap])
    if len(lines) > cap:
        shown.append(f"- … and {len(lines) - cap} more {what} not shown (the body must stay under GitHub's limit)")
    return shown


def _lists(d: Digest, cap: int) -> list[str]:
    out: list[str] = []
    new = [
        f"- {code(t.test)} in {code(t.repo, 100)} ({prose(t.context, 100)}): {_n(t.events, 'event')}"
        for t in d.new_flakes
    ]
    fixed = [f"- {code(test)} in {code(repo, 100)} ({prose(context, 100)})" for repo, test, context in d.fixed]
    lone = [
        f"- {code(test)} in {code(repo, 100)} ({prose(context, 100)}): {_n(n, 'commit')}"
        for repo, test, context, n in d.undetermined
    ]
    broken = [
        f"- {code(test)} in {code(repo, 100)} ({prose(context, 100)}): {prose(evidence, 300)}"
        for repo, test, context, evidence in d.broken
    ]
    leaving = [q for q in d.quarantined if q[3]]
    held = [
        f"- {code(test)} in {code(repo, 100)} ({prose(context, 100)}): "
        + (f"**due to leave**: {prose(why, 300)}" if due else prose(why, 200))
        for repo, test, context, due, why in sorted(d.quarantined, key=lambda q: (not q[3], q[0], q[1]))
    ]
    suggested = [
        f"- {code(repo, 100)}: "
        + ", ".join(f"{code(t.test)} ({prose(t.context, 100)})" for t in tests[:5])
        + (f" and {len(tests) - 5} more" if len(tests) > 5 else "")
        for repo, tests in sorted(d.suggestions().items())
    ]
    for title, lines, what, why in (
        ("New flakes", new, "new flakes", "first flaky this week"),
        ("Fixed flakes", fixed, "fixed flakes", "flaky last week, passing this week"),
        ("Broken on a default branch", broken, "tests", "failing on every recent run there: not flakes"),
        ("Left undetermined most often", lone, "tests", "single failures with no rerun: candidates for reruns"),
        ("In quarantine", held, "tests", f"{len(leaving)} due to leave"),
        ("Quarantine suggestions", suggested, "repositories", "flaky this week and not quarantined"),
    ):
        if lines:
            out += [f"### {title} ({len(lines)}: {why})", "", *_capped(lines, cap, what), ""]
    return out


def digest_markdown(
    d: Digest, organisation: str, *, server: str = "https://github.com", rates_from: str = "the defaults"
) -> str:
    """The digest issue's body (module docstring)."""

    def run_url(repo: str, run_id: int) -> str:
        return f"{server.rstrip('/')}/{repo}/actions/runs/{run_id}"

    head = [MARKER, f"## Flaketally digest · {prose(organisation, 100)} · {d.week} ({_days(d.week)})", ""]
    if d.quiet:
        return "\n".join(
            [*head, f"A quiet week: no test flaked in {_n(d.repositories, 'repository')}, and nothing was rerun."]
        )
    this = d.this
    head += [
        f"{this.events} flaky events cost {money(this.cost)} {d.rates.currency} this week across "
        f"{d.repositories} repositories ({money(d.previous.cost)} the week before). Rates: "
        f"{prose(d.rates.describe())} (from {prose(rates_from, 200)}).",
        "",
    ]
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
            *_top(d, run_url),
            "",
            *_lists(d, cap),
        ]
        if len("\n".join([*head, *body])) <= MAX_BODY:
            break
    return "\n".join([*head, *body]).rstrip("\n")[:MAX_BODY]

"""The weekly digest as a page (``bot.render.digest_html``) on the generated history of ``tests/test_digest.py``:
its figures are the digest's and the issue body's, a quiet week is one line, 500 repositories make a bounded page,
hostile names are text; then the page opened from disk in headless Chromium (``tests.support.browser``): both
charts drawn, nothing requested, no console error and no Content-Security-Policy violation."""

from __future__ import annotations

import dataclasses
from collections.abc import Iterator
from datetime import timedelta
from html.parser import HTMLParser
from pathlib import Path

import pytest
from playwright.sync_api import Page, expect

from bot.core.digest import Digest, digest, week_start
from bot.render.digest import digest_markdown, quiet_line, run_url
from bot.render.digest_html import MAX_LINES, digest_html
from tests.support.browser import colours, launched, new_tab, opened, rgb
from tests.test_digest import WEEK, Planted, _run, five_hundred_repositories, generated

SCRIPT = "<script>alert(1)</script>"
IMG = '"><img src=x onerror=alert(1)>'
VOID = {"meta", "br", "img", "input", "link", "hr", "wbr", "source", "area", "base", "col", "embed"}


@dataclasses.dataclass
class Node:
    """An element of the page as Python's HTML parser read it (its text unescaped, as a reader sees it)."""

    tag: str
    attrs: dict[str, str]
    children: list[Node | str] = dataclasses.field(default_factory=list)

    @property
    def text(self) -> str:
        return "".join(c if isinstance(c, str) else c.text for c in self.children)

    def all(self, tag: str, cls: str = "") -> list[Node]:
        found = []
        for c in self.children:
            if isinstance(c, Node):
                if c.tag == tag and (not cls or cls in c.attrs.get("class", "").split()):
                    found.append(c)
                found += c.all(tag, cls)
        return found

    def walk(self) -> Iterator[Node]:
        for c in self.children:
            if isinstance(c, Node):
                yield c
                yield from c.walk()

    def one(self, tag: str, cls: str = "") -> Node:
        found = self.all(tag, cls)
        assert len(found) == 1, (tag, cls, len(found))
        return found[0]

    def section(self, key: str) -> Node:
        found = [s for s in self.all("section") if s.attrs.get("id") == key]
        assert len(found) == 1, key
        return found[0]

    def rows(self) -> list[list[str]]:
        """A table's body, cell by cell (a row's heading cell first)."""
        return [[c.text for c in r.children if isinstance(c, Node)] for r in self.one("tbody").all("tr")]


class _Reader(HTMLParser):
    def __init__(self) -> None:
        super().__init__()
        self.root = Node("#document", {})
        self.open = [self.root]

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        node = Node(tag, {k: v or "" for k, v in attrs})
        self.open[-1].children.append(node)
        if tag not in VOID:
            self.open.append(node)

    def handle_endtag(self, tag: str) -> None:
        while len(self.open) > 1 and self.open.pop().tag != tag:
            pass

    def handle_data(self, data: str) -> None:
        self.open[-1].children.append(data)


def read(page: str) -> Node:
    reader = _Reader()
    reader.feed(page)
    reader.close()
    return reader.root


def markdown_table(body: str, heading: str) -> list[list[str]]:
    """The rows of the issue body's table whose header line is ``heading``, code spans unwrapped."""
    lines = body.splitlines()
    start = lines.index(heading) + 2
    rows = []
    for line in lines[start:]:
        if not line.startswith("|"):
            break
        rows.append([cell.strip().strip("`") for cell in line.strip("|").split(" | ")])
    return rows


def busy() -> Digest:
    planted = generated()
    return digest(WEEK, _run(planted), planted.runs, repositories=3)


# --- the page's content, no browser -------------------------------------------------------------------------


def test_the_figures_on_the_page_are_the_digest_s_and_the_issue_body_s() -> None:
    planted = generated()
    d = digest(WEEK, _run(planted), planted.runs, repositories=3)
    body, page = digest_markdown(d, "acme"), read(digest_html(d, "acme"))
    this, before = d.this, d.previous
    assert (this.events, before.events) == (planted.flaky[WEEK], 1) == (4, 1)

    assert page.one("h1").text == "Flaketally digest · acme · 2026-W48 (Nov 23 – Nov 29, 2026)"
    stats = {s.one("dt").text: [dd.text for dd in s.all("dd")] for s in page.all("div", "stat")}
    assert stats == {
        "flaky events": ["4", "2026-W47: 1"],
        "flaky cost": [f"{this.cost:.2f} USD", f"2026-W47: {before.cost:.2f} USD"],
        "reruns (by people / automatic)": ["3 / 1", "2026-W47: 1 / 0"],
        "repositories": ["3"],
    }
    assert stats["flaky cost"] == ["90.00 USD", "2026-W47: 22.50 USD"]
    assert body.splitlines()[3].startswith(page.all("p", "note")[0].text)  # the same headline

    comparison = page.section("week").one("table").rows()
    assert comparison == markdown_table(body, "| | 2026-W48 | 2026-W47 |")
    assert comparison[0] == ["flaky events", "4", "1"]
    assert comparison[-1] == ["failed runs whose failures were all flaky", "4 of 5 (80%)", "1 of 1 (100%)"]

    trend = page.section("trend")
    expected = [[w.week, str(w.events), str(w.reruns_human + w.reruns_automatic), f"{w.cost:.2f}"] for w in d.trend]
    assert trend.one("table").rows() == expected == markdown_table(body, "| week | flaky events | reruns | cost |")
    chart = trend.one("svg", "bar-chart")
    assert [t.text for t in chart.all("text", "bar-label")] == [w.week for w in d.trend]  # one bar per week
    assert [t.text for t in chart.all("text", "bar-figure")] == [f"{w.cost:.2f} USD" for w in d.trend]
    widths = [float(r.attrs["width"]) for r in chart.all("rect", "bar")]
    assert widths == [pytest.approx(580 * w.cost / max(x.cost for x in d.trend), abs=0.05) for w in d.trend]

    top = page.section("top")
    rows = top.one("table").rows()
    assert [r[:7] for r in rows] == [
        [str(n), t.repo, t.test, t.context, str(t.events), f"{t.cost:.2f} USD", t.evidence]
        for n, t in enumerate(d.top, 1)
    ]
    assert [[*r[:5], r[5].removesuffix(" USD"), r[6]] for r in rows] == [
        r[:7] for r in markdown_table(body, "| # | repository | test | context | events | cost | evidence | latest |")
    ]
    links = [a.attrs["href"] for a in top.all("a")]
    assert links == [f"https://github.com/{t.repo}/actions/runs/{t.latest_run}" for t in d.top]
    assert [t.text for t in top.one("svg", "bar-chart").all("text", "bar-figure")] == ["22.50 USD"] * 4

    headings = [h.text for h in page.all("h2")]
    assert headings == [line.removeprefix("### ") for line in body.splitlines() if line.startswith("### ")]
    assert headings[3:] == [
        "New flakes (1: first flaky this week)",
        "Fixed flakes (1: flaky last week, passing this week)",
        "Left undetermined most often (1: single failures with no rerun: candidates for reruns)",
        "Quarantine suggestions (3: flaky this week and not quarantined)",
    ]
    assert page.section("new").one("table").rows() == [["tests/mod.py::test_new", "acme/web", "default context", "1"]]
    assert page.section("fixed").one("table").rows() == [["tests/mod.py::test_fixed", "acme/cli", "default context"]]
    assert page.section("undetermined").one("table").rows() == [
        ["tests/mod.py::test_once", "acme/api", "default context", "1"]
    ]
    suggested = page.section("suggestions").one("tbody").all("tr")
    assert [[li.text for li in r.all("li")] for r in suggested] == [
        ["tests/mod.py::test_often (default context)"],
        ["tests/mod.py::test_often (default context)"],
        ["tests/mod.py::test_new (default context)", "tests/mod.py::test_often (default context)"],
    ]
    assert [r.all("td")[0].text for r in suggested] == ["acme/api", "acme/cli", "acme/web"]


def test_broken_tests_and_the_quarantine_with_those_due_to_leave_first() -> None:
    d = dataclasses.replace(
        busy(),
        broken=(("acme/api", "tests/mod.py::test_down", "default context", "failed on 3 commits in a row"),),
        quarantined=(
            ("acme/web", "tests/mod.py::test_held", "default context", False, "flaky since W40"),
            ("acme/web", "tests/mod.py::test_often", "default context", True, "clean for 59 runs"),
        ),
    )
    page = read(digest_html(d, "acme"))
    assert page.section("broken").one("h2").text.startswith("Broken on a default branch (1: ")
    assert page.section("broken").one("table").rows() == [
        ["tests/mod.py::test_down", "acme/api", "default context", "failed on 3 commits in a row"]
    ]
    held = page.section("quarantine")
    assert held.one("h2").text == "In quarantine (2: 1 due to leave)"
    assert [r[0] for r in held.one("table").rows()] == ["tests/mod.py::test_often", "tests/mod.py::test_held"]
    assert held.one("table").rows()[0][3] == "due to leave: clean for 59 runs"
    suggested = page.section("suggestions").one("table").rows()  # acme/web's test_often is quarantined now
    assert suggested[2] == ["acme/web", "tests/mod.py::test_new (default context)"]


def test_a_quiet_week_is_one_line() -> None:
    planted = Planted()
    planted.commit("acme/api", "a" * 40, week_start(WEEK) + timedelta(days=1), {"test_stable": "P"})
    d = digest(WEEK, _run(planted), planted.runs, repositories=1)
    page = read(digest_html(d, "acme"))
    main = page.one("main")
    assert [c.tag for c in main.children if isinstance(c, Node)] == ["p"]
    assert main.text.strip() == quiet_line(d) == digest_markdown(d, "acme").splitlines()[-1]
    assert quiet_line(d) == "A quiet week: no test flaked in 1 repository, and nothing was rerun."
    assert page.all("svg") == [] and page.all("table") == []


def test_500_repositories_make_a_bounded_page_that_says_what_it_left_out() -> None:
    d = five_hundred_repositories()
    html = digest_html(d, "acme")
    assert len(html) < 250_000
    page = read(html)
    assert page.section("week").one("table").rows()[0] == ["flaky events", "500", "0"]  # the figures count all
    assert len(page.section("top").one("table").rows()) == 10
    assert page.section("top").one("p", "omitted").text == "490 more tests flaked this week."
    for key, what in (("new", "new flakes"), ("undetermined", "tests"), ("suggestions", "repositories")):
        section = page.section(key)
        assert "(500: " in section.one("h2").text
        assert len(section.one("table").rows()) == MAX_LINES
        assert section.one("p", "omitted").text == (
            f"… and {500 - MAX_LINES} more {what} not shown, to keep the page small."
        )


def hostile() -> Digest:
    """Tests and a repository named to run script, with evidence and a reason made to close the cell."""
    planted = Planted()
    monday = week_start(WEEK)
    repo = f"acme/{IMG}"
    planted.commit(repo, "a" * 40, monday, {SCRIPT: "F", IMG: "P"}, "human")
    planted.commit(repo, "b" * 40, monday + timedelta(hours=1), {IMG: "F"})
    d = digest(WEEK, _run(planted), planted.runs, repositories=1)
    return dataclasses.replace(
        d,
        broken=((repo, SCRIPT, IMG, f"</td>{SCRIPT}"),),
        quarantined=((repo, IMG, SCRIPT, True, f"{IMG}{SCRIPT}"),),
    )


def test_hostile_names_are_shown_as_text() -> None:
    d = hostile()
    html = digest_html(d, f"<b>{SCRIPT}</b>", rates_from=IMG)
    page = read(html)
    assert len(page.all("script")) == 1 and page.all("img") == [] and page.all("b") == []
    assert not [n for n in page.walk() if any(a.startswith("on") for a in n.attrs)]  # no handler either
    assert html.count("<script") == 1 and "<img" not in html
    assert page.one("h1").text.startswith(f"Flaketally digest · <b>{SCRIPT}</b> · ")
    test, repo = d.top[0].test, d.top[0].repo
    assert test.endswith(f"::{SCRIPT}") and repo == f"acme/{IMG}"
    assert page.section("top").one("table").rows()[0][1:3] == [repo, test]
    assert page.section("broken").one("table").rows() == [[SCRIPT, repo, IMG, f"</td>{SCRIPT}"]]
    assert page.section("quarantine").one("table").rows() == [[IMG, repo, SCRIPT, f"due to leave: {IMG}{SCRIPT}"]]
    undetermined = page.section("undetermined").one("table").rows()
    assert [r[0] for r in undetermined] == [f"tests/mod.py::{IMG}"]
    (link,) = page.section("top").all("a")
    assert link.attrs["href"] == run_url(
        "https://github.com", "acme/%22%3E%3Cimg%20src%3Dx%20onerror%3Dalert%281%29%3E", 1001
    )
    assert page.all("p", "note")[1].text.endswith(f"(from {IMG}).")


# --- the page in Chromium -----------------------------------------------------------------------------------

VIOLATIONS = (
    "window.__violations = [];"
    "document.addEventListener('securitypolicyviolation', e => window.__violations.push(e.violatedDirective));"
)


@pytest.fixture(scope="module")
def tab() -> Iterator[Page]:
    """One tab for the module, recording every Content-Security-Policy violation of the pages it opens."""
    with launched() as browser, new_tab(browser) as page:
        page.add_init_script(VIOLATIONS)
        yield page


def violations(page: Page) -> list[str]:
    return list(page.evaluate("window.__violations"))


def test_the_charts_are_drawn_and_the_page_loads_nothing_but_itself(tab: Page, tmp_path: Path) -> None:
    d = busy()
    with opened(tab, tmp_path / "digest.html", digest_html(d, "acme")) as seen:
        page = seen.page
        charts = page.locator("svg.bar-chart")
        expect(charts).to_have_count(2)
        trend, top = page.locator("#trend svg.bar-chart"), page.locator("#top svg.bar-chart")
        for chart, costs in ((trend, [w.cost for w in d.trend]), (top, [t.cost for t in d.top])):
            expect(chart).to_be_visible()
            drawn = [
                float(w) for w in chart.locator("rect.bar").evaluate_all("bars => bars.map(b => b.getBBox().width)")
            ]
            assert len(drawn) == len(costs) and all((w > 0) == (c > 0) for w, c in zip(drawn, costs, strict=True))
            largest = max(drawn)
            assert [w / largest for w in drawn] == [pytest.approx(c / max(costs), abs=0.01) for c in costs]
            bar = rgb(chart.locator("rect.bar").first.evaluate("e => getComputedStyle(e).fill"))
            shot = colours(chart.screenshot())
            assert len(shot) > 4 and bar in shot  # the bars are on screen, in their colour
        expect(trend.locator("text.bar-figure")).to_have_text([f"{w.cost:.2f} USD" for w in d.trend])
        expect(page.locator("#trend table tbody tr")).to_have_count(len(d.trend))
        expect(page.locator("#top table tbody tr")).to_have_count(len(d.top))
        assert seen.requests == [seen.url]
        assert seen.problems == [] and violations(page) == []


def test_hostile_names_run_nothing_in_the_browser(tab: Page, tmp_path: Path) -> None:
    d = hostile()
    with opened(tab, tmp_path / "hostile.html", digest_html(d, f"<b>{SCRIPT}</b>")) as seen:
        page = seen.page
        expect(page.locator("#top table")).to_be_visible()

        def count(selector: str) -> int:
            return int(page.evaluate(f"document.querySelectorAll({selector!r}).length"))

        assert (count("script"), count("style"), count("svg")) == (1, 1, 2)  # the page's own, and the two charts
        assert count("img, iframe, object, embed, link, base, form, b, meta[http-equiv=refresh]") == 0
        handlers = (
            "[...document.querySelectorAll('*')].filter(e => e.getAttributeNames().some(a => a.startsWith('on')))"
        )
        assert page.evaluate(f"{handlers}.length") == 0
        text = page.locator("body").inner_text()
        assert SCRIPT in text and IMG in text and f"<b>{SCRIPT}</b>" in text
        assert seen.requests == [seen.url] and seen.problems == [] and violations(page) == []


def test_a_violation_would_be_seen(tab: Page, tmp_path: Path) -> None:
    """The checks above can fail: an inline style and an image from elsewhere are refused by the policy, and the
    refusals, the request and the console errors are all recorded."""
    page = digest_html(busy(), "acme").replace(
        '<section id="week">', '<section id="week"><p style="color: red">x</p><img src="https://example.com/x.png">'
    )
    with opened(tab, tmp_path / "violating.html", page) as seen:
        expect(seen.page.locator("#week table")).to_be_visible()
        seen.page.wait_for_function("window.__violations.length >= 2")
        assert sorted(set(violations(seen.page))) == ["img-src", "style-src-attr"]
        assert seen.requests == [seen.url, "https://example.com/x.png"]
        assert len(seen.problems) >= 2 and all("Content Security Policy" in p for p in seen.problems)

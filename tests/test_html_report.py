"""The HTML report (``bot.render.html``): its data preparation, then the page itself opened from disk in headless
Chromium, as a reader opens a CI artifact: it loads nothing, shows its heatmap and chart, opens a test's detail on
click, has a dark mode, and keeps hostile test names inert.

The browser is the system's Chromium (``FLAKETALLY_CHROMIUM``, else ``chromium`` on PATH), driven by Playwright;
Playwright's own browser download is never used (``tests.support.browser``). Without Chromium these tests fail,
saying what to install.
"""

from __future__ import annotations

import base64
import hashlib
import html
import io
import re
import subprocess
import sys
from collections.abc import Iterator, Sequence
from pathlib import Path
from typing import Literal

import pytest
from PIL import Image
from playwright.sync_api import Browser, Page, expect

from bot.core.analysis import Analysis, FileWarning
from bot.core.cost import Rates
from bot.core.judge import judge
from bot.core.observations import Observation, TestHistory
from bot.core.verdicts import CommitVerdict, TestVerdict
from bot.local.analyze import analyze
from bot.render.html import (
    TRACE_HEAD,
    TRACE_LIMIT,
    TRACE_TAIL,
    CellState,
    MessageGroup,
    cell_state,
    cost_rows,
    excerpt,
    heatmap,
    label,
    latest_failure,
    message_groups,
    pick_rows,
    to_html,
)
from bot.render.page import bar_chart, bar_layout, money
from tests.conftest import FIXTURES, ROOT
from tests.support.browser import background, chromium, colours, launched, luminance, new_tab, opened, rgb

SAMPLES = ROOT / "samples"
HOSTILE = FIXTURES / "hostile" / "injection-names.xml"
PWNED = "window.__pwned=1"


# --- data preparation, no browser ---------------------------------------------------------------------------


def sha(n: int) -> str:
    return hashlib.sha1(str(n).encode()).hexdigest()


def history(
    name: str,
    outcomes: Sequence[str],
    *,
    message: str = "AssertionError: boom",
    details: str = "",
    seconds: float = 1.0,
    first_commit: int = 0,
) -> TestHistory:
    """A test with one report per commit, ``outcomes[i]`` its attempts on commit ``first_commit + i``."""
    observations = [
        Observation(
            order=first_commit + i,
            commit=sha(first_commit + i),
            attempt=1,
            run_id=1000 + first_commit + i,
            started_at=None,
            outcomes=letters,
            seconds=seconds if "S" not in letters else 0.0,
            message=message if "F" in letters or "E" in letters else "",
            details=details if "F" in letters or "E" in letters else "",
        )
        for i, letters in enumerate(outcomes)
    ]
    return TestHistory(
        f"tests.mod::{name}", f"tests.mod::{name}", "tests.mod", name, None, None, "default", observations
    )


def judged(*histories: TestHistory, warnings: Sequence[FileWarning] = ()) -> Analysis:
    rates = Rates()
    tests = [judge(h, CommitVerdict.UNDETERMINED, rates) for h in histories]
    return Analysis(CommitVerdict.UNDETERMINED, rates, tests, list(warnings), files=len(histories), refused=0)


def test_money_is_to_the_cent_halves_up() -> None:
    assert money(22.500599, "USD") == "22.50 USD"
    assert money(0.125, "EUR") == "0.13 EUR"
    assert money(2.675, "USD") == "2.68 USD"  # 2.675 is 2.67499… as a float: rounded as written
    assert money(0.0, "USD") == "0.00 USD"
    assert money(1234.5, "USD") == "1234.50 USD"


def test_wasted_compute_is_unknown_when_no_flaky_event_has_a_time() -> None:
    untimed = history("test_untimed", ["FP", "FP"], seconds=0.0)
    timed = history("test_timed", ["FP", "P"], seconds=120.0)  # 1 of 2 attempts wasted
    analysis = judged(untimed, timed)
    rows = {r.label: r for r in cost_rows(analysis)}
    unknown = rows["tests/mod.py::test_untimed"]
    assert unknown.events == 2 and unknown.wasted_compute.startswith("unknown") and unknown.compute == "unknown"
    assert unknown.total == money(2 * 15 * 1.5, "USD") == "45.00 USD"
    known = rows["tests/mod.py::test_timed"]
    assert known.wasted_compute == "1.000 min" and known.compute == "0.01 USD"  # 1 min at 0.008 USD/min
    assert "unknown (the reports give no time)" in to_html(analysis)


def test_failure_messages_are_grouped_by_their_first_line() -> None:
    a = history("test_a", ["F", "FP"], message="AssertionError: x\nfull diff below")
    b = history("test_b", ["F"], message="  AssertionError: x  ")
    c = history("test_c", ["FF"], message="TimeoutError: slow\n")
    silent = history("test_silent", ["F"], message="")
    groups = message_groups(judged(a, b, c, silent).tests)
    assert groups == [
        MessageGroup("AssertionError: x", 3, ("tests/mod.py::test_a", "tests/mod.py::test_b"), 0),
        MessageGroup("TimeoutError: slow", 1, ("tests/mod.py::test_c",), 0),
    ]


def test_a_message_names_ten_tests_and_counts_the_rest() -> None:
    tests = [history(f"test_{i:02d}", ["F"], message="E: same") for i in range(13)]
    (group,) = message_groups(judged(*tests).tests)
    assert group.failures == 13 and len(group.tests) == 10 and group.more_tests == 3


def test_cell_states() -> None:
    def state(*letters: str, policy: CommitVerdict = CommitVerdict.UNDETERMINED) -> CellState:
        t = judge(history("test_x", letters), policy, Rates())
        return cell_state(t.commits[0] if t.commits else None, t.history.observations)

    assert state("P") is CellState.PASSED
    assert state("S") is CellState.SKIPPED
    assert state("FP") is CellState.FLAKY
    assert state("FF") is CellState.FAILING
    assert state("F") is CellState.UNDETERMINED
    assert state("F", policy=CommitVerdict.FAILING) is CellState.FAILING
    assert cell_state(None, []) is CellState.NOT_RUN


def test_rows_put_findings_first_worst_first() -> None:
    clean = history("test_clean", ["P"] * 6)
    flaky = history("test_flaky", ["FP", "P", "P", "P", "P"])
    broken = history("test_broken", ["FF"] * 5)
    regressed = history("test_regressed", ["P", "P", "P", "FF", "FF", "FF"])
    rows = pick_rows(judged(clean, flaky, broken, regressed).tests, 10)
    assert [t.judgement.verdict for t in rows] == [
        TestVerdict.REGRESSION,
        TestVerdict.BROKEN,
        TestVerdict.FLAKY,
        TestVerdict.STABLE,
    ]


def big_analysis(tests: int, commits: int, flaky: int) -> Analysis:
    """``tests`` tests over ``commits`` commits, the last ``flaky`` of them flaky on the newest commit."""
    clean = ["P"] * commits
    histories = [history(f"test_{i:04d}", clean) for i in range(tests - flaky)]
    histories += [history(f"test_z{i}", [*clean[:-1], "FP"]) for i in range(flaky)]
    return judged(*histories)


def test_the_heatmap_is_bounded_and_says_what_it_leaves_out() -> None:
    analysis = big_analysis(tests=300, commits=150, flaky=5)
    rows = pick_rows(analysis.tests, 200)
    grid = heatmap(analysis.tests, rows, 120)
    assert len(grid.rows) == 200 and all(len(r.cells) == 120 for r in grid.rows)
    assert [r.finding for r in grid.rows[:6]] == [True] * 5 + [False]
    assert grid.commits == tuple(sha(i) for i in range(30, 150))  # the most recent, oldest first
    assert grid.omitted == (
        "Left out to keep the page small: 100 of 300 tests (none with a finding) and the 30 oldest of 150 commits."
    )
    page = to_html(analysis)
    assert page.count("<tr data-detail=") == 200 and page.count('<td class="c-') == 200 * 120
    assert grid.omitted in page and 'id="detail-t199"' in page and 'id="detail-t200"' not in page


def test_nothing_is_left_out_of_a_small_history() -> None:
    analysis = analyze(None, [str(SAMPLES / "flakeledger")])
    grid = heatmap(analysis.tests, pick_rows(analysis.tests, 200))
    assert grid.omitted == "" and len(grid.rows) == len(analysis.tests)
    assert "Left out" not in to_html(analysis)


def test_a_stack_trace_is_cut_to_its_head_and_tail() -> None:
    trace = "\n".join(f"line {i}" for i in range(1000))
    cut = excerpt(trace).splitlines()
    assert len(cut) == TRACE_HEAD + TRACE_TAIL + 1
    assert cut[0] == "line 0" and cut[-1] == "line 999" and "960 lines left out" in cut[TRACE_HEAD]
    assert len(excerpt("x" * 10_000)) == TRACE_LIMIT


def test_the_bar_chart_is_svg_with_its_figures_as_text_and_escaped_labels() -> None:
    chart = bar_layout([("a", 2.0, "2.00 USD"), ("b", 1.0, "1.00 USD"), ("c", 0.0, "0.00 USD")], width=600)
    assert [b.width for b in chart.bars] == [420.0, 210.0, 0.0]
    svg = str(bar_chart([("<b>x</b>", 3.0, "3.00 USD & more")], title="cost"))
    assert svg.startswith("<svg") and "&lt;b&gt;x&lt;/b&gt;" in svg and "3.00 USD &amp; more" in svg
    assert "<b>" not in svg


def test_the_policy_allows_exactly_the_page_s_own_style_and_script() -> None:
    page = to_html(analyze(None, [str(SAMPLES / "flakeledger")]))
    found = re.search(r'http-equiv="Content-Security-Policy" content="([^"]+)"', page)
    assert found is not None
    policy = html.unescape(found.group(1))
    style = re.search(r"<style>(.*?)</style>", page, re.DOTALL)
    scripts = re.findall(r"<script>(.*?)</script>", page, re.DOTALL)
    assert style is not None and len(scripts) == 1

    def digest(text: str) -> str:
        return base64.b64encode(hashlib.sha256(text.encode()).digest()).decode()

    assert f"style-src 'sha256-{digest(style.group(1))}'" in policy
    assert f"script-src 'sha256-{digest(scripts[0])}'" in policy
    assert "default-src 'none'" in policy and "unsafe" not in policy
    assert not re.search(r"""(?:src|href)=["']?(?:https?:|//)""", page) and "@import" not in page and "url(" not in page


def test_help_does_not_import_jinja() -> None:
    probe = (
        "import sys, contextlib, io\nfrom bot.cli import main\n"
        "with contextlib.suppress(SystemExit), contextlib.redirect_stdout(io.StringIO()):\n    main(['--help'])\n"
        "print('jinja2' in sys.modules)"
    )
    done = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    assert done.stdout == "False\n"


# --- the page in Chromium -------------------------------------------------------------------------------------


def test_chromium_is_installed() -> None:
    """Said on its own, so a missing browser reads as one clear failure."""
    chromium()


@pytest.fixture(scope="module")
def browser() -> Iterator[Browser]:
    with launched() as found:
        yield found


@pytest.fixture(scope="module")
def tab(browser: Browser) -> Iterator[Page]:
    """One tab for the module (a tab costs Chromium most of a second here); each test opens its own file in it."""
    with new_tab(browser) as page:
        yield page


@pytest.fixture(scope="module")
def samples() -> dict[str, Analysis]:
    return {name: analyze(None, [str(SAMPLES / name)]) for name in ("pytest-rerunfailures", "flakeledger")}


@pytest.mark.parametrize("sample", ["pytest-rerunfailures", "flakeledger"])
def test_the_page_loads_nothing_but_itself(
    sample: str, tab: Page, samples: dict[str, Analysis], tmp_path: Path
) -> None:
    with opened(tab, tmp_path / "report.html", to_html(samples[sample])) as seen:
        expect(seen.page.locator("table.heatmap")).to_be_visible()
        expect(seen.page.locator("svg.bar-chart")).to_be_visible()
        assert seen.requests == [seen.url]
        assert seen.problems == []  # a load the policy blocked, or a style or script it refused, is logged here


@pytest.mark.parametrize("sample", ["pytest-rerunfailures", "flakeledger"])
def test_the_heatmap_and_the_chart_are_drawn(
    sample: str, tab: Page, samples: dict[str, Analysis], tmp_path: Path
) -> None:
    with opened(tab, tmp_path / "report.html", to_html(samples[sample])) as seen:
        page = seen.page
        flaky = background(page, ".legend .c-flaky")
        passed = background(page, ".legend .c-passed")
        grid = colours(page.locator("table.heatmap").screenshot())
        assert len(grid) > 8 and flaky in grid and passed in grid
        bar = rgb(page.locator("svg.bar-chart rect.bar").first.evaluate("e => getComputedStyle(e).fill"))
        chart = colours(page.locator("svg.bar-chart").screenshot())
        assert len(chart) > 4 and bar in chart
        expect(page.locator("svg.bar-chart text.bar-figure").first).to_have_text(re.compile(r"^\d+\.\d\d USD$"))
        assert seen.problems == []


def test_a_click_on_a_row_opens_its_detail_with_its_evidence(
    tab: Page, samples: dict[str, Analysis], tmp_path: Path
) -> None:
    analysis = samples["pytest-rerunfailures"]
    rows = pick_rows(analysis.tests, 200)
    with opened(tab, tmp_path / "report.html", to_html(analysis)) as seen:
        page = seen.page
        for index in (0, 2):  # the worst test, then another: one detail at a time
            test = rows[index]
            detail = page.locator(f"#detail-t{index}")
            expect(detail).to_be_hidden()
            page.locator(f'tr[data-detail="t{index}"] td[class^="c-"]').last.click()  # a cell: the script's part
            expect(detail).to_be_visible()
            expect(detail.locator("h3")).to_have_text(label(test))
            expect(detail.locator(".evidence")).to_have_text(test.judgement.evidence)
            expect(detail).to_contain_text(f"Wilson lower bound {test.judgement.lower_bound:.3f}")
            for commit in test.commits[:3]:
                expect(detail).to_contain_text(commit.evidence)
            latest, _ = latest_failure(test)
            if latest is not None and latest.details:
                expect(detail.locator(".trace")).to_be_visible()
                expect(detail.locator(".trace")).to_contain_text(latest.details.splitlines()[-1].strip())
            expect(page.locator(".detail:visible")).to_have_count(1)
            expect(page.locator("#details .placeholder")).to_be_hidden()
            expect(page.locator(f'tr[data-detail="t{index}"]')).to_have_class(re.compile(r"\bselected\b"))
        assert rows[0].judgement.verdict is TestVerdict.REGRESSION
        assert seen.requests == [seen.url] and seen.problems == []


def test_a_cell_tooltip_names_the_run_the_attempt_the_time_and_the_message(
    tab: Page, samples: dict[str, Analysis], tmp_path: Path
) -> None:
    with opened(tab, tmp_path / "report.html", to_html(samples["flakeledger"])) as seen:
        cells = seen.page.locator("td.c-flaky")
        expect(cells.first).to_have_attribute("title", re.compile(r"flaky\nattempt 1: failed in \d+\.\d\d s\n  \S"))


def test_dark_mode_darkens_the_page_and_keeps_the_colours_apart(
    tab: Page, samples: dict[str, Analysis], tmp_path: Path
) -> None:
    report = to_html(samples["flakeledger"])
    schemes: tuple[tuple[Literal["light", "dark"], bool], ...] = (("light", False), ("dark", True))
    for scheme, dark in schemes:
        with opened(tab, tmp_path / f"{scheme}.html", report, scheme) as seen:
            page = seen.page
            body = background(page, "body")
            pixel = Image.open(io.BytesIO(page.screenshot(clip={"x": 2, "y": 2, "width": 4, "height": 4})))
            corner = pixel.convert("RGB").getpixel((1, 1))
            assert isinstance(corner, tuple)
            shot = (int(corner[0]), int(corner[1]), int(corner[2]))
            assert (luminance(body) < 0.05, luminance(shot) < 0.05) == (dark, dark)
            assert (luminance(body) > 0.8, luminance(shot) > 0.8) == (not dark, not dark)
            states = [background(page, f".legend .c-{s.value}") for s in CellState]
            assert len(set(states)) == len(states) and body not in states
            distances = [sum(abs(x - y) for x, y in zip(a, b, strict=True)) for a in states for b in states if a < b]
            assert min(distances) > 60, states


def hostile_analysis() -> Analysis:
    """The hostile corpus's injection names, and names, messages, traces, paths and a warning made to run script."""
    read = analyze(None, [str(HOSTILE)])
    img = f'<img src=x onerror="{PWNED}">'
    script = f"</script><script>{PWNED}</script>"
    names = [img, script, f'"><svg onload="{PWNED}">', f"' onmouseover='{PWNED}' x='", "]]><!--<style>*{color:red}"]
    made = [
        judge(
            TestHistory(
                f"{n}::{n}",
                n,
                f"tests.{n}",
                n,
                f"tests/{img}.py",
                7,
                '{"job":"' + script + '"}',
                [
                    Observation(0, sha(0), 1, 1, None, "FP", 1.0, img, f"tests/x.py:1: {script}\n{img}"),
                    Observation(1, sha(1), 1, 2, None, "F", 1.0, script, img),
                ],
            ),
            CommitVerdict.UNDETERMINED,
            Rates(currency=img),
        )
        for n in names
    ]
    warning = FileWarning(f"{img}.xml", script)
    return Analysis(read.policy, Rates(currency=img), [*read.tests, *made], [*read.warnings, warning], files=2)


def test_hostile_names_are_shown_as_text_and_run_nothing(tab: Page, tmp_path: Path) -> None:
    analysis = hostile_analysis()
    assert any("onerror=alert(1)" in t.history.name for t in analysis.tests)  # the corpus file was read
    with opened(tab, tmp_path / "hostile.html", to_html(analysis)) as seen:
        page = seen.page
        expect(page.locator("table.heatmap")).to_be_visible()

        def count(selector: str) -> int:
            return int(page.evaluate(f"document.querySelectorAll({selector!r}).length"))

        # escaping, not only the policy: no element or handler came from a name
        assert (count("script"), count("style"), count("svg")) == (1, 1, 1)  # the page's own, and the chart
        assert count("img, iframe, object, embed, link, base, form, meta[http-equiv=refresh]") == 0
        handlers = (
            "[...document.querySelectorAll('*')].filter(e => e.getAttributeNames().some(a => a.startsWith('on')))"
        )
        assert page.evaluate(f"{handlers}.length") == 0
        rows = page.locator("tr[data-detail]")
        for index in range(rows.count()):
            rows.nth(index).locator("td.verdict").click()
            rows.nth(index).locator('td[class^="c-"]').first.hover()
        expect(page.locator(".detail:visible")).to_have_count(1)
        assert page.evaluate("typeof window.__pwned") == "undefined"
        text = page.locator("body").inner_text()
        assert '<img src=x onerror="window.__pwned=1">' in text and "<script>window.__pwned=1</script>" in text
        assert "@octocat" in text and "<img src=x onerror=alert(1)>" in text
        assert seen.requests == [seen.url] and seen.problems == []

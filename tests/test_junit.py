"""The JUnit reader on small inline reports, one per rule, then on one real report per runner.

The per-runner files (tests/fixtures/junit/<runner>.xml) are copied from ../shared/corpus/real-runners,
which was made for this project; each was chosen to show that runner's retry form where it has one.
"""

from __future__ import annotations

import hashlib
import io
from typing import IO, NamedTuple, cast

import pytest

from bot.core.identity import MAX_NAME
from bot.core.junit import parse
from bot.core.results import MAX_MESSAGE, Attempt, Outcome, Report, ReportRefused, first_line
from bot.core.results import TestResult as Result  # a Test* name would be collected by pytest
from tests.conftest import FIXTURES

P, F, E, S = Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED
CODE = {P: "P", F: "F", E: "E", S: "S"}


class Trickle(io.RawIOBase):
    """A stream that hands out at most ``size`` bytes a read, as a slow download would."""

    def __init__(self, data: bytes, size: int) -> None:
        self.data, self.size, self.at = data, size, 0

    def readable(self) -> bool:
        return True

    def read(self, n: int = -1) -> bytes:
        chunk = self.data[self.at : self.at + min(self.size, n if n >= 0 else self.size)]
        self.at += len(chunk)
        return chunk


def read(xml: str, *, trickle: int | None = None) -> Report:
    data = xml.encode()
    stream = cast(IO[bytes], Trickle(data, trickle)) if trickle else io.BytesIO(data)
    return parse(stream)


def codes(result: Result) -> str:
    return "".join(CODE[a.outcome] for a in result.attempts)


def by_id(report: Report) -> dict[str, Result]:
    return {r.id: r for r in report.results}


def only(report: Report) -> Result:
    assert len(report.results) == 1, [r.id for r in report.results]
    return report.results[0]


def suite(cases: str, **attrs: str) -> str:
    extra = "".join(f' {k}="{v}"' for k, v in attrs.items())
    return f'<?xml version="1.0"?>\n<testsuites><testsuite name="s"{extra}>{cases}</testsuite></testsuites>'


# Surefire's four ---------------------------------------------------------------------------------------


def test_flaky_elements_are_failed_attempts_before_the_pass() -> None:
    result = only(
        read(
            suite("""
        <testcase classname="com.example.T" name="flaky" time="0.5">
          <flakyFailure message="first line&#10;second line" type="AssertionError" time="0.2">
            <stackTrace>java.lang.AssertionError: first line</stackTrace>
          </flakyFailure>
          <flakyError message="connection reset" time="0.3"/>
        </testcase>""")
        )
    )
    assert result.attempts == (
        Attempt(F, 0.2, "first line"),
        Attempt(E, 0.3, "connection reset"),
        Attempt(P, 0.5, ""),
    )
    assert result.outcome is P and result.message == "first line"


def test_rerun_elements_follow_the_final_failure() -> None:
    result = only(
        read(
            suite("""
        <testcase classname="com.example.T" name="broken" time="0.4">
          <failure message="expected 4">trace</failure>
          <rerunFailure message="expected 4, again" time="0.3"><stackTrace>trace</stackTrace></rerunFailure>
          <rerunError message="timed out"/>
        </testcase>""")
        )
    )
    # A rerun element without its own time is given the testcase's.
    assert result.attempts == (
        Attempt(F, 0.4, "expected 4"),
        Attempt(F, 0.3, "expected 4, again"),
        Attempt(E, 0.4, "timed out"),
    )
    assert result.outcome is E and result.message == "expected 4"


def test_rerun_elements_without_a_final_failure_end_in_a_pass() -> None:
    result = only(read(suite('<testcase classname="T" name="t" time="0.1"><rerunFailure message="x"/></testcase>')))
    assert codes(result) == "FP" and result.outcome is P


def test_nested_output_inside_a_retry_element_is_not_its_message() -> None:
    """cargo-nextest writes <system-out>/<system-err> inside each flaky or rerun element."""
    result = only(
        read(
            suite("""
        <testcase classname="planted::planted" name="flaky" time="0.007">
          <flakyFailure time="0.011" type="test failure">thread 'flaky' panicked at tests/p.rs:60:5
            <system-out>running 1 test</system-out><system-err>more</system-err>
          </flakyFailure>
        </testcase>""")
        )
    )
    assert result.attempts == (Attempt(F, 0.011, "thread 'flaky' panicked at tests/p.rs:60:5"), Attempt(P, 0.007))


# Several <failure> elements, Playwright's "Retry #N" ------------------------------------------------------


def test_several_failures_are_one_attempt_each_sharing_the_time() -> None:
    result = only(
        read(
            suite("""
        <testcase classname="a.test.js" name="a &gt; t" time="0.9">
          <failure message="one" type="AssertionError">AssertionError: one</failure>
          <failure message="two" type="AssertionError">AssertionError: two</failure>
          <failure message="three" type="AssertionError">AssertionError: three</failure>
        </testcase>""")
        )
    )
    assert [(a.outcome, a.message) for a in result.attempts] == [(F, "one"), (F, "two"), (F, "three")]
    assert [a.duration for a in result.attempts] == pytest.approx([0.3, 0.3, 0.3])
    assert result.message == "one"


PLAYWRIGHT = """<testsuites id="" name="" tests="2" failures="1">
<testsuite name="a.spec.js" hostname="chromium" tests="2">
<testcase name="s › fails" classname="a.spec.js" time="0.6">
<failure message="expect(received).toBe(expected)" type="expect.toBe"><![CDATA[  a.spec.js:3:1 › s › fails ────────

    Error: expect(received).toBe(expected)

    Retry #1 ───────────────────────────────────

    Error: expect(received).toBe(expected)

    Retry #2 ───────────────────────────────────

    Error: expect(received).toBe(expected)
]]></failure>
</testcase>
<testcase name="s › passes" classname="a.spec.js" time="0.01"></testcase>
</testsuite>
</testsuites>
"""


@pytest.mark.parametrize("trickle", [None, 1, 7])
def test_playwright_retry_sections_are_further_attempts(trickle: int | None) -> None:
    """Also read a few bytes at a time: a section's header may be split between two reads."""
    results = by_id(read(PLAYWRIGHT, trickle=trickle))
    fails = results["a.spec.js::s › fails [chromium]"]
    assert codes(fails) == "FFF" and fails.project == "chromium"
    assert [a.duration for a in fails.attempts] == pytest.approx([0.2, 0.2, 0.2])
    assert {a.message for a in fails.attempts} == {"expect(received).toBe(expected)"}
    assert codes(results["a.spec.js::s › passes [chromium]"]) == "P"


def test_retry_sections_count_only_in_a_playwright_report() -> None:
    """Playwright's root is ``<testsuites id="">``; elsewhere the words are just text."""
    other = PLAYWRIGHT.replace('<testsuites id=""', "<testsuites")
    assert codes(by_id(read(other))["a.spec.js::s › fails"]) == "F"


def test_playwright_rerun_elements_are_not_counted_twice() -> None:
    """With PLAYWRIGHT_JUNIT_INCLUDE_RETRIES the reruns are elements, and the final failure still holds
    every attempt's "Retry #N" text."""
    xml = PLAYWRIGHT.replace(
        '<failure message="expect(received).toBe(expected)"',
        '<rerunFailure message="retry one" time="0.1"/><rerunFailure message="retry two" time="0.1"/>'
        '<failure message="expect(received).toBe(expected)"',
    )
    fails = by_id(read(xml))["a.spec.js::s › fails [chromium]"]
    assert [(a.outcome, a.message) for a in fails.attempts] == [
        (F, "expect(received).toBe(expected)"),
        (F, "retry one"),
        (F, "retry two"),
    ]


# Repeated testcases -----------------------------------------------------------------------------------


GO = '<properties><property name="go.version" value="go1.19.8 linux/amd64"></property></properties>'


def test_a_testcase_repeated_by_gotestsum_is_one_test_with_an_attempt_each() -> None:
    """gotestsum --rerun-fails: one entry per attempt, in order, every one before the last failed."""
    report = read(
        suite(f"""{GO}
        <testcase classname="example.com/pkg" name="TestA" time="0.1"><failure message="Failed"/></testcase>
        <testcase classname="example.com/pkg" name="TestB" time="0.1"/>
        <testcase classname="example.com/pkg" name="TestA" time="0.2"/>
        <testcase classname="example.com/pkg" name="TestD"><failure message="Failed"/></testcase>
        <testcase classname="example.com/pkg" name="TestD"><failure message="Failed"/></testcase>""")
    )
    assert [(r.id, codes(r)) for r in report.results] == [
        ("example.com/pkg::TestA", "FP"),
        ("example.com/pkg::TestB", "P"),
        ("example.com/pkg::TestD", "FF"),
    ]
    assert by_id(report)["example.com/pkg::TestA"].attempts == (Attempt(F, 0.1, "Failed"), Attempt(P, 0.2))
    assert report.collisions == []


GRADLE = """<?xml version="1.0" encoding="UTF-8"?>
<testsuite name="com.acme.CartTest" tests="3" skipped="0" failures="1" errors="0"
    timestamp="2026-12-01T10:00:00" hostname="runner" time="0.4">
  <properties/>
  <testcase name="addsItem" classname="com.acme.CartTest" time="0.1">
    <failure message="expected 2 but was 1" type="java.lang.AssertionError">trace</failure>
  </testcase>
  <testcase name="addsItem" classname="com.acme.CartTest" time="0.2"/>
  <testcase name="removesItem" classname="com.acme.CartTest" time="0.1"/>
  <system-out><![CDATA[]]></system-out>
  <system-err><![CDATA[]]></system-err>
</testsuite>"""


def test_a_testcase_repeated_by_gradle_without_merge_reruns_is_one_test() -> None:
    """Gradle's JUnitXmlResultWriter: a <testsuite> root per class with an empty <properties/>; without
    ``mergeReruns`` a retried test is written again."""
    report = read(GRADLE)
    assert [(r.id, codes(r)) for r in report.results] == [
        ("com.acme.CartTest::addsItem", "FP"),
        ("com.acme.CartTest::removesItem", "P"),
    ]


MOCHA_COLLISION = """<?xml version="1.0" encoding="UTF-8"?>
<testsuites name="Mocha Tests" time="0.5" tests="3" failures="1">
  <testsuite name="Root Suite" timestamp="2026-12-01T10:00:00" tests="0" time="0.000" failures="0"/>
  <testsuite name="checkout" timestamp="2026-12-01T10:00:00" tests="3" time="0.5" failures="1">
    <testcase name="checkout applies the coupon" time="0.2" classname="applies the coupon"/>
    <testcase name="checkout applies the coupon" time="0.2" classname="applies the coupon">
      <failure message="expected 90 to equal 100" type="AssertionError">AssertionError: expected 90</failure>
    </testcase>
    <testcase name="checkout totals the cart" time="0.1" classname="totals the cart"/>
  </testsuite>
</testsuites>"""


def test_two_tests_sharing_a_name_are_a_collision_not_a_flaky_pass() -> None:
    """mocha writes no retries: a pass and a failure of one name are two tests. Neither is judged, and the
    report names them (the failure is counted, so a reader can still tell something failed)."""
    report = read(MOCHA_COLLISION)
    assert [(r.id, codes(r)) for r in report.results] == [("totals the cart::checkout totals the cart", "P")]
    (collision,) = report.collisions
    assert (collision.test, collision.suite, collision.entries, collision.failed) == (
        "applies the coupon::checkout applies the coupon",
        "checkout",
        2,
        1,
    )
    assert collision.describe() == (
        "2 testcases named 'applies the coupon::checkout applies the coupon' in suite 'checkout' are different "
        "tests sharing one name, not retries (1 of them failed): left out of the verdicts; give them distinct "
        "names to have them judged"
    )


@pytest.mark.parametrize(
    ("cases", "why"),
    [
        ('<testcase classname="p" name="T"/><testcase classname="p" name="T"><failure/></testcase>', "a pass first"),
        ('<testcase classname="p" name="T"><skipped/></testcase><testcase classname="p" name="T"/>', "a skip first"),
        ('<testcase classname="p" name="T"><failure/></testcase><testcase classname="p" name="T"/>', "no retry form"),
    ],
)
def test_a_repeated_name_is_a_collision_unless_the_runner_repeats_retries_and_each_earlier_entry_failed(
    cases: str, why: str
) -> None:
    producer = "" if why == "no retry form" else GO
    report = read(suite(producer + cases))
    assert report.results == [], why
    assert [(c.test, c.entries) for c in report.collisions] == [("p::T", 2)], why


def test_suites_of_one_name_are_one_suite() -> None:
    failed = '<testcase classname="pkg" name="TestA"><failure message="Failed"/></testcase>'
    xml = f"""<testsuites>
      <testsuite name="pkg">{GO}{failed}</testsuite>
      <testsuite name="pkg"><testcase classname="pkg" name="TestA"/></testsuite>
    </testsuites>"""
    assert codes(only(read(xml))) == "FP"


PYTEST_RERUNS = """<?xml version="1.0" encoding="utf-8"?><testsuites name="pytest tests">
<testsuite name="pytest" tests="7">
<testcase classname="tests.test_m" name="test_flaky" time="0.1" />
<testcase classname="tests.test_m" name="test_flaky" time="0.2" />
<testcase classname="tests.test_m" name="test_broken" time="0.1" />
<testcase classname="tests.test_m" name="test_broken" time="0.1" />
<testcase classname="tests.test_m" name="test_broken" time="0.1"><failure message="AssertionError: no">trace</failure>
</testcase>
<testcase classname="tests.test_m" name="test_ok" time="0.3" />
<testcase classname="tests.test_m" name="test_skip" time="0.0"><skipped message="why" /></testcase>
</testsuite></testsuites>"""


def test_pytest_rerunfailures_empty_entries_before_the_last_are_failed_attempts() -> None:
    report = read(PYTEST_RERUNS)
    assert [(r.id, codes(r)) for r in report.results] == [
        ("tests.test_m::test_flaky", "FP"),
        ("tests.test_m::test_broken", "FFF"),
        ("tests.test_m::test_ok", "P"),
        ("tests.test_m::test_skip", "S"),
    ]
    flaky, broken = report.results[:2]
    assert flaky.attempts == (Attempt(F, 0.1), Attempt(P, 0.2))  # the plugin keeps no message
    assert broken.message == "AssertionError: no"


def test_the_pytest_rule_needs_the_pytest_suite() -> None:
    """Without pytest's suite the empty entries are passes, so the repeats are name collisions."""
    other = read(PYTEST_RERUNS.replace('name="pytest"', 'name="unit"'))
    assert [(r.id, codes(r)) for r in other.results] == [
        ("tests.test_m::test_ok", "P"),
        ("tests.test_m::test_skip", "S"),
    ]
    assert [(c.test, c.entries, c.failed) for c in other.collisions] == [
        ("tests.test_m::test_flaky", 2, 0),
        ("tests.test_m::test_broken", 3, 1),
    ]


def test_a_skipped_entry_before_the_last_is_not_a_pytest_rerun() -> None:
    xml = PYTEST_RERUNS.replace(
        '<testcase classname="tests.test_m" name="test_flaky" time="0.1" />',
        '<testcase classname="tests.test_m" name="test_flaky" time="0.1"><skipped message="x"/></testcase>',
    )
    report = read(xml)
    assert "tests.test_m::test_flaky" not in by_id(report)
    assert [c.test for c in report.collisions] == ["tests.test_m::test_flaky"]


def test_one_name_in_two_suites_is_two_tests() -> None:
    """jest-junit: one suite per file, classname the describe path; two files may share a name."""
    xml = """<testsuites name="jest tests">
      <testsuite name="src/a.test.js"><testcase classname="" name="works"/></testsuite>
      <testsuite name="src/b.test.js"><testcase classname="" name="works"><failure message="no"/></testcase></testsuite>
      <testsuite name="src/c.test.js"><testcase classname="util" name="works"/></testsuite>
      <testsuite name="src/d.test.js"><testcase classname="util" name="works"/></testsuite>
      <testsuite name="src/e.test.js"><testcase classname="only" name="here"/></testsuite>
    </testsuites>"""
    assert [(r.id, codes(r)) for r in read(xml).results] == [
        ("src/a.test.js::works", "P"),
        ("src/b.test.js::works", "F"),
        ("src/c.test.js::util::works", "P"),
        ("src/d.test.js::util::works", "P"),
        ("only::here", "P"),  # a name in one suite only keeps its plain id
    ]


def test_testcases_without_a_name_are_not_merged() -> None:
    report = read(suite('<testcase/><testcase><skipped/></testcase><testcase name=" "><failure/></testcase>'))
    assert [(r.name, codes(r)) for r in report.results] == [
        ("(unnamed testcase 1)", "P"),
        ("(unnamed testcase 2)", "S"),
        ("(unnamed testcase 3)", "F"),
    ]


def test_ids_stay_unique_when_a_qualified_name_meets_a_written_one() -> None:
    xml = """<testsuites>
      <testsuite name="a"><testcase classname="c" name="t"/></testsuite>
      <testsuite name="b"><testcase classname="c" name="t"/></testsuite>
      <testsuite name="z"><testcase classname="a::c" name="t"><failure/></testcase></testsuite>
    </testsuites>"""
    report = read(xml)
    assert [(r.id, codes(r)) for r in report.results] == [
        ("a::c::t", "P"),
        ("b::c::t", "P"),
        ("a::c::t (2)", "F"),
    ]


# Skipped, error --------------------------------------------------------------------------------------


def test_skipped() -> None:
    result = only(read(suite('<testcase classname="c" name="t"><skipped message="not on linux"/></testcase>')))
    assert result.attempts == (Attempt(S, 0.0),) and result.message == ""


@pytest.mark.parametrize("status", ["disabled", "notrun", "NotRun", "skipped", "ignored"])
def test_a_status_that_says_not_run_is_skipped(status: str) -> None:
    assert codes(only(read(suite(f'<testcase name="t" status="{status}" time="0"/>')))) == "S"


@pytest.mark.parametrize("status", ["run", "passed", ""])
def test_a_status_that_says_run_is_not_skipped(status: str) -> None:
    assert codes(only(read(suite(f'<testcase name="t" status="{status}"/>')))) == "P"


def test_a_failure_wins_over_skipped_and_status() -> None:
    xml = suite('<testcase name="t" status="disabled"><skipped/><failure message="ran anyway"/></testcase>')
    assert only(read(xml)).attempts == (Attempt(F, 0.0, "ran anyway"),)


def test_error() -> None:
    xml = suite('<testcase name="t" time="1.5"><error message="Boom&#10;at x" type="E">tb</error></testcase>')
    result = only(read(xml))
    assert result.attempts == (Attempt(E, 1.5, "Boom"),) and result.outcome.is_failure


def test_failure_and_error_together_are_one_errored_attempt() -> None:
    """pytest: the test failed, then its teardown errored; one run, not two."""
    xml = suite(
        '<testcase name="t" time="0.2"><failure message="assert 1 == 2"/><error message="teardown"/></testcase>'
    )
    assert only(read(xml)).attempts == (Attempt(E, 0.2, "assert 1 == 2"),)


# Suites ----------------------------------------------------------------------------------------------


def test_nested_suites_give_every_testcase() -> None:
    xml = """<testsuites><testsuite name="outer">
      <testsuite name="inner"><testsuite name="innermost"><testcase classname="k" name="deep"/></testsuite>
        <testcase classname="k" name="middle"/></testsuite>
      <testcase classname="k" name="top"><failure/></testcase>
    </testsuite></testsuites>"""
    assert [(r.id, codes(r)) for r in read(xml).results] == [("k::deep", "P"), ("k::middle", "P"), ("k::top", "F")]


def test_a_bare_testsuite_root() -> None:
    report = read('<testsuite name="com.example.T"><testcase classname="com.example.T" name="t"/></testsuite>')
    assert [(r.id, codes(r)) for r in report.results] == [("com.example.T::t", "P")]


def test_an_empty_report_has_no_results() -> None:
    assert read('<testsuites tests="6"><testsuite name="s" tests="6"/></testsuites>').results == []


def test_the_hostname_is_a_project_only_in_playwright() -> None:
    assert only(read(suite('<testcase classname="c" name="t"/>', hostname="ci-runner-7"))).project is None


# Run identity ----------------------------------------------------------------------------------------


def test_commit_attempt_and_timestamp_attributes() -> None:
    report = read(suite('<testcase name="t"/>', commit="3484a3f", attempt="2", timestamp="2024-05-01T10:00:00Z"))
    assert (report.commit, report.attempt, report.timestamp) == ("3484a3f", 2, "2024-05-01T10:00:00Z")


def test_properties_give_commit_attempt_runtime_os_and_arch() -> None:
    xml = """<testsuites><testsuite name="s">
      <properties>
        <property name="commit" value="abc123"/><property name="attempt" value="3"/>
        <property name="java.version" value="17.0.15"/><property name="os.name" value="Linux"/>
        <property name="os.arch" value="amd64"/><property name="password" value="ignored"/>
      </properties>
      <testcase name="t"><properties><property name="commit" value="not-a-suite-property"/></properties></testcase>
    </testsuite></testsuites>"""
    report = read(xml)
    assert (report.commit, report.attempt) == ("abc123", 3)
    assert (report.runtime, report.os, report.arch) == ("java 17.0.15", "Linux", "amd64")


def test_go_version_is_the_runtime() -> None:
    xml = suite(
        '<properties><property name="go.version" value="go1.22.1 linux/amd64"/></properties><testcase name="t"/>'
    )
    assert read(xml).runtime == "go1.22.1 linux/amd64"


def test_suite_attributes_win_over_properties_and_the_first_found_is_kept() -> None:
    xml = """<testsuites>
      <testsuite name="a" commit="from-attribute">
        <properties><property name="commit" value="from-property"/><property name="attempt" value="4"/></properties>
        <testcase name="t"/>
      </testsuite>
      <testsuite name="b" commit="second-suite" attempt="9"><testcase name="u"/></testsuite>
    </testsuites>"""
    report = read(xml)
    assert (report.commit, report.attempt) == ("from-attribute", 9)  # no suite attribute before b's


@pytest.mark.parametrize("value", ["two", "-1", "1.5", "1_0", "99999999999", ""])
def test_an_attempt_that_is_not_a_small_number_is_unknown(value: str) -> None:
    assert read(suite('<testcase name="t"/>', attempt=value)).attempt is None


def test_no_run_identity_in_the_report() -> None:
    report = read(suite('<testcase name="t"/>'))
    assert (report.commit, report.attempt, report.timestamp, report.runtime, report.os, report.arch) == (
        None,
        None,
        None,
        "",
        "",
        "",
    )


def test_digest_and_size_are_of_the_bytes_read() -> None:
    xml = suite('<testcase name="t"/>')
    report = read(xml, trickle=5)
    assert report.digest == hashlib.sha256(xml.encode()).hexdigest() and report.size == len(xml.encode())


# File and line -----------------------------------------------------------------------------------------


def test_pytest_xunit1_lines_are_0_based_and_stored_1_based() -> None:
    xml = """<testsuites><testsuite name="pytest">
      <testcase classname="tests.test_m" name="test_x" file="tests/test_m.py" line="41" time="0.1"/>
    </testsuite></testsuites>"""
    result = only(read(xml))
    assert (result.file, result.line) == ("tests/test_m.py", 42)
    assert result.id == "tests/test_m.py::tests.test_m::test_x"


def test_other_runners_lines_are_kept() -> None:
    result = only(read(suite('<testcase classname="T" name="t" file="src/T.php" line="34"/>')))
    assert (result.file, result.line) == ("src/T.php", 34)


@pytest.mark.parametrize("line", ["x", "-3", "1e3", "3000000000"])
def test_a_line_that_is_not_a_number_is_dropped(line: str) -> None:
    assert only(read(suite(f'<testcase name="t" file="f.py" line="{line}"/>'))).line is None


@pytest.mark.parametrize("value", ["-1", "nan", "inf", "1e400", "soon"])
def test_a_time_that_is_not_a_duration_is_zero(value: str) -> None:
    assert only(read(suite(f'<testcase name="t" time="{value}"/>'))).attempts[0].duration == 0.0


# Messages --------------------------------------------------------------------------------------------


def test_the_message_is_the_first_non_empty_line() -> None:
    xml = suite('<testcase name="t"><failure message="&#10;  &#10;  first  &#10;second"/></testcase>')
    assert only(read(xml)).message == "first"


def test_without_a_message_attribute_the_text_gives_it() -> None:
    xml = suite(
        '<testcase name="t"><failure type="AssertionError">\n\n  AssertionError: 1 != 2\n  at x\n</failure></testcase>'
    )
    assert only(read(xml)).message == "AssertionError: 1 != 2"


def test_the_message_is_bounded() -> None:
    long = "y" * (MAX_MESSAGE * 3)
    message = only(read(suite(f'<testcase name="t"><failure message="{long}"/></testcase>'))).message
    assert message == "y" * (MAX_MESSAGE - 1) + "…"
    assert first_line("short") == "short" and first_line(None) == first_line("") == first_line(" \n ") == ""


def test_an_empty_failure_takes_the_panic_from_system_out() -> None:
    """cargo's libtest: ``<failure type="assert"/>`` and the panic text in <system-out>."""
    xml = suite("""<testcase classname="integration" name="always_fail"><failure type="assert"/>
      <system-out><![CDATA[]]>&#xA;<![CDATA[thread 'always_fail' panicked at tests/p.rs:47:5:]]>&#xA;
      <![CDATA[boom]]></system-out>
    </testcase>""")
    assert only(read(xml)).message == "thread 'always_fail' panicked at tests/p.rs:47:5:"


def test_an_empty_failure_otherwise_takes_the_first_line_of_system_out() -> None:
    xml = suite('<testcase name="t"><failure/><system-out>\nsomething went wrong\nmore</system-out></testcase>')
    assert only(read(xml)).message == "something went wrong"


# Identity ----------------------------------------------------------------------------------------------


def test_test_id_and_family_id() -> None:
    report = read(
        suite("""
        <testcase classname="tests.test_up" name="test_upload[s3]"/>
        <testcase classname="tests.test_up" name="test_upload[gcs-eu]"/>
        <testcase classname="planted.test.js" name="planted &gt; param[b]" file="planted.test.js"/>
        <testcase classname="example.com/p" name="Test_param/b"/>""")
    )
    assert [(r.id, r.family) for r in report.results] == [
        ("tests.test_up::test_upload[s3]", "tests.test_up::test_upload"),
        ("tests.test_up::test_upload[gcs-eu]", "tests.test_up::test_upload"),
        ("planted.test.js::planted > param[b]", "planted.test.js::planted > param"),  # file == classname: once
        ("example.com/p::Test_param/b", "example.com/p::Test_param"),
    ]


def test_oversize_names_are_bounded_and_stay_distinct() -> None:
    a, b = "a" * 3000 + "1", "a" * 3000 + "2"
    report = read(suite(f'<testcase classname="{"c" * 5000}" name="{a}"/><testcase classname="c" name="{b}"/>'))
    first, second = report.results
    assert len(first.classname) == len(first.name) == MAX_NAME and len(first.id) <= MAX_NAME
    assert len(second.name) == MAX_NAME and first.name != second.name


# Refusals --------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("xml", "reason"),
    [
        ("", "empty: no XML element"),
        ("<?xml version='1.0'?>\n", "not well-formed XML at line 2: no element found"),
        ("<results><testcase name='t'/></results>", "not a JUnit report (root element <results>)"),
        ("<testsuite><testcase name='t'>", "not well-formed XML at line 1: no element found"),
        ("<testsuite/><testsuite/>", "not well-formed XML at line 1: junk after document element"),
        ('<!DOCTYPE testsuite><testsuite name="s"/>', "refused: DTDForbidden"),
        ("<testsuite>" * 65 + "</testsuite>" * 65, "elements nested deeper than 64"),
    ],
)
def test_refused_with_a_reason(xml: str, reason: str) -> None:
    with pytest.raises(ReportRefused) as refused:
        read(xml)
    assert str(refused.value).startswith(reason)


# One real report per runner ----------------------------------------------------------------------------


class Runner(NamedTuple):
    meta: tuple[str | None, str, str, str]  # timestamp, runtime, os, arch
    results: list[tuple[str, ...]]  # (id, attempts' outcomes[, message of the first failure])


RUNNERS = {
    "cargo-libtest": Runner(
        meta=(None, "", "", ""),
        results=[
            ("integration::stable_pass", "P"),
            ("integration::always_fail", "F", "thread 'always_fail' (17173) panicked at tests/planted.rs:47:5:"),
            ("integration::param::b", "P"),
            ("integration::regress_at", "P"),
            ("integration::param::a", "P"),
            ("integration::order_dep", "P"),
            ("integration::flaky_p05", "P"),
            ("integration::flaky_p30", "P"),
        ],
    ),
    "gotestsum-rerun": Runner(
        meta=("2026-12-01T20:13:01Z", "go1.19.8 linux/amd64", "", ""),
        results=[
            ("example.com/planted::Test_param/b", "FP", "Failed"),
            ("example.com/planted::Test_param", "FP", "Failed"),
            ("example.com/planted::Test_flaky_p30", "FP", "Failed"),
            ("example.com/planted::Test_regress_at", "FFF", "Failed"),
            ("example.com/planted::Test_always_fail", "FFF", "Failed"),
            ("example.com/planted::Test_skipped_one", "S"),
            ("example.com/planted::Test_flaky_p05", "P"),
            ("example.com/planted::Test_order_dep", "P"),
            ("example.com/planted::Test_param/a", "P"),
            ("example.com/planted::Test_stable_pass", "P"),
        ],
    ),
    "gotestsum": Runner(
        meta=("2026-12-01T20:11:49Z", "go1.19.8 linux/amd64", "", ""),
        results=[
            ("example.com/planted::Test_always_fail", "F", "Failed"),
            ("example.com/planted::Test_skipped_one", "S"),
            ("example.com/planted::Test_flaky_p30", "P"),
            ("example.com/planted::Test_stable_pass", "P"),
            ("example.com/planted::Test_param/a", "P"),
            ("example.com/planted::Test_param/b", "P"),
            ("example.com/planted::Test_param", "P"),
            ("example.com/planted::Test_order_dep", "P"),
            ("example.com/planted::Test_regress_at", "P"),
            ("example.com/planted::Test_flaky_p05", "P"),
        ],
    ),
    "jest-retry": Runner(
        meta=("2026-12-01T20:11:07", "", "", ""),
        results=[
            ("planted order_dep::planted order_dep", "P"),
            ("planted param[b]::planted param[b]", "P"),
            ("planted skipped_one::planted skipped_one", "S"),
            (
                "planted always_fail::planted always_fail",
                "F",
                "Error: expect(received).toEqual(expected) // deep equality",
            ),
            ("planted flaky_p30::planted flaky_p30", "P"),
            ("planted stable_pass::planted stable_pass", "P"),
            ("planted regress_at::planted regress_at", "P"),
            ("planted param[a]::planted param[a]", "P"),
            ("planted flaky_p05::planted flaky_p05", "P"),
        ],
    ),
    "jest": Runner(
        meta=("2026-12-01T20:10:55", "", "", ""),
        results=[
            ("planted param[b]::planted param[b]", "P"),
            ("planted stable_pass::planted stable_pass", "P"),
            ("planted order_dep::planted order_dep", "P"),
            ("planted param[a]::planted param[a]", "P"),
            ("planted flaky_p30::planted flaky_p30", "P"),
            (
                "planted always_fail::planted always_fail",
                "F",
                "Error: expect(received).toEqual(expected) // deep equality",
            ),
            ("planted flaky_p05::planted flaky_p05", "P"),
            ("planted regress_at::planted regress_at", "P"),
            ("planted skipped_one::planted skipped_one", "S"),
        ],
    ),
    "mocha": Runner(
        meta=("2026-12-01T20:11:39", "", "", ""),
        results=[
            ("stable_pass::planted stable_pass", "P"),
            (
                "always_fail::planted always_fail",
                "F",
                "Expected values to be strictly deep-equal: + actual - expected    [     '1',    "
                " '2', +   '3' -   '4'   ]",
            ),
            ("flaky_p30::planted flaky_p30", "P"),
            ("flaky_p05::planted flaky_p05", "P"),
            ("regress_at::planted regress_at", "P"),
            ("param[a]::planted param[a]", "P"),
            ("param[b]::planted param[b]", "P"),
        ],
    ),
    "nextest": Runner(
        meta=(None, "", "", ""),
        results=[
            ("planted::planted::flaky_p05", "FP", "thread 'flaky_p05' (20643) panicked at tests/planted.rs:60:5"),
            ("planted::planted::flaky_p30", "P"),
            ("planted::planted::always_fail", "FFF", "thread 'always_fail' (20644) panicked at tests/planted.rs:47:5"),
            ("planted::planted::param::a", "P"),
            ("planted::planted::param::b", "FP", "thread 'param::b' (20655) panicked at tests/planted.rs:90:9"),
            ("planted::planted::stable_pass", "P"),
            ("planted::planted::regress_at", "FFF", "thread 'regress_at' (20660) panicked at tests/planted.rs:68:5"),
        ],
    ),
    "playwright-include-retries": Runner(
        meta=("2026-12-01T20:09:14.277Z", "", "", ""),
        results=[
            ("planted.spec.js::planted › stable_pass", "P"),
            ("planted.spec.js::planted › always_fail", "FFF", "expect(received).toEqual(expected) // deep equality"),
            (
                "planted.spec.js::planted › flaky_p30",
                "EP",
                "upstream did not answer within 2.0s (planted flake, p=0.30)",
            ),
            ("planted.spec.js::planted › flaky_p05", "P"),
            ("planted.spec.js::planted › regress_at", "FFF", "expect(received).toBe(expected) // Object.is equality"),
            ("planted.spec.js::planted › skipped_one", "S"),
            ("planted.spec.js::planted › param[a]", "P"),
            ("planted.spec.js::planted › param[b]", "FP", "expect(received).toBe(expected) // Object.is equality"),
        ],
    ),
    "playwright": Runner(
        meta=("2026-12-01T20:08:08.111Z", "", "", ""),
        results=[
            ("planted.spec.js::planted › stable_pass", "P"),
            ("planted.spec.js::planted › always_fail", "FFF", "expect(received).toEqual(expected) // deep equality"),
            # flaky_p30 passed after a retry: Playwright leaves only a <system-out> with the failed
            # attempt's attachment link, not read as an attempt (truth.json does not count it either).
            ("planted.spec.js::planted › flaky_p30", "P"),
            ("planted.spec.js::planted › flaky_p05", "P"),
            ("planted.spec.js::planted › regress_at", "FFF", "expect(received).toBe(expected) // Object.is equality"),
            ("planted.spec.js::planted › skipped_one", "S"),
            ("planted.spec.js::planted › param[a]", "P"),
            ("planted.spec.js::planted › param[b]", "P"),
        ],
    ),
    "pytest-rerunfailures": Runner(
        meta=("2026-12-01T20:10:51.923211+00:00", "", "", ""),
        results=[
            ("tests.test_planted::test_flaky_p05", "FP"),
            ("tests.test_planted::test_order_dep", "P"),
            ("tests.test_planted::test_regress_at", "P"),
            ("tests.test_planted::test_flaky_p30", "FP"),
            ("tests.test_planted::test_skipped_one", "S"),
            ("tests.test_planted::test_param[a]", "P"),
            (
                "tests.test_planted::test_always_fail",
                "FFF",
                "AssertionError: assert ['1', '2', '3'] == ['1', '2', '4']",
            ),
            ("tests.test_planted::test_stable_pass", "P"),
            ("tests.test_planted::test_param[b]", "FFP"),
        ],
    ),
    "pytest": Runner(
        meta=("2026-12-01T20:10:42.292554+00:00", "", "", ""),
        results=[
            ("tests.test_planted::test_param[a]", "P"),
            ("tests.test_planted::test_skipped_one", "S"),
            ("tests.test_planted::test_flaky_p05", "P"),
            ("tests.test_planted::test_order_dep", "P"),
            ("tests.test_planted::test_param[b]", "P"),
            ("tests.test_planted::test_flaky_p30", "P"),
            ("tests.test_planted::test_always_fail", "F", "AssertionError: assert ['1', '2', '3'] == ['1', '2', '4']"),
            ("tests.test_planted::test_stable_pass", "P"),
            ("tests.test_planted::test_regress_at", "P"),
        ],
    ),
    "surefire-rerun": Runner(
        meta=(None, "java 17.0.15", "Linux", "amd64"),
        results=[
            ("com.example.planted.PlantedTest::stable_pass", "P"),
            (
                "com.example.planted.PlantedTest::always_fail",
                "FFF",
                "arrays first differed at element [2]; expected:<[4]> but was:<[3]>",
            ),
            ("com.example.planted.PlantedTest::flaky_p05", "FP", "cache entry evicted early (planted flake, p=0.05)"),
            ("com.example.planted.PlantedTest::flaky_p30", "P"),
            ("com.example.planted.PlantedTest::skipped_one", "S"),
            (
                "com.example.planted.PlantedTest::regress_at",
                "FFF",
                "output format (changed at simulated commit 18) expected:<v[1]> but was:<v[2]>",
            ),
            ("com.example.planted.ParamTest::param[a]", "P"),
            ("com.example.planted.ParamTest::param[b]", "FP", "variant b lost a race (planted flake, p=0.25)"),
        ],
    ),
    "surefire": Runner(
        meta=(None, "java 17.0.15", "Linux", "amd64"),
        results=[
            ("com.example.planted.PlantedTest::stable_pass", "P"),
            (
                "com.example.planted.PlantedTest::always_fail",
                "F",
                "arrays first differed at element [2]; expected:<[4]> but was:<[3]>",
            ),
            ("com.example.planted.PlantedTest::flaky_p05", "P"),
            ("com.example.planted.PlantedTest::flaky_p30", "P"),
            ("com.example.planted.PlantedTest::skipped_one", "S"),
            ("com.example.planted.PlantedTest::regress_at", "P"),
            ("com.example.planted.ParamTest::param[a]", "P"),
            ("com.example.planted.ParamTest::param[b]", "P"),
        ],
    ),
    "vitest": Runner(
        meta=("2026-12-01T20:12:03.249Z", "", "", ""),
        results=[
            ("planted.test.js::planted > stable_pass", "P"),
            (
                "planted.test.js::planted > always_fail",
                "FFF",
                "expected [ '1', '2', '3' ] to deeply equal [ '1', '2', '4' ]",
            ),
            ("planted.test.js::planted > flaky_p30", "P"),
            ("planted.test.js::planted > flaky_p05", "P"),
            ("planted.test.js::planted > regress_at", "FFF", "expected 'v2' to be 'v1' // Object.is equality"),
            ("planted.test.js::planted > order_dep", "FFF", "expected 0 to be greater than 0"),
            ("planted.test.js::planted > skipped_one", "S"),
            ("planted.test.js::planted > param[a]", "P"),
            ("planted.test.js::planted > param[b]", "P"),
        ],
    ),
}


def test_a_report_per_runner_is_here() -> None:
    assert {p.stem for p in (FIXTURES / "junit").glob("*.xml")} == set(RUNNERS)


@pytest.mark.parametrize("runner", sorted(RUNNERS))
def test_a_real_report_per_runner(runner: str) -> None:
    with (FIXTURES / "junit" / f"{runner}.xml").open("rb") as stream:
        report = parse(stream)
    expected = RUNNERS[runner]
    assert (report.timestamp, report.runtime, report.os, report.arch) == expected.meta
    assert (report.commit, report.attempt) == (None, None)  # these runners write neither; meta.json does
    got = [(r.id, codes(r), r.message) if r.message else (r.id, codes(r)) for r in report.results]
    assert got == expected.results
    for result in report.results:
        assert all(a.message == "" for a in result.attempts if not a.outcome.is_failure)
        assert result.file is None and result.line is None and result.project is None


# --- the lean form: single passes left as tuples -------------------------------------------------------------


def _every_fixture_report() -> list[bytes]:
    return [path.read_bytes() for path in sorted(FIXTURES.rglob("*.xml"))]


def test_a_lean_read_holds_the_same_results_as_a_full_one() -> None:
    """``parse(lean=True)`` (what ``analyze`` reads with) says what ``parse`` says, for every fixture: the
    single passes as tuples, the rest as the same TestResults."""
    compared = passes = 0
    for data in _every_fixture_report():
        try:
            full = parse(io.BytesIO(data))
        except ReportRefused:
            with pytest.raises(ReportRefused):
                parse(io.BytesIO(data), lean=True)
            continue
        lean = parse(io.BytesIO(data), lean=True)
        assert full.passes == []
        by_id = {r.id: r for r in full.results}
        assert len(lean.passes) + len(lean.results) == len(full.results)
        for test, classname, name, file, line, project, seconds in lean.passes:
            assert by_id[test] == Result(classname, name, (Attempt(P, seconds),), file, line, project)
        for result in lean.results:
            assert by_id[result.id] == result and by_id[result.id].details == result.details
        assert (lean.digest, lean.collisions, lean.commit, lean.size) == (
            full.digest,
            full.collisions,
            full.commit,
            full.size,
        )
        compared += 1
        passes += len(lean.passes)
    assert compared > 100 and passes > 1000  # the fixtures hold every runner's reports, mostly passes

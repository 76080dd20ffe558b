"""Contract: the JUnit dialects of ``../shared/corpus/junit-dialects``, read in place (never copied).

Every XML there is read or refused with a reason, and nothing else is raised. Where
publish-unit-test-result-action keeps its expected parse result beside a file (``*.results.json``) our
reading agrees with it; where it keeps a ``.exception``, we refuse the file too. test-reporter's files
have no expected results: they are read, with the counts the files themselves show.

What ``stats`` in a ``*.results.json`` counts, and what we compare it with:

- ``tests``: distinct tests, keyed by (classname, name); ``tests_succ/skip/fail/error``: each test's
  state. Compared with ``len(report.results)`` and the outcomes of our results. Where a test is repeated
  with different outcomes they take the most severe, we the final attempt (a flaky pass is a pass to us,
  with a failed attempt beside it); no file with a results.json repeats a test with different outcomes,
  which the comparison asserts, so there both notions are one.
- ``runs``: ``<testcase>`` elements. Compared with our attempts, which are the same number in these
  files: none records retries inside one testcase (Surefire's four, several ``<failure>``, ``Retry #N``),
  which they would count as one run and we as several attempts.
- Name collisions: where a file repeats a (classname, name) in one suite and its runner does not write
  retries that way (mocha's ``latex-utensils.xml`` repeats 7 names, 15 elements in all), the action counts
  each name as one test and each element as a run; we leave those tests out of our results and name them
  as collisions (``bot/core/runners.py``). So the action's ``tests`` is our results plus the collided
  names, and its ``runs`` our attempts plus the collided elements; the comparison says so per file.
- ``runs_succ/skip/fail/error`` are not compared: they count result *elements* (``junit.multiresult``:
  4 runs of which 3 skipped, 2 failed and 1 errored, so ``runs_succ`` is -2) and leave ``status="disabled"``
  cases out of ``runs_skip`` (``tst/disabled``: 5 disabled, ``runs_skip`` 0).
- ``suites``: not compared; a report keeps no suites (a test's identity does not include its suite
  unless two suites hold the same name, see bot/core/runners.py).
- ``errors``: a file that could not be parsed; for us a ReportRefused.
- The annotations "N tests found" and "N skipped tests found" list every test as ``classname ‑ name``
  (the name alone when there is no classname); the names of our results must be exactly those.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from pathlib import Path
from typing import Any

import pytest

from bot.core.junit import parse
from bot.core.results import Outcome, Report, ReportRefused
from bot.core.results import TestResult as Result  # a Test* name would be collected by pytest
from tests.conftest import SHARED, shared_path

pytestmark = pytest.mark.shared

DIALECTS = ("corpus", "junit-dialects")
_ROOT = SHARED.joinpath(*DIALECTS)
_ABSENT = ["(../shared absent)"]


def _listed(pattern: str, under: str = "") -> list[str]:
    root = _ROOT / under
    if not root.is_dir():
        return _ABSENT
    return sorted(str(p.relative_to(_ROOT)) for p in root.rglob(pattern))


def _path(rel: str) -> Path:
    return shared_path(*DIALECTS) / rel


def _read(path: Path) -> Report:
    with path.open("rb") as stream:
        return parse(stream)


def _outcomes(report: Report) -> Counter[Outcome]:
    return Counter(r.outcome for r in report.results)


# Files that repeat a name in one suite without writing retries that way: (collided names, their
# <testcase> elements, the collided names of which an element failed). mocha writes no retries; these are
# different ``it`` blocks of one title in one ``describe`` (all passing here).
COLLISIONS = {
    "publish-unit-test-result-action/mocha/latex-utensils.results.json": (7, 15, 0),
}

# Files whose results.json counts something we deliberately do not observe.
DECLARED_ONLY = {
    # No <testcase> at all, only the suite's counters (tests="6" skipped="2" failures="1"): they report
    # those counters as tests; we observe testcases, and a report without any has no results.
    "publish-unit-test-result-action/no-cases-but-tests.results.json",
}


@pytest.mark.parametrize("rel", _listed("*.xml"))
def test_every_file_is_read_or_refused_with_a_reason(rel: str) -> None:
    path = _path(rel)
    expected_refusal = path.with_suffix(".exception").exists()
    try:
        report = _read(path)
    except ReportRefused as exc:
        assert expected_refusal, f"{rel} refused: {exc}"
        assert str(exc).strip()
        return
    assert not expected_refusal, f"{rel} has a .exception beside it but was read"
    ids = [r.id for r in report.results]
    assert len(ids) == len(set(ids)), "ids are unique in a report (the store relies on it)"
    assert all(r.attempts for r in report.results)


def _expected_names(doc: dict[str, Any], kind: str) -> list[str] | None:
    """The tests listed by the "N tests found" (or "N skipped tests found") annotations, if any."""
    title = re.compile(rf"^\d+ {kind}tests? found$")
    lists = [a["raw_details"] for a in doc["annotations"] if title.match(a["title"])]
    return sorted(line for raw in lists for line in raw.split("\n")) if lists else None


def _display(result: Result) -> str:
    return _display_name(result.classname, result.name)


def _display_name(classname: str, name: str) -> str:
    """How publish-unit-test-result-action lists a test; it writes characters beyond the BMP escaped."""
    shown = f"{classname} ‑ {name}" if classname else name
    return "".join(c if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}" for c in shown)


@pytest.mark.parametrize("rel", _listed("*.results.json", "publish-unit-test-result-action"))
def test_counts_agree_with_publish_unit_test_result_action(rel: str) -> None:
    expected_path = _path(rel)
    doc = json.loads(expected_path.read_text(encoding="utf-8"))
    stats = doc["stats"]
    xml = expected_path.with_name(expected_path.name.removesuffix(".results.json") + ".xml")
    if stats["errors"]:
        with pytest.raises(ReportRefused):
            _read(xml)
        return
    report = _read(xml)
    if rel in DECLARED_ONLY:
        assert stats["tests"] > 0 and report.results == []
        return

    for result in report.results:  # the two notions of a test's state coincide here (module docstring)
        assert len({a.outcome for a in result.attempts}) == 1, result.id
    outcomes = _outcomes(report)
    collided = COLLISIONS.get(rel, (0, 0, 0))
    assert (len(report.collisions), sum(c.entries for c in report.collisions)) == collided[:2]
    assert sum(1 for c in report.collisions if c.failed) == collided[2]
    assert len(report.results) + collided[0] == stats["tests"]
    assert outcomes[Outcome.PASSED] + collided[0] - collided[2] == stats["tests_succ"]
    assert outcomes[Outcome.SKIPPED] == stats["tests_skip"]
    assert outcomes[Outcome.FAILED] + collided[2] == stats["tests_fail"]
    assert outcomes[Outcome.ERROR] == stats["tests_error"]
    assert sum(len(r.attempts) for r in report.results) + collided[1] == stats["runs"]

    names = _expected_names(doc, "")
    if names is not None:
        shown = [_display(r) for r in report.results] + [_display_name(c.classname, c.name) for c in report.collisions]
        assert sorted(shown) == names
    skipped = _expected_names(doc, "skipped ")
    if skipped is not None:
        assert sorted(_display(r) for r in report.results if r.outcome is Outcome.SKIPPED) == skipped


# test-reporter's files: (results, passed, failed, error, skipped, attempts), as the files show them,
# and (collided names, their elements, how many of those failed). Where that differs from a file's own
# counters, the comment says why. Surefire and jest-junit never write a retry as a repeated testcase, so
# every repeat there is a name collision: left out of the results, named in the report.
NONE = (0, 0, 0)
TEST_REPORTER: dict[str, tuple[tuple[int, ...], tuple[int, int, int]]] = {
    "empty/java-junit.xml": ((0, 0, 0, 0, 0, 0), NONE),
    "empty/jest-junit-empty-testsuite.xml": ((0, 0, 0, 0, 0, 0), NONE),
    "empty/jest-junit.xml": ((0, 0, 0, 0, 0, 0), NONE),
    "empty/phpunit-empty.xml": ((0, 0, 0, 0, 0, 0), NONE),
    # tests="2" skipped="1" failures="1": one name written twice in one suite, a skip then a failure
    # (TestNG writes a retried attempt as skipped). A skip is not a failed attempt, and Surefire does not
    # write retries as repeats: a collision, whose failure is counted in it.
    "external/java/TEST-org.apache.pulsar.AddMissingPatchVersionTest.xml": ((0, 0, 0, 0, 0, 0), (1, 2, 1)),
    "external/java/empty_failures.xml": ((3, 2, 1, 0, 0, 3), NONE),
    "external/java/junit4-basic.xml": ((6, 5, 1, 0, 0, 6), NONE),
    "external/java/junit4-complete.xml": ((8, 5, 1, 1, 1, 8), NONE),
    # tests="808" counts testcase elements; 39 names repeat in their own suite, 177 elements in all (TestNG
    # data providers write every invocation under the method's name; one is the skip-then-fail above).
    "external/java/pulsar-test-report.xml": ((631, 628, 0, 0, 3, 631), (39, 177, 1)),
    "external/jest/jest-react-component-test-results.xml": ((1, 1, 0, 0, 0, 1), NONE),
    # tests="4239" failures="2". One suite per file: names shared by two files are two tests; the 31
    # names repeated inside one file (128 elements, ``test.each`` titles without a placeholder) collide.
    "external/jest/jest-test-results.xml": ((4111, 4079, 2, 0, 30, 4111), (31, 128, 0)),
    "external/phpunit/junit-basic.xml": ((9, 8, 1, 0, 0, 9), NONE),
    "external/phpunit/phpcheckstyle-phpunit.xml": ((30, 28, 2, 0, 0, 30), NONE),
    "jest-junit-eslint.xml": ((1, 1, 0, 0, 0, 1), NONE),
    "jest-junit.xml": ((6, 1, 4, 0, 1, 6), NONE),
    "junit-with-message.xml": ((1, 0, 1, 0, 0, 1), NONE),
    "nette-tester/BootstrapFormRenderer-report.xml": ((4, 4, 0, 0, 0, 4), NONE),
    # errors="1" in the suite, but the element is a <failure>.
    "nette-tester/tester-v1.7-report.xml": ((65, 61, 1, 0, 3, 65), NONE),
    "phpunit/phpunit-paths.xml": ((6, 0, 6, 0, 0, 6), NONE),
    "phpunit/phpunit.xml": ((12, 10, 2, 0, 0, 12), NONE),
    # tests="15" in the suite, 10 testcase elements.
    "python-xunit-pytest.xml": ((10, 6, 2, 0, 2, 10), NONE),
    "python-xunit-unittest.xml": ((8, 4, 1, 1, 2, 8), NONE),
    "swift-xunit.xml": ((3, 2, 1, 0, 0, 3), NONE),
    # Two suites that failed to run: one <error> each, in a testcase named after the suite.
    "test-errors/jest/jest-test-results.xml": ((2, 0, 0, 2, 0, 2), NONE),
}


def test_every_test_reporter_file_has_expected_counts() -> None:
    shared_path(*DIALECTS)
    assert set(_listed("*.xml", "test-reporter")) == {f"test-reporter/{rel}" for rel in TEST_REPORTER}


@pytest.mark.parametrize("rel", sorted(TEST_REPORTER))
def test_test_reporter_files_are_read(rel: str) -> None:
    report = _read(_path(f"test-reporter/{rel}"))
    outcomes = _outcomes(report)
    got = (
        len(report.results),
        outcomes[Outcome.PASSED],
        outcomes[Outcome.FAILED],
        outcomes[Outcome.ERROR],
        outcomes[Outcome.SKIPPED],
        sum(len(r.attempts) for r in report.results),
    )
    collided = (
        len(report.collisions),
        sum(c.entries for c in report.collisions),
        sum(1 for c in report.collisions if c.failed),
    )
    assert (got, collided) == TEST_REPORTER[rel]


def test_jest_names_shared_by_two_files_are_two_tests() -> None:
    """Both failures of jest-test-results.xml are a test "gets changed files for hg" (no classname) in two
    files; read as one test they would be one failure, and a pass in one file beside a failure in the
    other would read as a flaky pass."""
    report = _read(_path("test-reporter/external/jest/jest-test-results.xml"))
    failed = sorted((r.id, len(r.attempts)) for r in report.results if r.outcome.is_failure)
    assert failed == [
        ("e2e/__tests__/jestChangedFiles.test.ts::gets changed files for hg", 1),
        ("e2e/__tests__/onlyChanged.test.ts::gets changed files for hg", 1),
    ]
    indent = sorted(r.id for r in report.results if r.id.endswith("::indent option::default implicit: 2 spaces"))
    assert indent == [
        "packages/pretty-format/src/__tests__/AsymmetricMatcher.test.ts::indent option::default implicit: 2 spaces",
        "packages/pretty-format/src/__tests__/Immutable.test.ts::indent option::default implicit: 2 spaces",
        "packages/pretty-format/src/__tests__/react.test.tsx::indent option::default implicit: 2 spaces",
    ]

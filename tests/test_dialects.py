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
    """How publish-unit-test-result-action lists a test; it writes characters beyond the BMP escaped."""
    name = f"{result.classname} ‑ {result.name}" if result.classname else result.name
    return "".join(c if ord(c) <= 0xFFFF else f"\\U{ord(c):08x}" for c in name)


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
    assert len(report.results) == stats["tests"]
    assert outcomes[Outcome.PASSED] == stats["tests_succ"]
    assert outcomes[Outcome.SKIPPED] == stats["tests_skip"]
    assert outcomes[Outcome.FAILED] == stats["tests_fail"]
    assert outcomes[Outcome.ERROR] == stats["tests_error"]
    assert sum(len(r.attempts) for r in report.results) == stats["runs"]

    names = _expected_names(doc, "")
    if names is not None:
        assert sorted(_display(r) for r in report.results) == names
    skipped = _expected_names(doc, "skipped ")
    if skipped is not None:
        assert sorted(_display(r) for r in report.results if r.outcome is Outcome.SKIPPED) == skipped


# test-reporter's files: (results, passed, failed, error, skipped, attempts), as the files show them.
# Where that differs from a file's own counters, the comment says why.
TEST_REPORTER = {
    "empty/java-junit.xml": (0, 0, 0, 0, 0, 0),
    "empty/jest-junit-empty-testsuite.xml": (0, 0, 0, 0, 0, 0),
    "empty/jest-junit.xml": (0, 0, 0, 0, 0, 0),
    "empty/phpunit-empty.xml": (0, 0, 0, 0, 0, 0),
    # tests="2" skipped="1" failures="1": one test written twice in one suite, TestNG's retry (the
    # retried attempt is written as skipped), so one result with two attempts.
    "external/java/TEST-org.apache.pulsar.AddMissingPatchVersionTest.xml": (1, 0, 1, 0, 0, 2),
    "external/java/empty_failures.xml": (3, 2, 1, 0, 0, 3),
    "external/java/junit4-basic.xml": (6, 5, 1, 0, 0, 6),
    "external/java/junit4-complete.xml": (8, 5, 1, 1, 1, 8),
    # tests="808" counts testcase elements; 138 of them repeat a test in its own suite (TestNG retries).
    "external/java/pulsar-test-report.xml": (670, 663, 1, 0, 6, 808),
    "external/jest/jest-react-component-test-results.xml": (1, 1, 0, 0, 0, 1),
    # tests="4239" failures="2". One suite per file: names shared by two files are two tests; the 97
    # repeats inside one file are read as attempts of one test.
    "external/jest/jest-test-results.xml": (4142, 4110, 2, 0, 30, 4239),
    "external/phpunit/junit-basic.xml": (9, 8, 1, 0, 0, 9),
    "external/phpunit/phpcheckstyle-phpunit.xml": (30, 28, 2, 0, 0, 30),
    "jest-junit-eslint.xml": (1, 1, 0, 0, 0, 1),
    "jest-junit.xml": (6, 1, 4, 0, 1, 6),
    "junit-with-message.xml": (1, 0, 1, 0, 0, 1),
    "nette-tester/BootstrapFormRenderer-report.xml": (4, 4, 0, 0, 0, 4),
    # errors="1" in the suite, but the element is a <failure>.
    "nette-tester/tester-v1.7-report.xml": (65, 61, 1, 0, 3, 65),
    "phpunit/phpunit-paths.xml": (6, 0, 6, 0, 0, 6),
    "phpunit/phpunit.xml": (12, 10, 2, 0, 0, 12),
    # tests="15" in the suite, 10 testcase elements.
    "python-xunit-pytest.xml": (10, 6, 2, 0, 2, 10),
    "python-xunit-unittest.xml": (8, 4, 1, 1, 2, 8),
    "swift-xunit.xml": (3, 2, 1, 0, 0, 3),
    # Two suites that failed to run: one <error> each, in a testcase named after the suite.
    "test-errors/jest/jest-test-results.xml": (2, 0, 0, 2, 0, 2),
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
    assert got == TEST_REPORTER[rel]


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

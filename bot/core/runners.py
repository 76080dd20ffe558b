"""What each test runner writes that a plain reading of JUnit would get wrong, in one place.

The reader (``bot.core.junit``) collects one ``Entry`` per ``<testcase>``; the rules here turn entries
into results. Retries a runner recorded inside one report become attempts of one result:

- Surefire's four (``flakyFailure``, ``flakyError``, ``rerunFailure``, ``rerunError``), also written by
  Playwright with ``PLAYWRIGHT_JUNIT_INCLUDE_RETRIES``, Gradle with ``mergeReruns`` and cargo-nextest;
- several ``<failure>`` elements in one testcase (vitest ``retry``: one per attempt);
- a Playwright failure whose text holds ``Retry #N`` sections (one per further attempt);
- a testcase repeated in one ``<testsuite>``, but only from the runners that write retries that way
  (gotestsum ``--rerun-fails``, Gradle without ``mergeReruns``, pytest-rerunfailures) and only when every
  entry before the last failed. pytest-rerunfailures writes each rerun as an *empty* testcase before the
  final one, so in a pytest report an empty entry that is not the last is a failed attempt.

What is not a retry:
- any other repeated name (mocha, jest-junit, TestNG data providers, Surefire, an unknown producer, or an
  earlier entry that passed or was skipped): different tests sharing one name. They become a
  ``Collision``, left out of the results and named in the report, because a pass of one beside a failure
  of another would otherwise read as a flaky pass (flakemap's rule: duplicates never become evidence);
- the same classname and name in two differently named suites (jest-junit writes one suite per file and
  its classname is the ``describe`` path, so two files often share one): two tests, each classname
  qualified by its suite's name (``suite::classname``) so their ids differ;
- testcases without a name: each is its own test, named by its position (``(unnamed testcase 2)``);
- ``<failure>`` and ``<error>`` together in one testcase: one attempt that failed and then errored in its
  teardown (pytest writes that), counted as an error.

Which runner wrote a report is told from what it writes: pytest names its suite ``pytest``; gotestsum
writes a ``go.version`` property; Gradle writes one ``<testsuite>`` root per class whose ``<properties>``
element is empty (``JUnitXmlResultWriter``); Playwright gives its ``<testsuites>`` root an ``id``.

Other runner habits: pytest's xunit1 writes 0-based lines; libtest writes its panic in ``<system-out>``
after a failure that has no message; Playwright names its projects in the suite's ``hostname``.

Not seen, because the XML does not show it: jest's and vitest's passes after retries, and Playwright's
without ``includeRetries`` (only attachment links of the failed attempts are left in ``<system-out>``).
"""

from __future__ import annotations

import itertools
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, replace

from bot.core.identity import MAX_NAME, bounded, test_id
from bot.core.results import Attempt, Collision, Outcome, Passed, TestResult, first_line

FINAL = {"failure": Outcome.FAILED, "error": Outcome.ERROR}
FLAKY = {"flakyFailure": Outcome.FAILED, "flakyError": Outcome.ERROR}
RERUN = {"rerunFailure": Outcome.FAILED, "rerunError": Outcome.ERROR}
# the children of a testcase whose text can hold its failure's message
TEXT_OF = frozenset(FINAL) | frozenset(FLAKY) | frozenset(RERUN)

_RETRY_SECTION = re.compile(r"^\s*Retry #\d+ ─", re.MULTILINE)
_RETRY_TAIL = 200  # characters kept between chunks, so a section split across two is still seen


@dataclass(frozen=True, slots=True)
class Dialect:
    """Which runner habits a report shows, learnt while reading it."""

    pytest: bool = False  # a suite named "pytest"
    playwright: bool = False  # a <testsuites> root with an id
    one_suite: bool = True  # every testcase in suites of one name
    go: bool = False  # a "go.version" property (gotestsum)
    gradle: bool = False  # a <testsuite> root with an empty <properties> element

    @property
    def repeats_retries(self) -> bool:
        """Whether this runner writes a retried test as the same testcase again (one entry per attempt)."""
        return self.pytest or self.go or self.gradle


def is_playwright_root(tag: str, attrs: Mapping[str, str]) -> bool:
    return tag == "testsuites" and attrs.get("id") is not None


def is_pytest_suite(attrs: Mapping[str, str]) -> bool:
    return attrs.get("name") == "pytest"


def count_retry_sections(tail: str, content: str) -> tuple[int, str]:
    """Playwright's ``Retry #N`` sections that begin in ``content`` (read after ``tail``), and the tail to
    keep for the next chunk of text."""
    window = tail + content
    found = len(_RETRY_SECTION.findall(window)) - len(_RETRY_SECTION.findall(tail))
    return found, window[-_RETRY_TAIL:]


def output_message(text: str) -> str:
    """The line of a testcase's ``<system-out>`` that stands for a failure without a message: libtest's
    panic line when there is one, else the first line."""
    panic = next((ln for ln in text.splitlines() if "panicked" in ln), "") if "panicked" in text else ""
    return first_line(panic or text)


class Entry:
    """One ``<testcase>`` element while it is read; the lists are made only for the few that need them."""

    __slots__ = (
        "classname",
        "details",
        "earlier",
        "failures",
        "file",
        "final",
        "line",
        "name",
        "playwright_retries",
        "reruns",
        "suite",
        "suite_hostname",
        "system_out",
        "time",
    )

    def __init__(
        self,
        classname: str,
        name: str,
        file: str | None,
        line: int | None,
        time: float,
        suite: str,
        suite_hostname: str,
    ) -> None:
        self.classname = classname
        self.name = name
        self.file = file
        self.line = line
        self.time = time
        self.suite = suite
        self.suite_hostname = suite_hostname
        self.final = Outcome.PASSED
        self.earlier: list[Attempt] | None = None  # flakyFailure / flakyError: before the final outcome
        self.failures: list[Attempt] | None = None  # failure / error: the final outcome, one per attempt
        self.reruns: list[Attempt] | None = None  # rerunFailure / rerunError: after the first failure
        self.playwright_retries = 0
        self.system_out = ""
        self.details = ""  # the text of its first failure-like child (a stack trace), bounded

    @property
    def plain(self) -> bool:
        """Nothing but a pass, a skip or a not-run: one attempt."""
        return self.earlier is None and self.failures is None and self.reruns is None

    def add(self, tag: str, time: float, message: str) -> None:
        """A failure-like child: ``tag`` is one of ``TEXT_OF``."""
        if tag in FLAKY:
            self.earlier = [*(self.earlier or ()), Attempt(FLAKY[tag], time, message)]
        elif tag in RERUN:
            self.reruns = [*(self.reruns or ()), Attempt(RERUN[tag], time, message)]
        else:
            self.failures = [*(self.failures or ()), Attempt(FINAL[tag], self.time, message)]

    def attempts(self) -> list[Attempt]:
        """The attempts this testcase element records, in the order they ran."""
        if self.plain:
            return [Attempt(self.final, self.time)]
        attempts = list(self.earlier or ())
        if self.failures:
            failures = [(f.outcome, f.message) for f in self.failures]
            if len({outcome for outcome, _ in failures}) > 1:
                # <failure> and <error> together: one run that failed, then errored in its teardown.
                failures = [(Outcome.ERROR, failures[0][1])]
            if not failures[0][1] and self.system_out:
                failures[0] = (failures[0][0], self.system_out)
            if not self.reruns:  # the rerun elements, when written, already stand for the "Retry #N" sections
                failures += [failures[0]] * self.playwright_retries
            share = self.time / len(failures)  # the testcase's one time covers every attempt it stands for
            attempts.extend(Attempt(outcome, share, message) for outcome, message in failures)
            attempts.extend(self.reruns or ())
            return attempts
        if self.reruns:
            # A rerun element without a final failure: the test passed after its reruns.
            attempts.extend(self.reruns)
        attempts.append(Attempt(self.final, self.time))
        return attempts


_Name = tuple[str, str, str | None, str | None]  # classname, name, file, project
# A testcase with no child, no status and a usable name, as the reader leaves it (no Entry made): classname,
# name, file, None (its project, told in ``merge``), suite, line, time, suite hostname. It passed, once. The
# first five are its key in ``merge``.
Plain = tuple[str, str, str | None, None, str, int | None, float, str]


_Key = tuple[str, str, str | None, str | None, str]  # classname, name, file, project, suite


def merge(
    entries: Iterable[Entry | Plain], dialect: Dialect, *, lean: bool = False
) -> tuple[list[TestResult], list[Passed], list[Collision]]:
    """One result per test: entries repeated in one suite are the attempts of one test where the runner
    writes retries that way; otherwise they are a name collision, left out of the results. With ``lean``,
    a test that passed at its one attempt is left a ``Passed`` tuple (in the second list)."""
    first: dict[_Key, Entry | Plain] = {}
    repeated: dict[_Key, list[Entry | Plain]] = {}  # the few names written more than once, in order
    playwright = dialect.playwright
    for entry in entries:
        key: _Key
        if isinstance(entry, Entry):
            key = (entry.classname, entry.name, entry.file, None, entry.suite)
            hostname = entry.suite_hostname
        else:
            key = entry[:5]
            hostname = entry[7]
        if playwright and hostname:
            key = (key[0], key[1], key[2], hostname, key[4])
        found = first.setdefault(key, entry)
        if found is not entry:
            repeated.setdefault(key, [found]).append(entry)
    several_suites = set() if dialect.one_suite else _in_several_suites(first)
    results = []
    passed: list[Passed] = []
    collisions = []
    taken: set[str] = set()
    shift = 1 if dialect.pytest else 0  # pytest's xunit1 writes 0-based lines
    passes: dict[float, tuple[Attempt, ...]] = {}  # one pass's attempts, shared: most durations repeat
    for key, last in first.items():
        classname, name, file, project, suite = key
        if not isinstance(last, Entry) and not several_suites and not (repeated and key in repeated):  # most
            line, time = last[5], last[6]
            if line is not None:
                line += shift
            if lean:
                if file is None and project is None and classname and len(classname) + len(name) < MAX_NAME - 2:
                    test = f"{classname}::{name}"  # test_id's most common case, written out: most tests
                else:
                    test = test_id(classname, name, file, project)
                if test not in taken:
                    taken.add(test)
                    passed.append((test, classname, name, file, line, project, time))
                    continue
            else:
                attempts = passes.get(time)
                if attempts is None:
                    attempts = passes[time] = (Attempt(Outcome.PASSED, time),)
                result = TestResult(classname, name, attempts, file, line, project)
                if result.id not in taken:
                    taken.add(result.id)
                    results.append(result)
                    continue
        group = repeated.get(key) or [last]
        read = [one if isinstance(one, Entry) else Entry(*one[:3], *one[5:7], one[4], one[7]) for one in group]
        entry = read[-1]
        if len(read) == 1:
            attempts = (Attempt(entry.final, entry.time),) if entry.plain else tuple(entry.attempts())
        elif is_retry_sequence(read, dialect):
            attempts = tuple(_repeated(read, dialect))
        else:
            failed = sum(1 for one in read if any(a.outcome.is_failure for a in one.attempts()))
            collisions.append(Collision(classname, name, file, project, suite, len(group), failed))
            continue
        line = entry.line
        if line is not None:
            line += shift
        if several_suites and (classname, name, file, project) in several_suites:  # several tests
            classname = bounded("::".join(p for p in (suite, classname) if p), MAX_NAME)
        details = next((one.details for one in read if one.details), "")
        result = TestResult(classname, name, attempts, file, line, project, details)
        if result.id in taken:  # ids must be unique in a report; a contrived one may clash
            for n in itertools.count(2):
                result = replace(result, name=bounded(f"{name} ({n})", MAX_NAME))
                if result.id not in taken:
                    break
        taken.add(result.id)
        results.append(result)
    return results, passed, collisions


def _in_several_suites(groups: Iterable[tuple[str, str, str | None, str | None, str]]) -> set[_Name]:
    """The names that occur in suites of different names: each is several tests, not one."""
    suite_of: dict[_Name, str] = {}
    several: set[_Name] = set()
    for classname, name, file, project, suite in groups:
        if suite_of.setdefault((classname, name, file, project), suite) != suite:
            several.add((classname, name, file, project))
    return several


def is_retry_sequence(group: list[Entry], dialect: Dialect) -> bool:
    """Whether the entries of one name in one suite are one test's attempts: the runner writes retries as
    repeated testcases, and every entry before the last failed (in a pytest report an empty entry is a
    rerun that failed; a skipped one is not)."""
    if not dialect.repeats_retries:
        return False
    for one in group[:-1]:
        attempts = one.attempts()
        if any(a.outcome.is_failure for a in attempts):
            continue
        if dialect.pytest and one.plain and one.final is Outcome.PASSED:
            continue
        return False
    return True


def _repeated(group: list[Entry], dialect: Dialect) -> list[Attempt]:
    """The attempts of a testcase repeated within one suite, in order."""
    merged: list[Attempt] = []
    for index, one in enumerate(group):
        these = one.attempts()
        if dialect.pytest and index < len(group) - 1 and not any(a.outcome.is_failure for a in these):
            these = [Attempt(Outcome.FAILED, one.time)]  # the rerun plugin keeps no message
        merged.extend(these)
    return merged

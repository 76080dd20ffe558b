"""JUnit XML to test results, streamed through defusedxml.

A report is read in chunks by defusedxml's expat reader with DTDs, entities and external references
forbidden, so memory does not grow with the size of the file, only with the number of distinct tests.
Retries a runner recorded inside one report become attempts of one result:

- Surefire's four (``flakyFailure``, ``flakyError``, ``rerunFailure``, ``rerunError``), also written by
  Playwright with ``PLAYWRIGHT_JUNIT_INCLUDE_RETRIES``, Gradle with ``mergeReruns`` and cargo-nextest;
- several ``<failure>`` elements in one testcase (vitest ``retry``: one per attempt);
- a Playwright failure whose text holds ``Retry #N`` sections (one per further attempt);
- a testcase repeated in one ``<testsuite>`` (gotestsum ``--rerun-fails``, Gradle without
  ``mergeReruns``, pytest-rerunfailures). pytest-rerunfailures writes each rerun as an *empty* testcase
  before the final one, so in a pytest report a repeated entry that is not the last is a failed attempt.

What is not a retry:
- the same classname and name in two differently named suites (jest-junit writes one suite per file and
  its classname is the ``describe`` path, so two files often share one): two tests, each classname
  qualified by its suite's name (``suite::classname``) so their ids differ;
- testcases without a name: each is its own test, named by its position (``(unnamed testcase 2)``);
- ``<failure>`` and ``<error>`` together in one testcase: one attempt that failed and then errored in its
  teardown (pytest writes that), counted as an error.

Not seen, because the XML does not show it: jest's and vitest's passes after retries, and Playwright's
without ``includeRetries`` (only attachment links of the failed attempts are left in ``<system-out>``).

A testcase whose ``status`` says it did not run (``disabled``, ``notrun``, ...) is skipped. A time that
covers several attempts (several ``<failure>`` elements, ``Retry #N`` sections) is shared out evenly.
"""

from __future__ import annotations

import gc
import hashlib
import itertools
import re
from collections.abc import Iterable
from dataclasses import dataclass, field, replace
from enum import StrEnum
from pyexpat import ExpatError, errors
from typing import IO, Any, ClassVar, NamedTuple

from defusedxml import DefusedXmlException
from defusedxml.expatreader import create_parser

from bot.identity import MAX_NAME, bounded, family_id, test_id

CHUNK = 1 << 20
MAX_DEPTH = 64
MAX_REPORT_BYTES = 1 << 30
MAX_TESTCASES = 5_000_000
MAX_MESSAGE = 300
MAX_INT = 2**31 - 1  # line and attempt numbers beyond this are nonsense, and overflow an SQL INTEGER
_TEXT_CAP = 4096

_RETRY_SECTION = re.compile(r"^\s*Retry #\d+ ─", re.MULTILINE)


class Outcome(StrEnum):
    PASSED = "passed"
    FAILED = "failed"
    ERROR = "error"
    SKIPPED = "skipped"

    @property
    def is_failure(self) -> bool:
        return self in (Outcome.FAILED, Outcome.ERROR)


class Attempt(NamedTuple):
    outcome: Outcome
    duration: float = 0.0
    message: str = ""


@dataclass(slots=True)
class TestResult:
    """One test in one report: its attempts in order, the last being the final outcome."""

    __test__: ClassVar[bool] = False  # not a pytest test class

    classname: str
    name: str
    attempts: tuple[Attempt, ...]
    file: str | None = None
    line: int | None = None
    project: str | None = None
    id: str = field(init=False, compare=False)

    def __post_init__(self) -> None:
        self.id = test_id(self.classname, self.name, self.file, self.project)

    @property
    def family(self) -> str:
        return family_id(self.classname, self.name, self.file, self.project)

    @property
    def outcome(self) -> Outcome:
        return self.attempts[-1].outcome

    @property
    def message(self) -> str:
        """The first line of the first failure's message, bounded."""
        for attempt in self.attempts:
            if attempt.outcome.is_failure and attempt.message:
                return attempt.message
        return ""


@dataclass(slots=True)
class Report:
    """What one JUnit file says: its results and the run identity written inside it."""

    digest: str
    results: list[TestResult]
    commit: str | None = None
    attempt: int | None = None
    timestamp: str | None = None
    runtime: str = ""
    os: str = ""
    arch: str = ""
    size: int = 0


class ReportRefused(Exception):
    """The file is not a usable JUnit report; the message says why, for a warning."""


def first_line(text: str | None, limit: int = MAX_MESSAGE) -> str:
    """The first non-blank line, stripped and bounded (without splitting the whole text)."""
    if not text:
        return ""
    start, size = 0, len(text)
    while start < size:
        end = text.find("\n", start)
        if end < 0:
            end = size
        line = text[start:end].strip()
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
        start = end + 1
    return ""


class _Entry:
    """One ``<testcase>`` element while it is read; the lists are made only for the few that need them."""

    __slots__ = ("classname", "earlier", "failures", "file", "final", "line", "name", "playwright_retries",
                 "reruns", "suite", "suite_hostname", "system_out", "time")

    def __init__(self, classname: str, name: str, file: str | None, line: int | None, time: float, suite: str,
                 suite_hostname: str) -> None:
        self.classname = classname
        self.name = name
        self.file = file
        self.line = line
        self.time = time
        self.suite = suite
        self.suite_hostname = suite_hostname
        self.final = Outcome.PASSED
        self.earlier: list[Attempt] | None = None
        self.failures: list[Attempt] | None = None
        self.reruns: list[Attempt] | None = None
        self.playwright_retries = 0
        self.system_out = ""


_FINAL = {"failure": Outcome.FAILED, "error": Outcome.ERROR}
_FLAKY = {"flakyFailure": Outcome.FAILED, "flakyError": Outcome.ERROR}
_RERUN = {"rerunFailure": Outcome.FAILED, "rerunError": Outcome.ERROR}
_TEXT_OF = {"failure", "error", "flakyFailure", "flakyError", "rerunFailure", "rerunError"}
_CAPTURED = _TEXT_OF | {"skipped", "system-out"}
_PROPERTY_KEYS = {"commit", "attempt", "go.version", "java.version", "os.name", "os.arch"}
_NOT_RUN = {"disabled", "notrun", "not_run", "skipped", "ignored"}
_DIGITS = re.compile(r"\s*\+?\d{1,10}\s*")


def _float(value: str | None) -> float:
    if not value:
        return 0.0
    try:
        number = float(value)
    except ValueError:
        return 0.0
    return number if number >= 0 and number == number and number != float("inf") else 0.0


def _int(value: str | None) -> int | None:
    """A non-negative decimal integer no larger than MAX_INT, else None."""
    if value is None or not _DIGITS.fullmatch(value):
        return None
    number = int(value)
    return number if number <= MAX_INT else None


def _bounded_name(text: str) -> str:
    return text if len(text) <= MAX_NAME else bounded(text, MAX_NAME)


class _Handler:
    """expat callbacks. Character data is only listened to inside the elements whose text is kept, so
    the whitespace and output between testcases never reaches Python."""

    def __init__(self, parser: Any) -> None:
        self.parser = parser
        self.depth = 0
        self.root: str | None = None
        self.playwright = False
        self.pytest = False
        self.entries: list[_Entry] = []
        self.suites: list[tuple[str, str]] = []  # (name, hostname) of each open <testsuite>
        self.suite: tuple[str, str] = ("", "")  # the innermost open one
        self.suite_names: set[str] = set()
        self.unnamed = 0
        self.entry: _Entry | None = None
        self.child: str | None = None
        self.child_message = ""
        self.child_time = ""
        self.text: list[str] = []
        self.text_len = 0
        self.retry_tail = ""
        self.retries_seen = 0
        self.in_properties = False
        self.props: dict[str, str] = {}
        self.commit: str | None = None
        self.attempt: int | None = None
        self.timestamp: str | None = None

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        if tag == "testcase":
            if self.depth > MAX_DEPTH:
                raise ReportRefused(f"elements nested deeper than {MAX_DEPTH}")
            self._start_case(attrs)
            return
        if self.depth > MAX_DEPTH:
            raise ReportRefused(f"elements nested deeper than {MAX_DEPTH}")
        if self.root is None:
            if tag not in ("testsuites", "testsuite"):
                raise ReportRefused(f"not a JUnit report (root element <{bounded(tag, 40)}>)")
            self.root = tag
            self.playwright = tag == "testsuites" and attrs.get("id") is not None
        entry = self.entry
        if entry is not None:
            if self.child is None and tag in _CAPTURED:
                self.child = tag
                message = self.child_message = attrs.get("message", "")
                self.child_time = attrs.get("time", "")
                self.text = []
                self.text_len = 0
                self.retry_tail = ""
                self.retries_seen = 0
                # Text is read only where it is used: a failure's first line when it has no message,
                # Playwright's "Retry #N" sections, and the output of a failure that has no message
                # (libtest writes its panic there, after the failure).
                if tag == "system-out":
                    wanted = entry.failures is not None and not entry.failures[0].message
                else:
                    wanted = tag in _TEXT_OF and (not message or (self.playwright and tag == "failure"))
                if wanted:
                    self.parser.CharacterDataHandler = self.characters
        elif tag == "testsuite":
            self._start_suite(attrs)
        elif tag == "properties":
            self.in_properties = True
        elif tag == "property" and self.in_properties:
            name = attrs.get("name", "")
            if name in _PROPERTY_KEYS and name not in self.props:
                self.props[name] = bounded(attrs.get("value", ""), 200)

    def _start_suite(self, attrs: dict[str, str]) -> None:
        self.suite = (_bounded_name(attrs.get("name", "")), attrs.get("hostname", ""))
        self.suites.append(self.suite)
        self.suite_names.add(self.suite[0])
        if attrs.get("name") == "pytest":
            self.pytest = True
        if self.commit is None and attrs.get("commit"):
            self.commit = bounded(attrs.get("commit", ""), 100)
        if self.attempt is None:
            self.attempt = _int(attrs.get("attempt"))
        if self.timestamp is None and attrs.get("timestamp"):
            self.timestamp = bounded(attrs.get("timestamp", ""), 40)

    def _start_case(self, attrs: dict[str, str]) -> None:
        if len(self.entries) >= MAX_TESTCASES:
            raise ReportRefused(f"more than {MAX_TESTCASES} testcases")
        get = attrs.get
        classname = get("classname", "")
        if len(classname) > MAX_NAME:
            classname = bounded(classname, MAX_NAME)
        name = get("name", "")
        if not name or name.isspace():
            self.unnamed += 1
            name = f"(unnamed testcase {self.unnamed})"
        elif len(name) > MAX_NAME:
            name = bounded(name, MAX_NAME)
        file = get("file") or None
        if file and len(file) > MAX_NAME:
            file = bounded(file, MAX_NAME)
        line = get("line")
        time = get("time")
        suite, hostname = self.suite
        entry = _Entry(
            classname, name, file, _int(line) if line is not None else None, _float(time) if time else 0.0, suite,
            hostname,
        )
        status = get("status")
        if status and status.strip().lower() in _NOT_RUN:
            entry.final = Outcome.SKIPPED
        self.entry = entry

    def characters(self, content: str) -> None:
        if self.text_len < _TEXT_CAP:
            self.text.append(content[: _TEXT_CAP - self.text_len])
            self.text_len += len(content)
        if self.playwright and self.child == "failure":
            window = self.retry_tail + content
            self.retries_seen += len(_RETRY_SECTION.findall(window))
            self.retries_seen -= len(_RETRY_SECTION.findall(self.retry_tail))
            self.retry_tail = window[-200:]

    def end(self, tag: str) -> None:
        self.depth -= 1
        entry = self.entry
        if entry is not None:
            if tag == "testcase":
                self.entries.append(entry)
                self.entry = None
            elif tag == self.child:
                self.parser.CharacterDataHandler = None
                self._end_child(entry, tag)
                self.child = None
        elif tag == "testsuite" and self.suites:
            self.suites.pop()
            self.suite = self.suites[-1] if self.suites else ("", "")
        elif tag == "properties":
            self.in_properties = False

    def _end_child(self, entry: _Entry, tag: str) -> None:
        text = "".join(self.text)
        if tag == "system-out":
            # only ever used as the message of a failure that has none (libtest writes the panic here)
            panic = next((ln for ln in text.splitlines() if "panicked" in ln), "") if "panicked" in text else ""
            entry.system_out = first_line(panic or text)
            return
        if tag == "skipped":
            if entry.final is Outcome.PASSED:
                entry.final = Outcome.SKIPPED
            return
        message = first_line(self.child_message) or first_line(text)
        time = _float(self.child_time) or entry.time
        if tag in _FLAKY:
            entry.earlier = [*(entry.earlier or ()), Attempt(_FLAKY[tag], time, message)]
        elif tag in _RERUN:
            entry.reruns = [*(entry.reruns or ()), Attempt(_RERUN[tag], time, message)]
        else:
            entry.failures = [*(entry.failures or ()), Attempt(_FINAL[tag], entry.time, message)]
            entry.playwright_retries += self.retries_seen


def _attempts(entry: _Entry) -> list[Attempt]:
    """The attempts one testcase element records, in the order they ran."""
    if entry.earlier is None and entry.failures is None and entry.reruns is None:
        return [Attempt(entry.final, entry.time)]
    attempts = list(entry.earlier or ())
    if entry.failures:
        failures = [(f.outcome, f.message) for f in entry.failures]
        if len({outcome for outcome, _ in failures}) > 1:
            # <failure> and <error> together: one run that failed, then errored in its teardown.
            failures = [(Outcome.ERROR, failures[0][1])]
        if not failures[0][1] and entry.system_out:
            failures[0] = (failures[0][0], entry.system_out)
        if not entry.reruns:  # the rerun elements, when written, already stand for the "Retry #N" sections
            failures += [failures[0]] * entry.playwright_retries
        share = entry.time / len(failures)  # the testcase's one time covers every attempt it stands for
        attempts.extend(Attempt(outcome, share, message) for outcome, message in failures)
        attempts.extend(entry.reruns or ())
        return attempts
    if entry.reruns:
        # A rerun element without a final failure: the test passed after its reruns.
        attempts.extend(entry.reruns)
    attempts.append(Attempt(entry.final, entry.time))
    return attempts


def _merge(entries: Iterable[_Entry], *, pytest: bool, playwright: bool, one_suite: bool) -> list[TestResult]:
    """One result per test: entries repeated in one suite are the attempts of one test."""
    groups: dict[tuple[str, str, str | None, str | None, str], list[_Entry]] = {}
    for entry in entries:
        full = (entry.classname, entry.name, entry.file, (entry.suite_hostname or None) if playwright else None,
                entry.suite)
        group = groups.get(full)
        if group is None:
            groups[full] = [entry]
        else:
            group.append(entry)
    several_suites: set[tuple[str, str, str | None, str | None]] = set()
    if not one_suite:
        suite_of: dict[tuple[str, str, str | None, str | None], str] = {}
        for classname, name, file, project, suite in groups:
            if suite_of.setdefault((classname, name, file, project), suite) != suite:
                several_suites.add((classname, name, file, project))
    results = []
    taken: set[str] = set()
    for (classname, name, file, project, suite), group in groups.items():
        entry = group[-1]
        if len(group) == 1:
            if entry.earlier is None and entry.failures is None and entry.reruns is None:
                attempts: tuple[Attempt, ...] = (Attempt(entry.final, entry.time),)
            else:
                attempts = tuple(_attempts(entry))
        else:
            merged: list[Attempt] = []
            for index, one in enumerate(group):
                these = _attempts(one)
                if pytest and index < len(group) - 1 and not any(a.outcome.is_failure for a in these):
                    these = [Attempt(Outcome.FAILED, one.time)]  # the rerun plugin keeps no message
                merged.extend(these)
            attempts = tuple(merged)
        line = entry.line
        if pytest and line is not None:
            line += 1  # pytest's xunit1 writes 0-based lines
        if several_suites and (classname, name, file, project) in several_suites:  # several tests
            classname = bounded("::".join(p for p in (suite, classname) if p), MAX_NAME)
        result = TestResult(classname, name, attempts, file, line, project)
        if result.id in taken:  # ids must be unique in a report; a contrived one may clash
            for n in itertools.count(2):
                result = replace(result, name=bounded(f"{name} ({n})", MAX_NAME))
                if result.id not in taken:
                    break
        taken.add(result.id)
        results.append(result)
    return results


def _defused_expat() -> Any:
    """defusedxml's expat parser (DTDs, entity declarations and external references refused), driven
    directly: the SAX layer above it would cost more than the parsing itself."""
    reader = create_parser(forbid_dtd=True, forbid_entities=True, forbid_external=True)
    reader.reset()
    parser = reader._parser  # type: ignore[attr-defined]
    parser.buffer_text = True
    parser.buffer_size = 1 << 16
    parser.ProcessingInstructionHandler = None
    parser.CharacterDataHandler = None
    return parser


def parse(stream: IO[bytes]) -> Report:
    """Read one JUnit report from a binary stream; raise ReportRefused when it cannot be used."""
    parser = _defused_expat()
    handler = _Handler(parser)
    parser.StartElementHandler = handler.start
    parser.EndElementHandler = handler.end
    digest = hashlib.sha256()
    size = 0
    collecting = gc.isenabled()
    gc.disable()  # many small objects, none of them cyclic: the collector would only walk them
    try:
        while chunk := stream.read(CHUNK):
            size += len(chunk)
            if size > MAX_REPORT_BYTES:
                raise ReportRefused(f"larger than {MAX_REPORT_BYTES >> 20} MiB")
            digest.update(chunk)
            parser.Parse(chunk, False)
        if not size:
            raise ReportRefused("empty: no XML element")
        parser.Parse(b"", True)
        results = _merge(handler.entries, pytest=handler.pytest, playwright=handler.playwright,
                         one_suite=len(handler.suite_names) <= 1)
    except DefusedXmlException as exc:
        reason = f"refused: {type(exc).__name__} (DTDs, entities and external references are not read)"
        raise ReportRefused(reason) from None
    except ExpatError as exc:
        raise ReportRefused(f"not well-formed XML at line {exc.lineno}: {errors.messages[exc.code]}") from None
    except (ValueError, UnicodeError) as exc:
        raise ReportRefused(f"unreadable XML: {bounded(str(exc), 200)}") from None
    finally:
        if collecting:
            gc.enable()
    if handler.root is None:
        raise ReportRefused("empty: no XML element")
    props = handler.props
    return Report(
        digest=digest.hexdigest(),
        results=results,
        commit=handler.commit or props.get("commit") or None,
        attempt=handler.attempt if handler.attempt is not None else _int(props.get("attempt")),
        timestamp=handler.timestamp,
        runtime=props.get("go.version") or (f"java {props['java.version']}" if "java.version" in props else ""),
        os=props.get("os.name", ""),
        arch=props.get("os.arch", ""),
        size=size,
    )

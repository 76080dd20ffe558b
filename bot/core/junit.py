"""JUnit XML to test results, streamed through defusedxml.

A report is read in chunks by defusedxml's expat reader with DTDs, entities and external references
forbidden, so memory does not grow with the size of the file, only with the number of distinct tests.
The reader collects one entry per ``<testcase>``; what each runner's habits mean (retries inside one
report, repeated testcases, 0-based lines, panics in the output) is decided in ``bot.core.runners``.

A testcase whose ``status`` says it did not run (``disabled``, ``notrun``, ...) is skipped. A time that
covers several attempts (several ``<failure>`` elements, ``Retry #N`` sections) is shared out evenly.
"""

from __future__ import annotations

import hashlib
import re
from pyexpat import XML_PARAM_ENTITY_PARSING_UNLESS_STANDALONE, ExpatError, ParserCreate, errors
from typing import IO, Any

from defusedxml.common import DefusedXmlException, DTDForbidden, EntitiesForbidden, ExternalReferenceForbidden

from bot.core import collector, runners
from bot.core.identity import MAX_NAME, bounded
from bot.core.results import Collision, Outcome, Report, ReportRefused, TestResult, first_line
from bot.core.runners import TEXT_OF, Dialect, Entry

CHUNK = 1 << 20
MAX_DEPTH = 64
MAX_REPORT_BYTES = 1 << 30
MAX_TESTCASES = 5_000_000
MAX_INT = 2**31 - 1  # line and attempt numbers beyond this are nonsense, and overflow an SQL INTEGER
_TEXT_CAP = 4096

_CAPTURED = TEXT_OF | {"skipped", "system-out"}
_PROPERTY_KEYS = {"commit", "attempt", "go.version", "java.version", "os.name", "os.arch"}
_NOT_RUN = {"disabled", "notrun", "not_run", "skipped", "ignored"}
_DIGITS = re.compile(r"\s*\+?\d{1,10}\s*")
_NO_SUITE = ("", "")


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


class _Child:
    """The child of a testcase being read (a failure, a skip, its output), and the text kept of it."""

    __slots__ = ("message", "retries", "retry_tail", "tag", "text", "text_len", "time")

    def __init__(self, tag: str, message: str, time: str) -> None:
        self.tag = tag
        self.message = message
        self.time = time
        self.text: list[str] = []
        self.text_len = 0
        self.retry_tail = ""
        self.retries = 0


class _RunFields:
    """The run identity a report writes about itself: suite attributes, or ``<property>`` entries."""

    __slots__ = ("attempt", "commit", "empty_properties", "in_block", "in_properties", "props", "timestamp")

    def __init__(self) -> None:
        self.commit: str | None = None
        self.attempt: int | None = None
        self.timestamp: str | None = None
        self.in_properties = False
        self.in_block = 0  # <property> elements in the open <properties>
        self.empty_properties = False  # a <properties> element with none (Gradle writes one)
        self.props: dict[str, str] = {}

    def suite(self, attrs: dict[str, str]) -> None:
        if self.commit is None and attrs.get("commit"):
            self.commit = bounded(attrs.get("commit", ""), 100)
        if self.attempt is None:
            self.attempt = _int(attrs.get("attempt"))
        if self.timestamp is None and attrs.get("timestamp"):
            self.timestamp = bounded(attrs.get("timestamp", ""), 40)

    def start_properties(self) -> None:
        self.in_properties = True
        self.in_block = 0

    def end_properties(self) -> None:
        self.in_properties = False
        if not self.in_block:
            self.empty_properties = True

    def property(self, attrs: dict[str, str]) -> None:
        self.in_block += 1
        name = attrs.get("name", "")
        if name in _PROPERTY_KEYS and name not in self.props:
            self.props[name] = bounded(attrs.get("value", ""), 200)

    def report(self, digest: str, results: list[TestResult], collisions: list[Collision], size: int) -> Report:
        props = self.props
        return Report(
            digest=digest,
            results=results,
            collisions=collisions,
            commit=self.commit or props.get("commit") or None,
            attempt=self.attempt if self.attempt is not None else _int(props.get("attempt")),
            timestamp=self.timestamp,
            runtime=props.get("go.version") or (f"java {props['java.version']}" if "java.version" in props else ""),
            os=props.get("os.name", ""),
            arch=props.get("os.arch", ""),
            size=size,
        )


class _Handler:
    """expat callbacks. Character data is only listened to inside the elements whose text is kept, so
    the whitespace and output between testcases never reaches Python."""

    def __init__(self, parser: Any) -> None:
        self.parser: Any = parser
        self.depth = 0
        self.root: str | None = None
        self.playwright = False
        self.pytest = False
        self.entries: list[Entry | runners.Plain] = []
        self.suites: list[tuple[str, str]] = []  # (name, hostname) of each open <testsuite>
        self.suite: tuple[str, str] = _NO_SUITE  # the innermost open one
        self.suite_names: set[str] = set()
        self.unnamed = 0
        self.case: dict[str, str] | None = None  # the attributes of the open <testcase>
        self.times: dict[str, float] = {}  # a time attribute read: most of a report's repeat
        self.entry: Entry | None = None  # the open testcase's Entry, once it needs one
        self.child: _Child | None = None
        self.run = _RunFields()

    def dialect(self) -> Dialect:
        return Dialect(
            pytest=self.pytest,
            playwright=self.playwright,
            one_suite=len(self.suite_names) <= 1,
            go="go.version" in self.run.props,
            gradle=self.root == "testsuite" and self.run.empty_properties,
        )

    def start(self, tag: str, attrs: dict[str, str]) -> None:
        self.depth += 1
        if self.depth > MAX_DEPTH:
            raise ReportRefused(f"elements nested deeper than {MAX_DEPTH}")
        if tag == "testcase":
            if len(self.entries) >= MAX_TESTCASES:
                raise ReportRefused(f"more than {MAX_TESTCASES} testcases")
            # Its attributes are read when it ends: most testcases have no child, and need no Entry.
            self.case = attrs
            self.entry = None
            return
        if self.root is None:
            if tag not in ("testsuites", "testsuite"):
                raise ReportRefused(f"not a JUnit report (root element <{bounded(tag, 40)}>)")
            self.root = tag
            self.playwright = runners.is_playwright_root(tag, attrs)
        if self.case is not None:
            if self.child is None and tag in _CAPTURED:
                self._start_child(self.entry or self._open_entry(), tag, attrs)
        elif tag == "testsuite":
            self._start_suite(attrs)
        elif tag == "properties":
            self.run.start_properties()
        elif tag == "property" and self.run.in_properties:
            self.run.property(attrs)

    def _start_suite(self, attrs: dict[str, str]) -> None:
        self.suite = (_bounded_name(attrs.get("name", "")), attrs.get("hostname", ""))
        self.suites.append(self.suite)
        self.suite_names.add(self.suite[0])
        if runners.is_pytest_suite(attrs):
            self.pytest = True
        self.run.suite(attrs)

    def _open_entry(self) -> Entry:
        """The open testcase as an Entry, made when it turns out to need one (a child, a status, no name)."""
        assert self.case is not None
        get = self.case.get
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
        suite, hostname = self.suite  # the suite cannot change while a testcase is open
        entry = Entry(classname, name, file, _int(line) if line is not None else None, _float(time), suite, hostname)
        status = get("status")
        if status and status.strip().lower() in _NOT_RUN:
            entry.final = Outcome.SKIPPED
        self.entry = entry
        return entry

    def _start_child(self, entry: Entry, tag: str, attrs: dict[str, str]) -> None:
        message = attrs.get("message", "")
        self.child = _Child(tag, message, attrs.get("time", ""))
        # Text is read only where it is used: a failure's text (its first line when it has no message,
        # its details, Playwright's "Retry #N" sections), and the output of a failure that has no message
        # (libtest writes its panic there, after the failure).
        if tag == "system-out":
            wanted = entry.failures is not None and not entry.failures[0].message
        elif tag in TEXT_OF:  # a failure's text: its first line when there is no message, and its details
            wanted = True
        else:
            wanted = False
        if wanted:
            self.parser.CharacterDataHandler = self.characters

    def characters(self, content: str) -> None:
        child = self.child
        assert child is not None
        if child.text_len < _TEXT_CAP:
            child.text.append(content[: _TEXT_CAP - child.text_len])
            child.text_len += len(content)
        if self.playwright and child.tag == "failure":
            found, child.retry_tail = runners.count_retry_sections(child.retry_tail, content)
            child.retries += found

    def _plain(self, case: dict[str, str]) -> runners.Plain | None:
        """A testcase without a child as a tuple, when nothing about it needs an Entry (most of them)."""
        get = case.get
        name = get("name")
        classname = get("classname", "")
        file = get("file") or None
        if (
            not name
            or "status" in case
            or len(name) > MAX_NAME
            or len(classname) > MAX_NAME
            or name.isspace()
            or (file is not None and len(file) > MAX_NAME)
        ):
            return None
        time = get("time", "")
        seconds = self.times.get(time)
        if seconds is None:
            seconds = self.times[time] = _float(time)
        line = get("line")
        suite, hostname = self.suite
        return (classname, name, file, None, suite, _int(line) if line is not None else None, seconds, hostname)

    def end(self, tag: str) -> None:
        self.depth -= 1
        case = self.case
        if case is not None:
            if tag == "testcase":
                self.entries.append(self.entry or self._plain(case) or self._open_entry())
                self.case = self.entry = None
            elif self.child is not None and tag == self.child.tag:
                self.parser.CharacterDataHandler = None
                assert self.entry is not None
                self._end_child(self.entry, self.child)
                self.child = None
        elif tag == "testsuite" and self.suites:
            self.suites.pop()
            self.suite = self.suites[-1] if self.suites else _NO_SUITE
        elif tag == "properties":
            self.run.end_properties()

    def _end_child(self, entry: Entry, child: _Child) -> None:
        text = "".join(child.text)
        if child.tag == "system-out":
            # only ever used as the message of a failure that has none
            entry.system_out = runners.output_message(text)
            return
        if child.tag == "skipped":
            if entry.final is Outcome.PASSED:
                entry.final = Outcome.SKIPPED
            return
        message = first_line(child.message) or first_line(text)
        entry.add(child.tag, _float(child.time) or entry.time, message)
        if not entry.details and text.strip():
            entry.details = text.strip()[:_TEXT_CAP]
        if child.tag in runners.FINAL:
            entry.playwright_retries += child.retries


def _refuse_doctype(name: str, sysid: str | None, pubid: str | None, has_internal_subset: bool) -> None:
    raise DTDForbidden(name, sysid, pubid)


def _refuse_entity(
    name: str,
    is_parameter_entity: bool,
    value: str | None,
    base: str | None,
    sysid: str | None,
    pubid: str | None,
    notation_name: str | None,
) -> None:
    raise EntitiesForbidden(name, value, base, sysid, pubid, notation_name)


def _refuse_unparsed_entity(name: str, base: str | None, sysid: str | None, pubid: str | None, notation: str) -> None:
    raise EntitiesForbidden(name, None, base, sysid, pubid, notation)


def _refuse_external(context: str, base: str | None, sysid: str | None, pubid: str | None) -> int:
    raise ExternalReferenceForbidden(context, base, sysid, pubid)


def _defused_expat() -> Any:
    """An expat parser with defusedxml's refusals: the same four handlers its ``DefusedExpatParser``
    installs (DTDs, entity declarations, unparsed entities, external references), raising its exception
    classes. Driven directly: importing the SAX layer ``defusedxml.expatreader`` builds on (which brings
    ``urllib``, ``http``, ``email`` and ``ssl``) costs more than reading a small report, and its callbacks
    more than the parsing itself. ``tests/test_hostile.py`` checks these refusals against defusedxml's own
    parser, file by file."""
    parser = ParserCreate()
    parser.StartDoctypeDeclHandler = _refuse_doctype
    parser.EntityDeclHandler = _refuse_entity
    parser.UnparsedEntityDeclHandler = _refuse_unparsed_entity
    parser.ExternalEntityRefHandler = _refuse_external
    parser.SetParamEntityParsing(XML_PARAM_ENTITY_PARSING_UNLESS_STANDALONE)
    parser.buffer_text = True
    parser.buffer_size = 1 << 16
    return parser


def parse(stream: IO[bytes], *, lean: bool = False) -> Report:
    """Read one JUnit report from a binary stream; raise ReportRefused when it cannot be used. With ``lean``
    a test that passed at its one attempt is left a tuple in ``Report.passes`` (``bot.core.results.Passed``)
    instead of a TestResult in ``results``."""
    parser = _defused_expat()
    handler = _Handler(parser)
    parser.StartElementHandler = handler.start
    parser.EndElementHandler = handler.end
    digest = hashlib.sha256()
    size = 0
    with collector.paused():  # many small objects, none of them cyclic
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
            results, passes, collisions = runners.merge(handler.entries, handler.dialect(), lean=lean)
        except DefusedXmlException as exc:
            reason = f"refused: {type(exc).__name__} (DTDs, entities and external references are not read)"
            raise ReportRefused(reason) from None
        except ExpatError as exc:
            raise ReportRefused(f"not well-formed XML at line {exc.lineno}: {errors.messages[exc.code]}") from None
        except (ValueError, UnicodeError) as exc:
            raise ReportRefused(f"unreadable XML: {bounded(str(exc), 200)}") from None
        finally:  # the parser holds the handler's methods and the handler the parser: let both go at once
            parser.StartElementHandler = parser.EndElementHandler = parser.CharacterDataHandler = None
            handler.parser = None
    if handler.root is None:
        raise ReportRefused("empty: no XML element")
    report = handler.run.report(digest.hexdigest(), results, collisions, size)
    report.passes = passes
    return report

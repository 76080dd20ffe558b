"""The rules of ``flaketally run`` (``bot.local.run``) as plain functions of reports and argv: when a
report can be used, when a failure may be rerun, which command reruns it, how the rerun's report is tied
to the first run's commit, and what GitHub Actions is told about a flaky pass.

A rerun is refused when the runner retried tests itself (its attempts stand), when more tests failed than
``--max-reruns``, when failing testcases share one name (they cannot be told apart), and when the report's
suites count failures or errors that none of its testcases records (a file that failed to load, an error
outside any test): those are red as they are.

With ``--rerun-scope test`` the failed tests alone are rerun, selected the way their runner takes them:
pytest by node id, jest and vitest by ``--testNamePattern`` with their exact full names, Playwright by
``--grep`` (and ``--project``). The whole command is rerun instead wherever selecting could hide a failure:
an unknown runner, a first run that exited anything but 1 (something besides the tests may have failed),
an option that stops early or checks coverage, or a test whose name cannot be selected exactly.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from io import BytesIO
from pathlib import Path
from pyexpat import ExpatError, ParserCreate
from xml.sax.saxutils import quoteattr

from bot.core.display import display_id, source_location
from bot.core.junit import parse
from bot.core.results import Report, ReportRefused, TestResult
from bot.render.markdown import code, plain

_LAUNCHERS = {"npx", "bunx", "pnpx", "yarn", "pnpm", "npm", "exec", "node"}
_RUNNERS = {"pytest": "pytest", "py.test": "pytest", "jest": "jest", "vitest": "vitest", "playwright": "playwright"}
# options after which a narrowed rerun could pass where the whole command fails: stopping early (tests the
# first run never reached), coverage (a threshold over the whole suite), a runner's own flaky policy
_WIDE_OPTIONS = (
    "--exitfirst",
    "--maxfail",
    "--bail",
    "--max-failures",
    "--cov",
    "--coverage",
    "--stepwise",
    "--sw",
    "--fail-on-flaky",
    "--last-failed",
    "--lf",
    "--only-changed",
    "--onlyChanged",
)
_WIDE_SHORT = {"pytest": "x", "jest": "b"}  # -x, -b (also inside a cluster such as -xq)
_JS_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$/])")
_JS_SCRIPT = re.compile(r"\.(?:[cm]?[jt]sx?)$")
_SNIFF = 1 << 16


class Unusable(Exception):
    """An attempt gave no report that can be judged; the message says why."""


def read_report(path: Path) -> tuple[Report, bytes]:
    """The report at ``path`` and its bytes; raise Unusable when it is missing, empty, malformed or holds
    no testcase."""
    try:
        data = path.read_bytes()
    except FileNotFoundError:
        raise Unusable(f"no report at {path}: the command did not write one there") from None
    except OSError as exc:
        raise Unusable(f"the report at {path} cannot be read: {exc.strerror or exc}") from None
    try:
        report = parse(BytesIO(data))
    except ReportRefused as exc:
        raise Unusable(f"the report at {path} is not a usable JUnit report: {exc}") from None
    if not report.results and not report.collisions:
        raise Unusable(f"the report at {path} holds no testcase")
    return report, data


def not_a_report(path: Path) -> str | None:
    """Why the file at ``path`` must not be deleted before an attempt (a directory, or a file that does not
    look like a JUnit report: a mistyped ``--junit``), or None when there is nothing there or it may go."""
    if not path.exists() and not path.is_symlink():
        return None
    if path.is_dir():
        return f"{path} is a directory, not a report file"
    try:
        with path.open("rb") as stream:
            head = stream.read(_SNIFF)
    except OSError as exc:
        return f"{path} cannot be read ({exc.strerror or exc}): not deleted"
    if head.strip() and b"<testsuite" not in head:
        return f"{path} exists and is not a JUnit report: not deleted (name the report the command writes)"
    return None


def failed_tests(report: Report) -> list[TestResult]:
    """The tests whose final outcome is a failure or an error, in report order."""
    return [r for r in report.results if r.outcome.is_failure]


def shown(result: TestResult) -> str:
    """The test as its runner prints it."""
    return display_id(result.classname, result.name, result.file, result.project)


def plural(n: int, word: str, many: str = "") -> str:
    """``1 test``, ``2 tests``."""
    return f"{n} {word}" if n == 1 else f"{n} {many or word + 's'}"


def names(results: Sequence[TestResult], most: int = 5) -> str:
    """The tests' display ids, comma-separated, the list cut after ``most``."""
    listed = ", ".join(shown(r) for r in results[:most])
    return listed + (f" and {len(results) - most} more" if len(results) > most else "")


def unreported_failures(data: bytes) -> int:
    """How many failures and errors the innermost ``<testsuite>`` elements count beyond the ``<failure>``
    and ``<error>`` elements their testcases hold (a runner that counts a load error, or an error outside any
    test, without writing a testcase for it). Suites without counts count nothing."""
    counted = written = 0
    suites: list[list[int]] = []  # each open testsuite: [its count, whether it holds another suite]
    case_depth = -1
    depth = 0

    def start(tag: str, attrs: dict[str, str]) -> None:
        nonlocal depth, case_depth, written
        depth += 1
        if tag == "testsuite":
            if suites:
                suites[-1][1] = 1
            suites.append([_count(attrs.get("failures")) + _count(attrs.get("errors")), 0])
        elif tag == "testcase" and case_depth < 0:
            case_depth = depth
        elif tag in ("failure", "error") and depth == case_depth + 1:
            written += 1

    def end(tag: str) -> None:
        nonlocal depth, case_depth, counted
        if tag == "testsuite" and suites:
            count, nested = suites.pop()
            counted += 0 if nested else count
        elif tag == "testcase" and depth == case_depth:
            case_depth = -1
        depth -= 1

    parser = ParserCreate()  # the bytes were read by bot.core.junit first, which refuses DTDs and entities
    parser.StartElementHandler = start
    parser.EndElementHandler = end
    try:
        parser.Parse(data, True)
    except ExpatError:
        return 0
    return max(0, counted - written)


def _count(value: str | None) -> int:
    return int(value) if value and value.strip().isdigit() else 0


def why_not_rerun(report: Report, data: bytes, max_reruns: int) -> str | None:
    """Why the failures of this report are not rerun (module docstring), or None when they may be."""
    retried = [r for r in report.results if len(r.attempts) > 1]
    if retried:
        return f"the runner retried tests itself ({names(retried, 3)}): its attempts stand"
    shared = [c for c in report.collisions if c.failed]
    if shared:
        return f"failed testcases share the name {shared[0].test!r}: a rerun cannot tell them apart"
    failed = failed_tests(report)
    if len(failed) > max_reruns:
        return f"{plural(len(failed), 'test')} failed, more than --max-reruns {max_reruns}: a real red"
    missing = unreported_failures(data)
    if missing:
        return f"the report counts {missing} failure(s) or error(s) that none of its testcases records"
    return None


def runner_of(argv: Sequence[str]) -> str | None:
    """The test runner ``argv`` starts (pytest, jest, vitest or playwright), told from the program and the
    module it runs (``python -m pytest``, ``npx jest``, ``playwright test``), or None."""
    base = Path(argv[0]).name
    if base.startswith("python"):
        rest = list(argv[1:])
        while rest and rest[0].startswith("-") and rest[0] != "-m":
            rest.pop(0)
        return "pytest" if rest[:2] == ["-m", "pytest"] else None
    index = 0
    while index < len(argv) - 1:
        word = Path(argv[index]).name
        if word not in _LAUNCHERS and not (index and argv[index].startswith("-")):
            break
        index += 1
    runner = _RUNNERS.get(_JS_SCRIPT.sub("", Path(argv[index]).name))
    if runner == "playwright" and argv[index + 1 : index + 2] != ["test"]:
        return None
    return runner


def rerun_command(
    argv: Sequence[str], failed: Sequence[TestResult], exit_code: int, cwd: Path
) -> tuple[list[str], str | None]:
    """The command that reruns only ``failed``, and None; or the whole command and why it is rerun whole."""
    runner = runner_of(argv)
    if runner is None:
        return list(argv), "not a runner whose tests can be selected (pytest, jest, vitest, playwright test)"
    if exit_code != 1:
        return list(argv), f"the first run exited {exit_code}, not 1: something besides the tests may have failed"
    short = _WIDE_SHORT.get(runner, "")
    for word in argv[1:]:
        if word.startswith(_WIDE_OPTIONS) or (short and re.fullmatch(rf"-[A-Za-z]*{short}[A-Za-z]*", word)):
            return list(argv), f"{word} can hide tests or failures from a narrowed rerun"
    select = {"pytest": _pytest_ids, "jest": _name_pattern, "vitest": _name_pattern, "playwright": _grep}[runner]
    chosen = select(failed, cwd)
    if isinstance(chosen, str):
        return list(argv), chosen
    return [*argv, *chosen], None


def _pytest_ids(failed: Sequence[TestResult], cwd: Path) -> list[str] | str:
    ids = []
    for result in failed:
        node = shown(result)
        file = node.split("::", 1)[0]
        if "::" not in node or not file.endswith(".py") or not (cwd / file).is_file():
            return f"{node} is not a pytest node id of a file here"
        if "::" in result.name or not (result.name.isascii() and result.name.isprintable()):
            return f"{node} cannot be selected exactly by its node id"
        ids.append(node)
    return ids


def _titles(result: TestResult, with_file: bool = False) -> list[str] | str:
    """The describe blocks and title of a jest, vitest or Playwright test, after its file when asked."""
    display = display_id(result.classname, result.name, result.file)
    separator = " › " if " › " in display else " > "
    parts = display.split(separator) if separator in display else [display]
    if len(parts) > 1 and _JS_SCRIPT.search(parts[0]) and not with_file:
        parts = parts[1:]
    if not parts[-1].strip():
        return f"{display} has no name to select it by"
    return parts


def _escape(text: str) -> str:
    return _JS_SPECIAL.sub(r"\\\1", text)


def _name_pattern(failed: Sequence[TestResult], cwd: Path) -> list[str] | str:
    names = []
    for result in failed:
        titles = _titles(result)
        if isinstance(titles, str):
            return titles
        names.append(_escape(" ".join(titles)))
    return [f"--testNamePattern=^(?:{'|'.join(dict.fromkeys(names))})$"]


def _grep(failed: Sequence[TestResult], cwd: Path) -> list[str] | str:
    """Playwright matches ``--grep`` against the project, the file, the describe blocks, the title and the
    tags, joined by spaces: the file and titles, then nothing but tags."""
    titles = []
    for result in failed:
        found = _titles(result, with_file=True)
        if isinstance(found, str):
            return found
        titles.append(_escape(" ".join(found)) + r"(?: @\S+)*$")
    projects = list(dict.fromkeys(r.project for r in failed if r.project))
    chosen = [f"--project={p}" for p in projects] if len(projects) == len({r.project for r in failed}) else []
    return [f"--grep={'|'.join(dict.fromkeys(titles))}", *chosen]


class _Found(Exception):
    def __init__(self, index: int, attrs: dict[str, str]) -> None:
        self.index, self.attrs = index, attrs


def linked(data: bytes, commit: str, attempt: int) -> bytes | None:
    """The report with ``commit`` and ``attempt`` attributes added to its first ``<testsuite>`` (those it
    lacks), so a reader takes it as that attempt of that commit; None when there is no such element to add
    them to as bytes (a report not in an ASCII-compatible encoding)."""
    parser = ParserCreate()

    def start(tag: str, attrs: dict[str, str]) -> None:
        if tag == "testsuite":
            raise _Found(parser.CurrentByteIndex, attrs)

    parser.StartElementHandler = start
    try:
        parser.Parse(data, True)
    except _Found as found:
        index, attrs = found.index, found.attrs
    except ExpatError:
        return None
    else:
        return None
    at = index + len(b"<testsuite")
    if data[index:at] != b"<testsuite" or data[at : at + 1] not in (b" ", b"\t", b"\r", b"\n", b">", b"/"):
        return None
    added = {"commit": commit, "attempt": str(attempt)}
    text = "".join(f" {k}={quoteattr(v)}" for k, v in added.items() if k not in attrs)
    return data[:at] + text.encode("ascii", "xmlcharrefreplace") + data[at:]


def escape_data(text: str) -> str:
    """A workflow command's message as GitHub documents it: ``%``, CR and LF escaped."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def escape_property(text: str) -> str:
    """A workflow command's property value: its message escapes, and ``:`` and ``,``."""
    return escape_data(text).replace(":", "%3A").replace(",", "%2C")


def warning_command(result: TestResult) -> str:
    """One ``::warning`` workflow command for a flaky pass, at the test's file and line when known."""
    test = shown(result)
    file, line = source_location(result.classname, result.file, result.line, result.details)
    if file is None and "::" in test and test.split("::", 1)[0].endswith(".py"):
        file = test.split("::", 1)[0]
    properties = [f"file={escape_property(file)}"] if file else []
    properties += [f"line={line}"] if file and line else []
    properties.append(f"title={escape_property(f'Flaky test: {test}')}")
    message = f"{test} failed, then passed when rerun (flaketally run)"
    if result.message:
        message += f": {result.message}"
    return f"::warning {','.join(properties)}::{escape_data(message)}"


def step_summary(flaky: Sequence[TestResult], reports: Sequence[str]) -> str:
    """The Markdown appended to the step summary: a table of the flaky passes and where the reports are."""
    rows = [f"| {code(shown(r))} | {plain(r.message, 200) if r.message else '—'} |" for r in flaky]
    count = plural(len(flaky), "test")
    return "\n".join(
        [
            "### Flaky passes (flaketally run)",
            "",
            f"{count} failed, then passed when rerun: the job stays green. Fix them at the source.",
            "",
            "| Test | First failure |",
            "|---|---|",
            *rows,
            "",
            f"Reports: {', '.join(code(p) for p in reports)}",
            "",
        ]
    )

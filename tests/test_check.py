"""``flaketally check`` as CI runs it: the reports just written against the history in the store.

The history: 20 commits, one report each (commit and attempt in ``<properties>``, a start time on the
suite). ``test_a`` passes on every one; ``test_b`` failed on the first attempt of c05 and c15 and passed on
their rerun (attempt 2): flaky at a low rate, score 0.123. Each scenario then reads the reports of commit
c21 and asserts the exit code, the lines and, in one case, the GitHub annotations and step summary exactly.
"""

from __future__ import annotations

import ast
import dataclasses
import inspect
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.cli import main
from bot.core.verdicts import HistoryJudgement, TestVerdict
from bot.local import check as check_module
from bot.local.check import NEWLY_FLAKY, WORSE, change, escape_data, escape_property

START = datetime(2026, 3, 2, 9, 0, tzinfo=UTC)
FLAKY_COMMITS = {"c05", "c15"}
A = "tests/test_app.py::test_a"
B = "tests/test_app.py::test_b"


def junit(commit: str, attempt: int, at: int, a: str, b: str) -> str:
    """One report: ``test_a`` (with its file and line) and ``test_b`` (its place only in the trace), each
    passing (``P``) or failing (``F``)."""
    stamp = (START + timedelta(minutes=at)).strftime("%Y-%m-%dT%H:%M:%S")
    a_failure = '<failure message="assert 1 == 2">tests/test_app.py:12: AssertionError</failure>' if a == "F" else ""
    b_failure = '<failure message="timed out">tests/test_app.py:27: TimeoutError</failure>' if b == "F" else ""
    return (
        '<?xml version="1.0" encoding="UTF-8"?>\n'
        f'<testsuite name="app" tests="2" timestamp="{stamp}">\n'
        f'  <properties><property name="commit" value="{commit}"/><property name="attempt" value="{attempt}"/>'
        "</properties>\n"
        f'  <testcase classname="tests.test_app" name="test_a" file="tests/test_app.py" line="10" time="0.1">'
        f"{a_failure}</testcase>\n"
        f'  <testcase classname="tests.test_app" name="test_b" time="0.2">{b_failure}</testcase>\n'
        "</testsuite>\n"
    )


def write_history(folder: Path) -> Path:
    """The 20 commits of the module docstring, one file per attempt."""
    at = 0
    for n in range(1, 21):
        commit = f"c{n:02d}"
        attempts = ["F", "P"] if commit in FLAKY_COMMITS else ["P"]
        for attempt, b in enumerate(attempts, 1):
            at += 1
            (folder / f"{commit}-{attempt}.xml").write_text(junit(commit, attempt, at, "P", b), encoding="utf-8")
    return folder


def write_c21(folder: Path, a: str, b: str) -> Path:
    """Commit c21's reports: attempt i has ``a[i]`` for test_a and ``b[i]`` for test_b."""
    folder.mkdir()
    for attempt, (outcome_a, outcome_b) in enumerate(zip(a, b, strict=True), 1):
        text = junit("c21", attempt, 100 + attempt, outcome_a, outcome_b)
        (folder / f"c21-{attempt}.xml").write_text(text, encoding="utf-8")
    return folder


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["check", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.fixture
def seeded(tmp_path: Path, capsys: pytest.CaptureFixture[str], store_url: str) -> str:
    """The store with the history in it, read by a first check: test_b is newly flaky there, test_a is not."""
    history = tmp_path / "history"
    history.mkdir()
    code, out, err = run(capsys, str(write_history(history)), "--db", store_url)
    assert code == 1, err
    assert out.splitlines() == [
        f"newly flaky: {B} (default context): not seen before → flaky: passed and failed on the same commit on 2 of "
        "20 commits (c05, c15); failed 2 of 22 runs on 20 commits; score 0.123, lower bound 0.040"
    ]
    assert "22 new of 22 reports" in err
    return store_url


def test_a_stable_test_that_flips_on_one_commit_is_newly_flaky(
    seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, err = run(capsys, str(write_c21(tmp_path / "new", a="FP", b="PP")), "--db", seeded)
    assert code == 1, err
    assert out.splitlines() == [
        f"newly flaky: {A} (default context): stable, score 0.000, lower bound 0.000 → flaky: passed and failed "
        "on the same commit on 1 of 21 commits (c21); failed 1 of 24 runs on 21 commits; score 0.078, lower "
        "bound 0.021"
    ]
    assert "flaketally: 2 new of 2 reports stored in" in err
    assert "flaketally: 1 test newly flaky: 2 tests of 2 reports compared with their history.\n" in err


def test_a_known_flake_that_flakes_much_more_got_worse(
    seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, err = run(capsys, str(write_c21(tmp_path / "new", a="PPPP", b="FPFP")), "--db", seeded)
    assert code == 3, err
    assert out.splitlines() == [
        f"got worse: {B} (default context): flaky, score 0.123 → 0.272, lower bound 0.139 > 0.123; passed and "
        "failed on the same commit on 2 → 3 commits; failed 2 of 22 → 4 of 26 runs"
    ]
    assert "1 known flake got worse: 2 tests of 4 reports compared" in err


@pytest.mark.parametrize(
    ("a", "b", "why"),
    [
        ("P", "P", "both pass"),
        ("PP", "FP", "test_b flakes once more, at its usual rate"),
        ("PPP", "FPP", "test_b fails once, then passes twice"),
    ],
)
def test_nothing_changed_exits_0_and_says_so(
    a: str, b: str, why: str, seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    code, out, err = run(capsys, str(write_c21(tmp_path / "new", a, b)), "--db", seeded)
    assert (code, out) == (0, ""), why
    assert "flaketally: Nothing changed: 2 tests of" in err


def test_a_new_flake_wins_over_a_worse_one_and_both_are_said(
    seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    code, out, err = run(capsys, str(write_c21(tmp_path / "new", a="FPPP", b="FPFP")), "--db", seeded)
    assert code == 1
    assert [line.split(":")[0] for line in out.splitlines()] == [NEWLY_FLAKY, WORSE]
    assert "flaketally: 1 test newly flaky and 1 known flake got worse: 2 tests of 4 reports compared" in err
    assert "flaketally: exit 1 (newly flaky), not 3 (worse): a new flake comes first" in err


def test_checking_the_same_reports_again_says_the_same(
    seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = str(write_c21(tmp_path / "new", a="FP", b="PP"))
    first = run(capsys, new, "--db", seeded)
    second = run(capsys, new, new, "--db", seeded)  # and a path given twice is read once
    assert first[:2] == second[:2]
    assert first[0] == 1
    assert "0 new of 2 reports" in second[2]


GOLDEN_COMMANDS = [
    "::error file=tests/test_app.py,line=10,title=newly flaky%3A tests/test_app.py%3A%3Atest_a::newly flaky: "
    f"{A} (default context): stable, score 0.000, lower bound 0.000 → flaky: passed and failed on the same "
    "commit on 1 of 21 commits (c21); failed 1 of 26 runs on 21 commits; score 0.070, lower bound 0.018",
    "::warning file=tests/test_app.py,line=27,title=got worse%3A tests/test_app.py%3A%3Atest_b::got worse: "
    f"{B} (default context): flaky, score 0.123 → 0.272, lower bound 0.139 > 0.123; passed and failed on the "
    "same commit on 2 → 3 commits; failed 2 of 22 → 4 of 26 runs",
]
GOLDEN_SUMMARY = """\
# earlier step

## Flaketally check

1 test newly flaky and 1 known flake got worse: 2 tests of 4 reports compared with their history.

| Test | Context | Change | Before | After | Evidence |
|---|---|---|---|---|---|
| `tests/test_app.py::test_a` | default context | newly flaky | stable, score 0.000, lower bound 0.000 | \
flaky, score 0.070, lower bound 0.018 | passed and failed on the same commit on 1 of 21 commits \\(c21\\); \
failed 1 of 26 runs on 21 commits; score 0\\.070, lower bound 0\\.018 |
| `tests/test_app.py::test_b` | default context | got worse | flaky, score 0.123, lower bound 0.040 | \
flaky, score 0.272, lower bound 0.139 | passed and failed on the same commit on 3 of 21 commits \\(c05, \
c15, c21\\); failed 4 of 26 runs on 21 commits; score 0\\.272, lower bound 0\\.139 |
"""


def test_github_actions_annotations_and_step_summary_exactly(
    seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    summary.write_text("# earlier step\n\n", encoding="utf-8")  # appended to, never replaced
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = run(capsys, str(write_c21(tmp_path / "new", a="FPPP", b="FPFP")), "--db", seeded)
    assert code == 1
    lines = out.splitlines()
    assert lines[2:] == GOLDEN_COMMANDS
    assert lines[:2] == [command.split("::", 2)[2] for command in GOLDEN_COMMANDS]  # the plain lines first
    assert summary.read_text(encoding="utf-8") == GOLDEN_SUMMARY


def test_nothing_changed_in_github_actions_is_a_summary_without_a_table(
    seeded: str, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    summary = tmp_path / "summary.md"
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, _ = run(capsys, str(write_c21(tmp_path / "new", a="P", b="P")), "--db", seeded)
    assert (code, out) == (0, "")
    assert summary.read_text(encoding="utf-8") == (
        "## Flaketally check\n\nNothing changed: 2 tests of 1 report compared with their history.\n"
    )


def test_workflow_command_escaping() -> None:
    assert escape_data("50%\r\ndone: a, b") == "50%25%0D%0Adone: a, b"
    assert escape_property("50%\r\ndone: a, b") == "50%25%0D%0Adone%3A a%2C b"


def _flaky(score: float, lower_bound: float) -> HistoryJudgement:
    return HistoryJudgement(TestVerdict.FLAKY, score, lower_bound, 20, 20, 2, 10, ("c1",), None, "")


def test_the_rules_at_their_edges() -> None:
    stable = dataclasses.replace(_flaky(0.0, 0.0), verdict=TestVerdict.STABLE)
    broken = dataclasses.replace(_flaky(0.0, 0.0), verdict=TestVerdict.BROKEN)
    assert change(None, _flaky(0.2, 0.1)) == NEWLY_FLAKY
    assert change(stable, _flaky(0.2, 0.1)) == NEWLY_FLAKY
    assert change(broken, _flaky(0.2, 0.1)) == NEWLY_FLAKY
    assert change(_flaky(0.2, 0.1), stable) is None  # recovered: not this gate's business
    assert change(None, broken) is None
    assert change(_flaky(0.1, 0.05), _flaky(0.3, 0.1)) is None  # the bound only reaches the old score
    assert change(_flaky(0.1, 0.05), _flaky(0.3, 0.1001)) == WORSE


def test_a_missing_path_is_exit_4_in_one_line_and_stores_nothing(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    new = write_c21(tmp_path / "new", a="P", b="P")
    db = tmp_path / "s.db"
    code, out, err = run(capsys, str(new), str(tmp_path / "gone.xml"), "--db", str(db))
    assert (code, out, err) == (4, "", f"flaketally: no such file or directory: {tmp_path / 'gone.xml'}\n")
    assert not db.exists()


def test_no_report_in_the_paths_is_exit_4(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    empty = tmp_path / "empty"
    empty.mkdir()
    assert run(capsys, str(empty), "--db", str(tmp_path / "s.db")) == (
        4,
        "",
        "flaketally: no *.xml report in the paths given\n",
    )
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuite>", encoding="utf-8")
    code, out, err = run(capsys, str(broken), "--db", str(tmp_path / "s.db"))
    assert (code, out, len(err.splitlines())) == (4, "", 1)
    assert err.startswith(f"flaketally: no usable report among the paths given (1 refused; {broken}: not well-formed")


def test_an_unusable_store_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    new = str(write_c21(tmp_path / "new", a="P", b="P"))
    code, out, err = run(capsys, new, "--db", str(tmp_path / "no" / "such" / "s.db"))
    assert (code, out) == (2, "")
    assert err == f"flaketally: the folder of --db {tmp_path / 'no' / 'such' / 's.db'} does not exist\n"
    code, out, err = run(capsys, new, "--db", "postgresql://flaketally@127.0.0.1:1/none")
    assert (code, out) == (2, "")
    assert err.startswith("flaketally: cannot reach the store at")


def test_the_module_stays_small() -> None:
    source = inspect.getsource(check_module)
    assert len(source.splitlines()) <= 450
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            assert node.end_lineno - node.lineno + 1 <= 80, node.name

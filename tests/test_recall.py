"""The memory of local runs (``bot.local.recall``): the working tree's fingerprint, the notes after a run,
what is kept and for how long, and ``flaketally memory``. Every test works in a git repository made in
``tmp_path``; git's global and system configuration and any ``GIT_*`` variables of the outer environment
are kept out, so the project's own repository is never read or written."""

from __future__ import annotations

import argparse
import os
import sqlite3
import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from bot.cli import main
from bot.cli_parser import parser
from bot.core.results import Attempt, Outcome, TestResult
from bot.local import recall
from bot.local.fingerprint import MAX_DIFF, common_dir
from bot.local.recall import CLEAN_RUNS, MAX_RUNS, STORE, fingerprint, flaky_tests, in_ci, memory_command, remember

NOW = datetime(2026, 12, 1, 9, 0, tzinfo=UTC)
FLIP = "tests/test_x.py::test_flip"
STEADY = "tests/test_x.py::test_steady"
P, F = Outcome.PASSED, Outcome.FAILED
OUTER_GIT = ("GIT_DIR", "GIT_WORK_TREE", "GIT_INDEX_FILE", "GIT_COMMON_DIR", "GIT_OBJECT_DIRECTORY", "GIT_NAMESPACE")


def git(repo: Path, *args: str) -> str:
    done = subprocess.run(["git", *args], cwd=repo, capture_output=True, text=True, check=True, timeout=30)
    return done.stdout


def isolated_git(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    """Memory on (not CI), and git kept inside ``tmp_path``: no outer repository, configuration or identity."""
    for name in (*OUTER_GIT, "CI", "GITHUB_ACTIONS"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("GIT_CONFIG_GLOBAL", os.devnull)
    monkeypatch.setenv("GIT_CONFIG_NOSYSTEM", "1")
    monkeypatch.setenv("GIT_CEILING_DIRECTORIES", str(tmp_path))
    for role in ("AUTHOR", "COMMITTER"):
        monkeypatch.setenv(f"GIT_{role}_NAME", "Tess Ter")
        monkeypatch.setenv(f"GIT_{role}_EMAIL", "tess@example.com")


@pytest.fixture
def repo(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    """A repository with one commit, memory on (not CI), and git kept inside ``tmp_path``."""
    isolated_git(monkeypatch, tmp_path)
    path = tmp_path / "repo"
    (path / "tests").mkdir(parents=True)
    (path / "tests" / "test_x.py").write_text("def test_flip():\n    pass\n", encoding="utf-8")
    (path / ".gitignore").write_text("*.log\n", encoding="utf-8")
    git(tmp_path, "init", "-q", str(path))
    git(path, "add", ".")
    git(path, "commit", "-q", "-m", "first")
    common = common_dir(path)
    assert common is not None and common.is_relative_to(tmp_path)
    return path


def result(name: str, *outcomes: Outcome) -> TestResult:
    return TestResult("tests.test_x", name, tuple(Attempt(o) for o in outcomes), file="tests/test_x.py")


FLIP_ID, STEADY_ID = result("test_flip", P).id, result("test_steady", P).id


def run(repo: Path, minutes: float, *results: TestResult, tree: str | None = None) -> list[str]:
    """One local run, ``minutes`` after ``NOW``."""
    return remember(results, repo, now=NOW + timedelta(minutes=minutes), tree=tree)


def stored(repo: Path) -> list[tuple[str, int]]:
    """The runs in the store, oldest first: each test's id and whether it failed."""
    common = common_dir(repo)
    assert common is not None
    with sqlite3.connect(common / STORE) as connection:
        return list(connection.execute("SELECT test, failed FROM runs ORDER BY at, seq"))


def note(shown: str, failures: int, runs: int, both: str = "once") -> str:
    return (
        f"{shown} failed {failures} of {runs} runs in the last 7 days and both passed and failed on the same code "
        f"{both}: it may be flaky rather than broken by this change; run it again before you change code for it"
    )


def command(*argv: str) -> argparse.Namespace:
    return parser("flaketally").parse_args(["memory", *argv])


# --- the notes -------------------------------------------------------------------------------------


def test_a_failure_on_code_that_both_passed_and_failed_gets_the_note(repo: Path) -> None:
    assert run(repo, 0, result("test_flip", F)) == []
    assert run(repo, 1, result("test_flip", P)) == []  # flaky now, but it passed: nothing to say
    assert run(repo, 2, result("test_flip", F)) == [note(FLIP, 2, 3)]
    assert run(repo, 3, result("test_flip", F)) == [note(FLIP, 3, 4)]


def test_a_pass_before_any_failure_is_not_kept(repo: Path) -> None:
    assert run(repo, 0, result("test_flip", P), result("test_steady", P)) == []
    assert stored(repo) == []
    assert run(repo, 1, result("test_flip", F)) == []  # the earlier pass was not kept
    assert stored(repo) == [(FLIP_ID, 1)]


def test_a_runners_retry_is_a_run_of_its_own(repo: Path) -> None:
    assert run(repo, 0, result("test_flip", F, P)) == []
    assert run(repo, 1, result("test_flip", F)) == [note(FLIP, 2, 3)]


def test_a_pass_and_a_failure_on_different_code_are_no_flakiness(repo: Path) -> None:
    source = repo / "tests" / "test_x.py"
    first = fingerprint(repo)
    assert run(repo, 0, result("test_flip", F)) == []
    source.write_text("def test_flip():\n    pass  # fixed\n", encoding="utf-8")
    fixed = fingerprint(repo)
    assert fixed is not None and fixed != first
    assert run(repo, 1, result("test_flip", P)) == []
    source.write_text("def test_flip():\n    assert False\n", encoding="utf-8")
    assert fingerprint(repo) not in (None, first, fixed)
    assert run(repo, 2, result("test_flip", F)) == []  # a failure after a change: broken, not flaky
    git(repo, "add", "tests/test_x.py")  # the index does not count: the tree's diff against HEAD does
    source.write_text("def test_flip():\n    pass  # fixed\n", encoding="utf-8")
    assert fingerprint(repo) == fixed  # the same code again, however it got there
    assert run(repo, 3, result("test_flip", F)) == [note(FLIP, 3, 4)]  # it passed and failed on this code
    assert run(repo, 4, result("test_flip", F)) == [note(FLIP, 4, 5)]


def test_staging_a_change_keeps_the_fingerprint(repo: Path) -> None:
    (repo / "tests" / "test_x.py").write_text("def test_flip():\n    assert False\n", encoding="utf-8")
    unstaged = fingerprint(repo)
    git(repo, "add", "tests/test_x.py")
    assert fingerprint(repo) == unstaged is not None


def test_a_new_commit_is_new_code(repo: Path) -> None:
    first = fingerprint(repo)
    git(repo, "commit", "-q", "--allow-empty", "-m", "second")
    assert fingerprint(repo) not in (None, first)


def test_untracked_file_names_count_but_not_their_content_nor_ignored_files(repo: Path) -> None:
    first = fingerprint(repo)
    (repo / "debug.log").write_text("ignored\n", encoding="utf-8")
    assert fingerprint(repo) == first
    (repo / "notes.txt").write_text("one\n", encoding="utf-8")
    named = fingerprint(repo)
    assert named not in (None, first)
    (repo / "notes.txt").write_text("two\n", encoding="utf-8")
    assert fingerprint(repo) == named


def test_a_diff_over_the_cap_has_no_fingerprint_and_nothing_is_stored(repo: Path) -> None:
    big = repo / "data.txt"
    big.write_text("small\n", encoding="utf-8")
    git(repo, "add", "data.txt")
    git(repo, "commit", "-q", "-m", "data")
    assert fingerprint(repo) is not None
    big.write_text(("x" * 79 + "\n") * (MAX_DIFF // 80 + 1), encoding="utf-8")
    assert fingerprint(repo) is None
    assert run(repo, 0, result("test_flip", F)) == []
    assert not (common_dir(repo) or repo).joinpath(STORE).exists()


def test_outside_a_repository_nothing_is_recorded_and_the_command_is_a_usage_error(
    repo: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    plain = tmp_path / "plain"
    plain.mkdir()
    assert fingerprint(plain) is None and common_dir(plain) is None
    assert remember([result("test_flip", F)], plain, now=NOW) == []
    assert memory_command(command("list"), cwd=plain) == 2
    out, err = capsys.readouterr()
    assert out == "" and len(err.splitlines()) == 1 and "not inside a git repository" in err


def test_the_fingerprint_taken_before_the_run_is_the_one_stored(repo: Path) -> None:
    before = fingerprint(repo)
    assert before is not None
    run(repo, 0, result("test_flip", F), tree=before)
    (repo / "junit.xml").write_text("<testsuite/>\n", encoding="utf-8")  # the run wrote its report
    assert fingerprint(repo) != before
    run(repo, 1, result("test_flip", P), tree=before)
    assert run(repo, 2, result("test_flip", F), tree=before) == [note(FLIP, 2, 3)]


def test_worktrees_share_the_memory(repo: Path, tmp_path: Path) -> None:
    other = tmp_path / "other"
    git(repo, "worktree", "add", "-q", "--detach", str(other))
    assert common_dir(other) == common_dir(repo)
    assert fingerprint(other) == fingerprint(repo)
    run(other, 0, result("test_flip", F))
    run(repo, 1, result("test_flip", P))
    assert run(other, 2, result("test_flip", F)) == [note(FLIP, 2, 3)]


@pytest.mark.parametrize("variable", ["CI", "GITHUB_ACTIONS"])
def test_inside_ci_nothing_is_stored(repo: Path, monkeypatch: pytest.MonkeyPatch, variable: str) -> None:
    monkeypatch.setenv(variable, "true")
    for minute, outcome in enumerate((F, P, F)):
        assert run(repo, minute, result("test_flip", outcome)) == []
    assert not (common_dir(repo) or repo).joinpath(STORE).exists()
    assert in_ci({variable: "1"}) and not in_ci({"CI": "false"}) and not in_ci({})


# --- what is kept ----------------------------------------------------------------------------------


def test_at_most_fifty_runs_per_test_are_kept_the_newest(repo: Path) -> None:
    for minute in range(MAX_RUNS + 10):
        outcomes = (result("test_flip", F if minute % 2 == 0 else P), result("test_steady", F))
        run(repo, minute, *outcomes, tree="one tree")  # the tree is given: no git to run 60 times
    runs = stored(repo)
    assert sum(1 for test, _ in runs if test == FLIP_ID) == MAX_RUNS
    assert sum(1 for test, _ in runs if test == STEADY_ID) == MAX_RUNS
    assert runs[-1] == (STEADY_ID, 1) and runs[-2] == (FLIP_ID, 0)


def test_runs_older_than_seven_days_are_gone(repo: Path) -> None:
    run(repo, 0, result("test_flip", F))
    run(repo, 1, result("test_flip", P))
    week = 7 * 24 * 60
    assert run(repo, week + 1, result("test_flip", F)) == []  # the pass and the failure aged out
    assert stored(repo) == [(FLIP_ID, 1)]
    run(repo, 2 * week + 2, result("test_steady", F))
    assert stored(repo) == [(STEADY_ID, 1)]  # a test with no failure left is gone


def test_a_noted_test_is_announced_no_longer_flaky_once_after_clean_runs(repo: Path) -> None:
    run(repo, 0, result("test_flip", F))
    run(repo, 1, result("test_flip", P))
    assert run(repo, 2, result("test_flip", F)) == [note(FLIP, 2, 3)]
    for minute in range(3, 3 + CLEAN_RUNS - 1):
        assert run(repo, minute, result("test_flip", P)) == []
    settled = f"{FLIP} is no longer flaky: it passed the last {CLEAN_RUNS} runs in a row since its last failure"
    assert run(repo, 10, result("test_flip", P)) == [settled]
    assert run(repo, 11, result("test_flip", P)) == []  # said once
    assert flaky_tests(repo, now=NOW + timedelta(minutes=11)) == []


def test_a_noted_test_whose_failures_aged_out_is_announced_once_when_it_passes(repo: Path) -> None:
    run(repo, 0, result("test_flip", F))
    run(repo, 1, result("test_flip", P))
    run(repo, 2, result("test_flip", F))
    run(repo, 3, result("test_flip", P), result("test_steady", P))  # a pass of a test never noted: nothing
    later = 8 * 24 * 60
    settled = f"{FLIP} is no longer flaky: nothing in the last 7 days has it both passing and failing on the same code"
    assert run(repo, later, result("test_flip", P), result("test_steady", P)) == [settled]
    assert run(repo, later + 1, result("test_flip", P)) == []


# --- flaketally memory -----------------------------------------------------------------------------


def test_memory_list_shows_the_most_failing_first(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    for minute, (flip, steady) in enumerate([(F, F), (P, P), (F, F), (P, F)]):
        run(repo, minute, result("test_flip", flip), result("test_steady", steady), result("test_once", F))
    assert memory_command(command(), cwd=repo, now=NOW + timedelta(minutes=5)) == 0
    assert capsys.readouterr().out.splitlines() == [
        f"{STEADY} failed 3 of 4 runs in the last 7 days and both passed and failed on the same code once",
        f"{FLIP} failed 2 of 4 runs in the last 7 days and both passed and failed on the same code once",
    ]  # test_once failed every time: not flaky, not listed
    assert memory_command(command("list"), cwd=repo, now=NOW + timedelta(days=8)) == 0
    assert capsys.readouterr().out == "no test both passed and failed on the same code in the last 7 days\n"


def test_reset_forgets_every_run_or_one_tests_silently(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    for minute, outcome in enumerate((F, P)):
        run(repo, minute, result("test_flip", outcome), result("test_steady", outcome))
    assert main(["memory", "reset", FLIP]) == 0
    assert capsys.readouterr() == ("", "")
    assert [f.shown for f in flaky_tests(repo, now=NOW) or []] == [STEADY]
    assert run(repo, 2, result("test_flip", F), result("test_steady", F)) == [note(STEADY, 2, 3)]
    assert main(["memory", "reset"]) == 0
    assert capsys.readouterr() == ("", "")
    assert stored(repo) == [] and flaky_tests(repo, now=NOW) == []
    assert run(repo, 3, result("test_steady", F)) == []


def test_off_stops_storing_and_noting_and_keeps_the_runs(
    repo: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(repo)
    run(repo, 0, result("test_flip", F))
    run(repo, 1, result("test_flip", P))
    assert main(["memory", "off"]) == 0
    out = capsys.readouterr().out
    assert len(out.splitlines()) == 1 and out.startswith("memory is off")
    assert run(repo, 2, result("test_flip", F)) == []
    assert stored(repo) == [(FLIP_ID, 1), (FLIP_ID, 0)]
    assert not recall.is_on(repo)
    assert main(["memory", "on"]) == 0
    assert capsys.readouterr().out.startswith("memory is on")
    assert run(repo, 3, result("test_flip", F)) == [note(FLIP, 2, 3)]


def test_a_test_is_only_named_with_reset(repo: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert memory_command(command("on", FLIP), cwd=repo) == 2
    assert len(capsys.readouterr().err.splitlines()) == 1


def test_a_failure_on_changed_code_gets_no_note_though_the_test_flaked_before(repo: Path) -> None:
    """issue 13: a change to a tracked file gives a new fingerprint, and the failure there no note."""
    now = datetime(2026, 12, 3, 12, 0, tzinfo=UTC)
    flip = result("test_flip", Outcome.FAILED)
    assert remember([flip], repo, now=now) == []
    assert remember([result("test_flip", Outcome.PASSED)], repo, now=now) == []
    assert remember([flip], repo, now=now) != []  # the same tree: passed and failed there
    (repo / "tests" / "test_x.py").write_text("def test_flip():\n    assert False\n", encoding="utf-8")
    assert remember([flip], repo, now=now) == []  # another tree, where it never passed

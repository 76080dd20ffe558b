"""``flaketally hunt`` on real pytest suites written into tmp_path and run as subprocesses
(``sys.executable -m pytest``). Every outcome is planted by run number, or made exact by barriers between
the parallel copies, so nothing here depends on timing or chance: each wait is bounded, and a barrier that
times out leaves a mark the test fails on rather than a pass by accident."""

from __future__ import annotations

import os
import sys
import textwrap
from collections.abc import Callable
from pathlib import Path

import pytest

from bot.cli import main
from bot.core.junit import parse
from bot.local.hunt import miss_chance, select_tests

# the planted suites read their run number from this option (the hunt puts it in with {run})
CONFTEST = """
import pytest


def pytest_addoption(parser):
    parser.addoption("--hunt-run", type=int, default=0, help="the hunt's run number")


@pytest.fixture
def run(request):
    return request.config.getoption("--hunt-run")
"""
PYTEST = [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", "--hunt-run={run}", "--junit-xml={junit}"]

FAILS_ON = (3, 7, 9, 12, 16, 19)  # 6 of 20: p = 0.3
PLANTED = f"""
FAILS_ON = {set(FAILS_ON)!r}


def test_stable():
    assert True


def test_sometimes(run):
    assert run not in FAILS_ON, f"planted failure on run {{run}}"


def test_always():
    assert False, "planted: fails every run"
"""

# 4 copies at once, 12 runs: the pool takes runs in order, so runs (run - 1) // 4 form a wave that all
# start before any of them goes on (barrier 1), and a later wave starts only when every copy of the one
# before has exited. In a wave exactly one copy makes the lock; it keeps it until every wave-mate has tried
# (barrier 2), so the other three fail. A rerun (run > 12) is alone: it checks so, and takes the lock.
COLLIDING_RUNS, AT_ONCE = 12, 4
COLLIDING = f"""
import os
import time
from pathlib import Path

import pytest

SHARED = Path(__file__).resolve().parent.parent / "shared"
HUNT_RUNS, AT_ONCE, WAIT = {COLLIDING_RUNS}, {AT_ONCE}, 60.0


def mark(name):
    (SHARED / name).touch()


def wait_for(names, what):
    deadline = time.monotonic() + WAIT
    while not all((SHARED / name).exists() for name in names):
        if time.monotonic() > deadline:
            mark("timeout-" + what.replace(" ", "-"))
            pytest.fail("barrier timed out: " + what)
        time.sleep(0.01)


def test_stable():
    assert True


def test_collides(run):
    if run > HUNT_RUNS:
        others = sorted(p.name for p in SHARED.glob("active-*"))
        mark(f"active-{{run}}")
        try:
            assert not others, f"sequential run {{run}} ran beside {{others}}"
            os.mkdir(SHARED / "lock")
            os.rmdir(SHARED / "lock")
        finally:
            (SHARED / f"active-{{run}}").unlink()
        return
    wave = (run - 1) // AT_ONCE
    mates = range(wave * AT_ONCE + 1, min((wave + 1) * AT_ONCE, HUNT_RUNS) + 1)
    mark(f"started-{{run}}")
    wait_for([f"started-{{m}}" for m in mates], f"start of wave {{wave + 1}} in run {{run}}")
    try:
        os.mkdir(SHARED / "lock")
    except FileExistsError:
        mark(f"attempted-{{run}}")
        pytest.fail(f"run {{run}}: the lock is held by a copy running at the same moment")
    try:
        mark(f"attempted-{{run}}")
        wait_for([f"attempted-{{m}}" for m in mates], f"attempts of wave {{wave + 1}} in run {{run}}")
    finally:
        os.rmdir(SHARED / "lock")
"""

Suite = Callable[..., Path]


@pytest.fixture
def suite(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Suite:
    """Writes a pytest suite (``tests/<name>`` for each file, the conftest, an ini file) under ``base`` in
    a working directory of its own; the suite sees no installed plugin and writes no bytecode."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("PYTEST_DISABLE_PLUGIN_AUTOLOAD", "1")
    monkeypatch.setenv("PYTHONDONTWRITEBYTECODE", "1")
    monkeypatch.delenv("PYTEST_ADDOPTS", raising=False)

    def write(files: dict[str, str], base: str = ".") -> Path:
        root = tmp_path / base
        (root / "tests").mkdir(parents=True)
        (root / "pytest.ini").write_text("[pytest]\n")
        (root / "conftest.py").write_text(CONFTEST)
        for name, text in files.items():
            (root / "tests" / name).write_text(textwrap.dedent(text))
        return tmp_path

    return write


def _lines(text: str) -> list[str]:
    return text.splitlines()


def test_twenty_runs_find_the_planted_flake_and_the_broken_test(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    root = suite({"test_planted.py": PLANTED})
    code = main(["hunt", "--runs", "20", "--", *PYTEST, "tests"])
    out = capsys.readouterr().out
    assert code == 1, out
    lines = _lines(out)
    flaky = lines.index("tests/test_planted.py::test_sometimes")
    assert lines[flaky + 1].startswith("  flaky: failed 6 of 20 runs: 3, 7, 9, 12, 16, 19; first failure: ")
    assert "planted failure on run 3" in lines[flaky + 1]
    broken = lines.index("tests/test_planted.py::test_always")
    assert lines[broken + 1].startswith("  broken: failed all 20 runs; first failure: ")
    assert "test_stable" not in out and "left out" not in out
    assert "3 tests over 20 usable runs: 1 flaky, 1 broken, 1 stable (passed every run, not shown)" in lines
    # what 20 runs could not see: the miss chance, the formula's values exactly
    assert "the miss chance (1 − p)^N + p^N, N = 20" in out and "1 − (1 − p)^N − p^N" in out
    for p, shown in ((0.02, "0.6676"), (0.05, "0.3585"), (0.10, "0.1216")):
        assert f"  p = {p:.2f}: missed with probability {(1 - p) ** 20 + p**20:.4f}" in lines
        assert f"  p = {p:.2f}: missed with probability {shown}" in lines
    assert sorted(p.name for p in (root / "reports").iterdir()) == sorted(f"junit-{n}.xml" for n in range(1, 21))


def test_the_miss_chance_is_the_chance_every_run_agrees() -> None:
    assert miss_chance(0.5, 2) == 0.5  # PP or FF of the four equally likely outcomes
    assert miss_chance(0.3, 1) == 1.0  # one run never disagrees with itself
    assert miss_chance(0.1, 20) == pytest.approx(0.9**20 + 0.1**20)


def test_a_collision_between_parallel_copies_is_demoted_to_suspect(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    root = suite({"test_collide.py": COLLIDING})
    shared = root / "shared"
    shared.mkdir()
    code = main(["hunt", "--runs", str(COLLIDING_RUNS), "--parallel", str(AT_ONCE), "--", *PYTEST, "tests"])
    out = capsys.readouterr().out
    marks = sorted(p.name for p in shared.iterdir())
    assert not [m for m in marks if m.startswith("timeout")], marks  # every barrier was passed, none timed out
    assert marks == sorted(f"{kind}-{n}" for kind in ("attempted", "started") for n in range(1, COLLIDING_RUNS + 1))
    assert code == 0, out
    lines = _lines(out)
    suspect = lines.index("tests/test_collide.py::test_collides")
    assert lines[suspect + 1] == (
        "  suspect: failed 9 of 12 parallel runs, passed all 12 sequential runs: likely a collision between "
        "parallel copies (fixed port, path or database), not flakiness"
    )
    assert "2 tests over 12 usable runs: 1 suspect, 1 stable (passed every run, not shown)" in lines
    rerun = next(line for line in lines if line.startswith("sequential rerun"))
    assert rerun.startswith("sequential rerun of the 1 test found flaky: 12 runs, one at a time (13–24), of ")
    assert rerun.endswith(" tests/test_collide.py::test_collides") and " tests " not in rerun
    reports = root / "reports"
    for wave in range(COLLIDING_RUNS // AT_ONCE):  # in each wave one copy took the lock, three failed
        failed = 0
        for run in range(wave * AT_ONCE + 1, (wave + 1) * AT_ONCE + 1):
            with (reports / f"junit-{run}.xml").open("rb") as stream:
                failed += sum(1 for r in parse(stream).results if r.outcome.is_failure)
        assert failed == AT_ONCE - 1
    for run in range(COLLIDING_RUNS + 1, 2 * COLLIDING_RUNS + 1):  # the test alone, selected by node id
        with (reports / f"junit-{run}.xml").open("rb") as stream:
            results = parse(stream).results
        assert [(r.id, r.outcome.value) for r in results] == [("tests.test_collide::test_collides", "passed")]


def test_a_flake_that_reproduces_alone_stays_flaky_rerun_with_the_whole_command(
    suite: Suite, capsys: pytest.CaptureFixture[str]
) -> None:
    """The suite's rootdir is sub/, so its node ids do not resolve from the working directory: the run
    with the test selected has no report, and the whole command runs instead."""
    every_fourth = """
        def test_every_fourth(run):
            assert run % 4 != 0, f"planted failure on run {run}"


        def test_stable():
            assert True
        """
    suite({"test_fourth.py": every_fourth}, base="sub")
    code = main(["hunt", "--runs", "4", "--parallel", "2", "--", *PYTEST, "sub/tests"])
    out = capsys.readouterr().out
    assert code == 1, out
    lines = _lines(out)
    # failing 1 run in 4, 4 sequential runs could miss it: 11 make a 95% chance of seeing it again
    assert (
        "run 5 with the tests selected is not usable (no report at reports/junit-5.xml): the whole command instead"
        in lines
    )
    assert "sequential rerun of the 1 test found flaky: 11 runs, one at a time (5–15), of the whole command" in lines
    flaky = lines.index("tests/test_fourth.py::test_every_fourth")
    assert lines[flaky + 1].startswith(
        "  flaky: failed 1 of 4 parallel runs: 4; failed 2 of 11 sequential runs too: 8, 12; first failure: "
    )


def test_a_run_without_a_usable_report_is_named_and_left_out(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    """Run 2 writes no report (a stale one from before must not pass for it), run 3 a truncated one."""
    wrapper = """
        import subprocess
        import sys

        run, junit = int(sys.argv[1]), sys.argv[2]
        if run == 2:
            print("planted: crashed before writing a report")
            sys.exit(1)
        if run == 3:
            with open(junit, "w") as report:
                report.write("<testsuites><testsuite name='pytest'><testcase")
            sys.exit(0)
        pytest = [sys.executable, "-m", "pytest", "tests", "-p", "no:cacheprovider", "-q", f"--hunt-run={run}"]
        sys.exit(subprocess.call([*pytest, f"--junit-xml={junit}"]))
        """
    root = suite({"test_ok.py": "def test_ok():\n    assert True\n"})
    (root / "wrap.py").write_text(textwrap.dedent(wrapper))
    stale = root / "reports" / "junit-2.xml"
    stale.parent.mkdir()
    stale.write_text("<testsuite name='pytest'><testcase classname='tests.test_ok' name='test_ok'/></testsuite>")
    code = main(["hunt", "--runs", "4", "--", sys.executable, "wrap.py", "{run}", "{junit}"])
    out = capsys.readouterr().out
    assert code == 0, out
    lines = _lines(out)
    assert (
        "left out: run 2 (exited with code 1): no report at reports/junit-2.xml; "
        "its last output: planted: crashed before writing a report"
    ) in lines
    truncated = [
        line for line in lines if line.startswith("left out: run 3 (exited with code 0): reports/junit-3.xml: ")
    ]
    assert len(truncated) == 1 and "not well-formed XML" in truncated[0]
    assert sum(line.startswith("left out") for line in lines) == 2
    assert "1 test over 2 usable runs: 1 stable (passed every run, not shown)" in lines
    assert f"  p = 0.10: missed with probability {miss_chance(0.10, 2):.4f}" in lines  # N is the usable runs
    assert not stale.exists()


def test_no_usable_report_at_all_exits_3(suite: Suite, capsys: pytest.CaptureFixture[str]) -> None:
    suite({})
    assert main(["hunt", "--runs", "2", "--", sys.executable, "-c", "pass"]) == 3
    captured = capsys.readouterr()
    assert "left out: run 1 (exited with code 0): no report at reports/junit-1.xml" in captured.out
    assert captured.err == (
        "flaketally: no run wrote a usable report (CMD has no {junit}: it must write its report to "
        "reports/junit-{run}.xml itself)\n"
    )
    missing = str(Path(os.devnull).parent / "no-such-runner")
    assert main(["hunt", "--runs", "1", "--", missing, "--junit-xml={junit}"]) == 3
    captured = capsys.readouterr()
    assert f"left out: run 1 (could not start): cannot start {missing}: No such file or directory" in captured.out
    assert captured.err == "flaketally: no run wrote a usable report\n"


@pytest.mark.parametrize(
    ("argv", "said"),
    [
        (["--runs", "3"], "hunt needs the test command after its options"),
        (["--runs", "3", "--"], "hunt needs the test command after its options"),
        (["--runs", "0", "--", "pytest"], "--runs must be 1 or more, not 0"),
        (["--runs", "3", "--parallel", "0", "--", "pytest"], "--parallel must be 1 or more, not 0"),
        (["--runs", "3", "--parallel", "2", "--junit", "r.xml", "--", "pytest"], "put {run} in --junit"),
        (["--runs", "3", "--parallel", "2", "--", "pytest", "--junit-xml=r.xml"], "put {junit} or {run} in CMD"),
    ],
)
def test_usage_errors_exit_2_with_one_line_and_run_nothing(
    argv: list[str], said: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.chdir(tmp_path)
    assert main(["hunt", *argv]) == 2
    captured = capsys.readouterr()
    assert captured.out == "" and captured.err.startswith("flaketally: ") and said in captured.err
    assert captured.err.count("\n") == 1
    assert not list(tmp_path.iterdir())  # no report folder: nothing ran


def test_select_tests_replaces_the_test_paths_and_keeps_option_values(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.chdir(tmp_path)
    (tmp_path / "tests" / "slow").mkdir(parents=True)
    ids = ["tests/test_a.py::test_x", "tests/test_a.py::TestB::test_y[1-2]"]
    python = [sys.executable, "-m", "pytest"]
    assert select_tests([*python, "tests", "-p", "no:cacheprovider", "--junit-xml={junit}"], ids) == (
        *python,
        "-p",
        "no:cacheprovider",
        "--junit-xml={junit}",
        *ids,
    )
    assert select_tests(["pytest", "--ignore", "tests/slow", "tests", "-k", "tests", "tests/t.py::t"], ids) == (
        "pytest",
        "--ignore",
        "tests/slow",
        "-k",
        "tests",
        *ids,
    )
    assert select_tests(["pytest", "-q"], ids[:1]) == ("pytest", "-q", ids[0])  # its testpaths: the id instead
    assert select_tests(["go", "test", "./..."], ids) is None  # not pytest: the whole command
    assert select_tests(["pytest", "tests"], ["example.com/pkg.TestX"]) is None  # not a pytest node id


def test_a_local_hunt_is_remembered(
    suite: Suite, tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """Outside CI each run goes into the memory of local runs, on the tree as it was before the runs wrote
    their reports: ``flaketally memory`` then lists the flaky test."""
    from tests.test_recall import git, isolated_git

    root = suite({"test_planted.py": PLANTED})
    isolated_git(monkeypatch, tmp_path)
    git(root, "init", "-q")
    git(root, "add", ".")
    git(root, "commit", "-q", "-m", "planted")
    assert main(["hunt", "--runs", "20", "--", *PYTEST, "tests"]) == 1
    capsys.readouterr()
    assert main(["memory"]) == 0
    listed = capsys.readouterr().out
    assert "tests/test_planted.py::test_sometimes" in listed and "test_stable" not in listed

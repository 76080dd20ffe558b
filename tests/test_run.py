"""``flaketally run``: each rule checked on a real runner driving a small planted suite. Flakiness is
planted deterministically: a test counts its runs in a file and fails on its first run only, so what ran
how often is read back from the counters, never from timing or chance."""

from __future__ import annotations

import ast
import contextlib
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from bot.cli import main
from bot.core.cost import Rates
from bot.core.identity import ExecutionContext, RunIdentity
from bot.core.judge import judge
from bot.core.junit import parse
from bot.core.results import Attempt, Outcome, Report, TestResult
from bot.core.verdicts import CommitVerdict, TestVerdict
from bot.local.memory import MemoryHistory
from bot.local.run import results_of_run
from bot.local.run_rules import escape_data, escape_property, rerun_command, runner_of
from tests.support.runners import NODE_RUNNERS, need, node_bin

ROOT = Path(__file__).resolve().parent.parent
PYTEST = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "--junitxml=junit.xml"]
FLAKY_ID = "tests/test_planted.py::test_flaky"

COUNTER = '''from pathlib import Path


def runs(name):
    """How many times the test ran before this run; the count is kept beside the suite."""
    counter = Path(__file__).parent.parent / f"{name}.count"
    before = int(counter.read_text()) if counter.exists() else 0
    counter.write_text(str(before + 1))
    return before
'''

SUITE = (
    COUNTER
    + """

def test_flaky():
    assert runs("flaky") >= 1, "planted: fails on its first run only"


def test_stable():
    runs("stable")
"""
)

BROKEN = (
    COUNTER
    + """

def test_broken():
    runs("broken")
    assert False, "planted: always fails"


def test_stable():
    runs("stable")
"""
)

# pytest-rerunfailures' way of retrying a failed test once, written out: its first report logged as a rerun
# (pytest's junitxml then writes an empty testcase for it) and the test run again.
RETRYING = """import pytest
from _pytest.runner import runtestprotocol


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_protocol(item, nextitem):
    hook = item.ihook
    hook.pytest_runtest_logstart(nodeid=item.nodeid, location=item.location)
    reports = runtestprotocol(item, nextitem=nextitem, log=False)
    if any(r.failed for r in reports):
        for r in reports:
            if r.failed:
                r.outcome = "rerun"
            hook.pytest_runtest_logreport(report=r)
        item._initrequest()
        reports = runtestprotocol(item, nextitem=nextitem, log=False)
    for r in reports:
        hook.pytest_runtest_logreport(report=r)
    hook.pytest_runtest_logfinish(nodeid=item.nodeid, location=item.location)
    return True
"""


def _plant(tmp_path: Path, suite: str = SUITE, conftest: str = "") -> None:
    (tmp_path / "pytest.ini").write_text("[pytest]\n")  # the planted suite's own root, not this project's
    tests = tmp_path / "tests"
    tests.mkdir(exist_ok=True)
    (tests / "test_planted.py").write_text(suite)
    if conftest:
        (tmp_path / "conftest.py").write_text(conftest)


def _runs(tmp_path: Path, name: str) -> int:
    counter = tmp_path / f"{name}.count"
    return int(counter.read_text()) if counter.exists() else 0


def _flaketally(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], *args: str
) -> tuple[int, str, str]:
    """``flaketally run ARGS`` in the planted suite's folder: its exit code, stdout and stderr."""
    monkeypatch.chdir(tmp_path)
    capfd.readouterr()
    code = main(["run", *args])
    out, err = capfd.readouterr()
    return code, out, err


def _verdict_line(err: str) -> str:
    lines = [line for line in err.splitlines() if line.startswith("flaketally run: exit ")]
    assert len(lines) == 1, err
    return lines[0]


def _read(path: Path) -> Report:
    with path.open("rb") as stream:
        return parse(stream)


def _outcomes(path: Path) -> dict[str, list[str]]:
    return {r.name: [a.outcome.value for a in r.attempts] for r in _read(path).results}


# --- a flaky pass, and what the App and analyze see ---------------------------------------------------


def test_a_test_that_fails_then_passes_cleanly_is_a_flaky_pass(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 0, err
    assert _verdict_line(err).startswith(f"flaketally run: exit 0: 1 flaky pass ({FLAKY_ID})")
    assert f"flaketally run: flaky pass: {FLAKY_ID} failed, then passed on the rerun" in err
    assert (_runs(tmp_path, "flaky"), _runs(tmp_path, "stable")) == (2, 2)  # the whole command, once more
    # the first run's report stays at --junit; the rerun's is kept beside it
    assert _outcomes(tmp_path / "junit.xml") == {"test_flaky": ["failed"], "test_stable": ["passed"]}
    assert _outcomes(tmp_path / "junit.rerun-1.xml") == {"test_flaky": ["passed"], "test_stable": ["passed"]}
    final = results_of_run(_read(tmp_path / "junit.xml"), _read(tmp_path / "junit.rerun-1.xml"))
    assert {r.name: [a.outcome.value for a in r.attempts] for r in final} == {
        "test_flaky": ["failed", "passed"],
        "test_stable": ["passed"],
    }


KEEP_FIRST = """from pathlib import Path


def pytest_unconfigure(config):
    copy = Path("first-run.copy")
    if not copy.exists():
        copy.write_bytes(Path("junit.xml").read_bytes())
"""


def test_analyze_of_the_folder_and_the_app_call_the_flaky_pass_flaky(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, SUITE, KEEP_FIRST)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 0, err
    # the first report stays as the runner wrote it; the rerun's is tied to the commit it is read as
    assert (tmp_path / "junit.xml").read_bytes() == (tmp_path / "first-run.copy").read_bytes()
    assert b' commit="local-' in (tmp_path / "junit.rerun-1.xml").read_bytes()
    assert main(["analyze", str(tmp_path), "--format", "json"]) == 1
    document = json.loads(capfd.readouterr().out)
    tests = {t["display"]: t for t in document["tests"]}
    assert tests[FLAKY_ID]["verdict"] == "flaky"
    (commit,) = tests[FLAKY_ID]["commits"]  # both reports read as one commit
    assert (commit["verdict"], commit["passed"], commit["failed"]) == ("flaky", 1, 1)
    assert tests["tests/test_planted.py::test_stable"]["verdict"] != "flaky"
    # the App: both files of one artifact, read as the workflow run's commit and attempt
    memory = MemoryHistory()
    for path in (tmp_path / "junit.xml", tmp_path / "junit.rerun-1.xml"):
        run = RunIdentity("o/r", "a" * 40, 1, ExecutionContext(job="test"), path.name, run_id=7)
        assert memory.ingest(_read(path), run)
    ids = {r.id for r in _read(tmp_path / "junit.xml").results}
    judged = {h.name: judge(h, CommitVerdict.UNDETERMINED, Rates()) for h in memory.history(ids)}
    assert judged["test_flaky"].judgement.verdict is TestVerdict.FLAKY
    assert judged["test_stable"].judgement.verdict is not TestVerdict.FLAKY


def test_a_test_that_fails_on_the_rerun_too_is_red(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, BROKEN)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 1
    assert _verdict_line(err) == (
        "flaketally run: exit 1: tests/test_planted.py::test_broken failed on the rerun too; the rerun exited 1"
    )
    assert _runs(tmp_path, "broken") == 2
    assert "flaky pass" not in err


TWICE = (
    COUNTER
    + """

def test_flaky():
    assert runs("flaky") >= 2, "planted: fails on its first two runs"
"""
)
# the runner's own retry, switched on for the rerun only (the first run left a counter behind)
RETRYING_ON_RERUN = RETRYING.replace(
    "    hook = item.ihook\n",
    "    if not RERUN:\n        return None\n    hook = item.ihook\n",
).replace("import pytest\n", "from pathlib import Path\n\nimport pytest\n\nRERUN = Path('flaky.count').exists()\n", 1)


def test_a_pass_on_the_rerun_only_after_a_retry_does_not_clear_the_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, TWICE, RETRYING_ON_RERUN)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 1
    assert (
        _verdict_line(err) == f"flaketally run: exit 1: {FLAKY_ID} passed on the rerun only after the runner retried it"
    )
    assert _outcomes(tmp_path / "junit.rerun-1.xml") == {"test_flaky": ["failed", "passed"]}
    assert _runs(tmp_path, "flaky") == 3


# --- never green by accident: no usable report, a crash, a signal --------------------------------------

EMPTY_SUITE = COUNTER + "\n\ndef helper():\n    runs('helper')\n"
TRUNCATE = "from pathlib import Path\n\n\ndef pytest_unconfigure(config):\n    Path('junit.xml').write_text('')\n"
CORRUPT = (
    "from pathlib import Path\n\n\ndef pytest_unconfigure(config):\n"
    "    with Path('junit.xml').open('a') as report:\n        report.write('<testcase')\n"
)
STALE = (
    '<testsuites><testsuite name="pytest" tests="1"><testcase classname="tests.x" name="test_old"/></testsuite>'
    "</testsuites>"
)


@pytest.mark.parametrize(
    ("suite", "conftest", "junit_option", "why"),
    [
        (SUITE, "", False, "no report at junit.xml: the command did not write one there"),
        (SUITE, TRUNCATE, True, "the report at junit.xml is not a usable JUnit report: empty: no XML element"),
        (SUITE, CORRUPT, True, "the report at junit.xml is not a usable JUnit report: not well-formed XML at line"),
        (EMPTY_SUITE, "", True, "the report at junit.xml holds no testcase"),
    ],
    ids=["missing", "empty", "malformed", "no-testcase"],
)
def test_no_usable_report_is_exit_3_and_nothing_is_rerun(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    suite: str,
    conftest: str,
    junit_option: bool,
    why: str,
) -> None:
    _plant(tmp_path, suite, conftest)
    (tmp_path / "junit.xml").write_text(STALE)  # an earlier run's reports: never read as this run's
    (tmp_path / "junit.rerun-1.xml").write_text(STALE)
    command = PYTEST if junit_option else [c for c in PYTEST if not c.startswith("--junitxml")]
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *command)
    assert code == 3
    assert _verdict_line(err).startswith(f"flaketally run: exit 3: {why}")
    assert _verdict_line(err).endswith("; nothing rerun")
    assert _runs(tmp_path, "flaky") == (1 if suite is SUITE else 0)
    assert not (tmp_path / "junit.rerun-1.xml").exists()
    if not junit_option:
        assert not (tmp_path / "junit.xml").exists()  # deleted before the attempt


def test_a_non_zero_exit_with_no_failed_test_is_a_crash(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    # every test passes and the report is written; then a step after the tests fails
    after = "import os\n\n\ndef pytest_unconfigure(config):\n    os._exit(4)\n"
    _plant(tmp_path, COUNTER + "\n\ndef test_stable():\n    runs('stable')\n", after)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 3
    assert _verdict_line(err) == (
        "flaketally run: exit 3: the command exited 4 but no test in junit.xml failed: a crash, or a step "
        "outside the tests; nothing rerun"
    )
    assert _runs(tmp_path, "stable") == 1


def test_a_runner_killed_by_a_signal_is_exit_3_and_not_rerun(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    killed = COUNTER + (
        "\n\nimport os\nimport signal\n\n\ndef test_flaky():\n"
        "    if runs('flaky') == 0:\n        os.kill(os.getpid(), signal.SIGKILL)\n"
    )
    _plant(tmp_path, killed)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 3
    assert (
        _verdict_line(err)
        == f"flaketally run: exit 3: the command ({sys.executable}) was killed by SIGKILL; nothing rerun"
    )
    assert _runs(tmp_path, "flaky") == 1  # it would pass if it ran again


SLOW = (
    COUNTER
    + """

import os
import signal
import time


def test_slow():
    def stop(number, frame):
        raise AssertionError(f"planted: stopped by {signal.Signals(number).name}")

    signal.signal(signal.SIGTERM, stop)
    signal.signal(signal.SIGINT, stop)
    runs("slow")
    (Path(__file__).parent.parent / "started").write_text(str(os.getpid()))
    for _ in range(1200):  # two minutes at most: the signal passed on ends it long before
        time.sleep(0.1)
"""
)


@pytest.mark.parametrize("number", [signal.SIGTERM, signal.SIGINT], ids=["SIGTERM", "SIGINT"])
def test_a_signal_is_passed_on_and_latched(tmp_path: Path, number: signal.Signals) -> None:
    _plant(tmp_path, SLOW)
    script = "import sys\nfrom bot.cli import main\nsys.exit(main(sys.argv[1:]))"
    process = subprocess.Popen(
        [sys.executable, "-c", script, "run", "--", *PYTEST],
        start_new_session=True,  # its own process group: one kill ends it and the runner under it
        cwd=tmp_path,
        env={**os.environ, "PYTHONPATH": str(ROOT)},
        stdin=subprocess.DEVNULL,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
    )
    try:
        deadline = time.monotonic() + 60
        while not (tmp_path / "started").exists():  # a bounded poll: the planted test says it runs
            assert process.poll() is None, process.communicate()
            assert time.monotonic() < deadline, "the planted test did not start within 60 s"
            time.sleep(0.02)
        process.send_signal(number)
        _, err = process.communicate(timeout=60)  # the test would sleep 120 s unless the signal reached it
    except BaseException:
        with contextlib.suppress(ProcessLookupError):  # what is left of it and of the runner under it
            os.killpg(process.pid, signal.SIGKILL)
        process.communicate()
        raise
    assert process.returncode == 3, err
    assert (
        _verdict_line(err)
        == f"flaketally run: exit 3: stopped by {number.name}, which the command got too; nothing rerun"
    )
    # the runner got the signal, failed the test and wrote its report: a rerun would have followed
    (result,) = _read(tmp_path / "junit.xml").results
    assert (result.outcome, result.message) == (Outcome.FAILED, f"AssertionError: planted: stopped by {number.name}")
    assert _runs(tmp_path, "slow") == 1
    assert not (tmp_path / "junit.rerun-1.xml").exists()


REMOVE_ON_RERUN = """from pathlib import Path


def pytest_unconfigure(config):
    if Path("flaky.count").read_text() == "2":
        Path("junit.xml").unlink()
"""


def test_a_rerun_without_a_report_is_exit_3_and_the_first_report_stays(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, SUITE, REMOVE_ON_RERUN)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 3
    assert _verdict_line(err) == (
        f"flaketally run: exit 3: no report at junit.xml: the command did not write one there; {FLAKY_ID} failed "
        "on the first run"
    )
    assert _outcomes(tmp_path / "junit.xml") == {"test_flaky": ["failed"], "test_stable": ["passed"]}
    assert not (tmp_path / "junit.rerun-1.xml").exists()
    assert sorted(p.name for p in tmp_path.iterdir() if p.name.startswith(".")) == []  # nothing left aside


# --- when a failure is rerun --------------------------------------------------------------------------


def test_no_rerun_when_the_runner_retried_tests_itself(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, BROKEN, RETRYING)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 1
    broken = "tests/test_planted.py::test_broken"
    assert _verdict_line(err) == (
        f"flaketally run: exit 1: {broken} failed; not rerun: the runner retried tests itself ({broken}): "
        "its attempts stand"
    )
    assert _runs(tmp_path, "broken") == 2  # the runner's own two attempts, and no more
    assert _outcomes(tmp_path / "junit.xml")["test_broken"] == ["failed", "failed"]


def test_no_rerun_when_more_tests_failed_than_max_reruns(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    two = COUNTER + "".join(
        f"\n\ndef test_flaky_{n}():\n    assert runs('flaky_{n}') >= 1, 'planted'\n" for n in ("a", "b")
    )
    _plant(tmp_path, two)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--max-reruns", "1", "--", *PYTEST)
    assert code == 1
    assert _verdict_line(err) == (
        "flaketally run: exit 1: tests/test_planted.py::test_flaky_a, tests/test_planted.py::test_flaky_b "
        "failed; not rerun: 2 tests failed, more than --max-reruns 1: a real red"
    )
    assert (_runs(tmp_path, "flaky_a"), _runs(tmp_path, "flaky_b")) == (1, 1)


BUMP = """from pathlib import Path


def pytest_unconfigure(config):
    # on run {run}: an error the runner counts in its suite but writes no testcase for (a file that failed to load)
    if Path("flaky.count").read_text() == "{run}":
        report = Path("junit.xml")
        report.write_text(report.read_text().replace('errors="0"', 'errors="1"', 1))
"""
EXIT_ON_RERUN = "import os\nfrom pathlib import Path\n\n\ndef pytest_unconfigure(config):\n"
EXIT_ON_RERUN += "    if Path('flaky.count').read_text() == '2':\n        os._exit(1)\n"


@pytest.mark.parametrize(
    ("conftest", "code", "runs", "why"),
    [
        (
            BUMP.replace("{run}", "1"),
            1,
            1,
            f"{FLAKY_ID} failed; not rerun: the report counts 1 failure(s) or error(s) that none of its testcases "
            "records",
        ),
        (
            BUMP.replace("{run}", "2"),
            1,
            2,
            "the rerun's report counts 1 failure(s) or error(s) none of its testcases records",
        ),
        (
            EXIT_ON_RERUN,
            3,
            2,
            "the rerun exited 1 but no test in its report failed: a crash, or a step outside the tests; "
            f"{FLAKY_ID} failed on the first run",
        ),
    ],
    ids=["first-run-suite-count", "rerun-suite-count", "rerun-exit-code"],
)
def test_failures_the_report_omits_keep_the_run_red(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    conftest: str,
    code: int,
    runs: int,
    why: str,
) -> None:
    _plant(tmp_path, SUITE, conftest)
    exit_code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert exit_code == code
    assert _verdict_line(err) == f"flaketally run: exit {code}: {why}"
    assert _runs(tmp_path, "flaky") == runs
    assert "flaky pass" not in err


# --- --rerun-scope test -------------------------------------------------------------------------------

PARAMETRISED = (
    COUNTER
    + """
import pytest


class TestGroup:
    @pytest.mark.parametrize("word", ["x y", "z"])
    def test_flaky(self, word):
        ran = runs(word)
        assert word == "z" or ran >= 1, "planted: fails on its first run only"


def test_stable():
    runs("stable")
"""
)


def test_rerun_scope_test_reruns_only_the_failed_pytest_test(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path, PARAMETRISED)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--rerun-scope", "test", "--", *PYTEST)
    assert code == 0, err
    node = "tests/test_planted.py::TestGroup::test_flaky[x y]"
    assert f"flaketally run: rerunning {node} alone\n" in err
    assert _verdict_line(err).startswith(f"flaketally run: exit 0: 1 flaky pass ({node})")
    assert (_runs(tmp_path, "x y"), _runs(tmp_path, "z"), _runs(tmp_path, "stable")) == (2, 1, 1)
    assert _outcomes(tmp_path / "junit.rerun-1.xml") == {"test_flaky[x y]": ["passed"]}
    assert main(["analyze", str(tmp_path), "--format", "json"]) == 1
    tests = {t["display"]: t["verdict"] for t in json.loads(capfd.readouterr().out)["tests"]}
    assert tests[node] == "flaky"


UNSELECTABLE = COUNTER + (
    "\nimport pytest\n\n\n@pytest.mark.parametrize('word', ['a::b'])\ndef test_flaky(word):\n"
    "    assert runs('flaky') >= 1, 'planted'\n\n\ndef test_stable():\n    runs('stable')\n"
)
WRAPPER = (
    "import subprocess\nimport sys\n\nsys.exit(subprocess.call([sys.executable, '-m', 'pytest', *sys.argv[1:]]))\n"
)


@pytest.mark.parametrize(
    ("suite", "command", "why", "stable"),
    [
        (UNSELECTABLE, PYTEST, "tests/test_planted.py::test_flaky[a::b] cannot be selected exactly by its node id", 2),
        (SUITE, [sys.executable, "wrapper.py", *PYTEST[3:]], "not a runner whose tests can be selected", 2),
        # the first run stopped before test_stable: the whole rerun runs it, a narrowed one never would
        (SUITE, [*PYTEST, "-x"], "-x can hide tests or failures from a narrowed rerun", 1),
    ],
    ids=["parametrised-id", "unknown-runner", "stops-early"],
)
def test_rerun_scope_test_falls_back_to_the_whole_command(
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capfd: pytest.CaptureFixture[str],
    suite: str,
    command: list[str],
    why: str,
    stable: int,
) -> None:
    _plant(tmp_path, suite)
    (tmp_path / "wrapper.py").write_text(WRAPPER)
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--rerun-scope", "test", "--", *command)
    assert code == 0, err
    assert f"flaketally run: rerunning the whole command: {why}" in err
    assert _runs(tmp_path, "stable") == stable
    assert "test_stable" in _outcomes(tmp_path / "junit.rerun-1.xml")


def test_runners_are_told_from_the_command() -> None:
    assert runner_of([sys.executable, "-m", "pytest", "-q"]) == "pytest"
    assert runner_of(["pytest", "tests"]) == "pytest"
    assert runner_of(["npx", "jest", "--ci"]) == "jest"
    assert runner_of(["node_modules/.bin/vitest", "run"]) == "vitest"
    assert runner_of(["npx", "playwright", "test"]) == "playwright"
    assert runner_of(["npx", "playwright", "show-report"]) is None
    assert runner_of(["npm", "test"]) is None
    assert runner_of(["bash", "-c", "pytest"]) is None
    assert runner_of([sys.executable, "wrapper.py"]) is None


def _failed(classname: str, name: str, project: str | None = None) -> TestResult:
    return TestResult(classname, name, (Attempt(Outcome.FAILED),), project=project)


def test_the_failed_tests_are_selected_the_way_each_runner_takes_them(tmp_path: Path) -> None:
    _plant(tmp_path)
    pytest_ids = rerun_command(["pytest"], [_failed("tests.test_planted.TestA", "test_b[1-x y]")], 1, tmp_path)
    assert pytest_ids == (["pytest", "tests/test_planted.py::TestA::test_b[1-x y]"], None)
    jest = rerun_command(["npx", "jest"], [_failed("outer t (1)", "outer t (1)"), _failed("a b", "a b")], 1, tmp_path)
    assert jest == (["npx", "jest", r"--testNamePattern=^(?:outer t \(1\)|a b)$"], None)
    vitest = rerun_command(["vitest", "run"], [_failed("a.test.ts", "outer > t.x")], 1, tmp_path)
    assert vitest == (["vitest", "run", r"--testNamePattern=^(?:outer t\.x)$"], None)
    spec = _failed("tests/a.spec.ts", "outer › works", "chromium")
    playwright = rerun_command(["npx", "playwright", "test"], [spec], 1, tmp_path)
    grep = r"--grep=tests\/a\.spec\.ts outer works(?: @\S+)*$"
    assert playwright == (["npx", "playwright", "test", grep, "--project=chromium"], None)
    # whole command: the file is not here; the runner exited 2 (not only tests failed); coverage
    assert rerun_command(["pytest"], [_failed("tests.test_gone", "test_x")], 1, tmp_path)[1] == (
        "tests/test_gone.py::test_x is not a pytest node id of a file here"
    )
    assert rerun_command(["jest"], [_failed("a", "a")], 2, tmp_path)[1] == (
        "the first run exited 2, not 1: something besides the tests may have failed"
    )
    assert rerun_command(["jest", "--coverage"], [_failed("a", "a")], 1, tmp_path) == (
        ["jest", "--coverage"],
        "--coverage can hide tests or failures from a narrowed rerun",
    )


JS_COUNTER = """function runs(name) {
  const counter = path.join(__dirname, `${name}.count`);
  const before = fs.existsSync(counter) ? Number(fs.readFileSync(counter, "utf8")) : 0;
  fs.writeFileSync(counter, String(before + 1));
  return before;
}

describe("planted", () => {
  test("flaky (once)", () => { expect(runs("flaky")).toBeGreaterThan(0); });
  test("stable", () => { runs("stable"); });
});
"""


def test_rerun_scope_test_with_vitest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    need("node", "apt-get install nodejs npm")
    vitest = str(node_bin("vitest"))
    (tmp_path / "planted.test.mjs").write_text(
        'import { describe, test, expect } from "vitest";\nimport fs from "node:fs";\nimport path from "node:path";\n'
        'import { fileURLToPath } from "node:url";\n\nconst __dirname = path.dirname(fileURLToPath(import.meta.url));\n'
        + JS_COUNTER
    )
    monkeypatch.setenv("NODE_PATH", str(NODE_RUNNERS / "node_modules"))
    command = [vitest, "run", "--root", str(tmp_path), "--reporter=junit", "--outputFile=junit.xml"]
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--rerun-scope", "test", "--", *command)
    assert code == 0, err
    assert "flaketally run: rerunning planted.test.mjs > planted > flaky (once) alone\n" in err
    assert (_runs(tmp_path, "flaky"), _runs(tmp_path, "stable")) == (2, 1)
    assert _outcomes(tmp_path / "junit.rerun-1.xml")["planted > flaky (once)"] == ["passed"]


JEST_JUNIT = """const fs = require("fs");

// The shape jest-junit writes by default: classname and name are the full name (describe blocks and title).
class Junit {
  onRunComplete(contexts, results) {
    const esc = (s) => s.replace(/&/g, "&amp;").replace(/</g, "&lt;").replace(/"/g, "&quot;");
    let cases = "", failures = 0, tests = 0;
    for (const file of results.testResults) {
      for (const t of file.testResults) {
        tests++;
        const name = esc(t.fullName);
        let inner = "";
        if (t.status === "failed") {
          failures++;
          inner = `<failure message="${esc(t.failureMessages[0].split("\\n")[0])}"/>`;
        }
        if (t.status === "pending" || t.status === "skipped") inner = "<skipped/>";
        cases += `<testcase classname="${name}" name="${name}" time="0">${inner}</testcase>`;
      }
    }
    const suite = `<testsuite name="jest tests" tests="${tests}" failures="${failures}" errors="0">`;
    fs.writeFileSync("junit.xml", `<testsuites>${suite}${cases}</testsuite></testsuites>`);
  }
}
module.exports = Junit;
"""


def test_rerun_scope_test_with_jest(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    need("node", "apt-get install nodejs npm")
    jest = str(node_bin("jest"))
    (tmp_path / "package.json").write_text('{"name": "planted", "private": true}\n')
    (tmp_path / "junit-reporter.js").write_text(JEST_JUNIT)
    (tmp_path / "planted.test.js").write_text(
        'const fs = require("fs");\nconst path = require("path");\n\n' + JS_COUNTER
    )
    reporters = ["--reporters=default", f"--reporters={tmp_path / 'junit-reporter.js'}"]
    command = [jest, "--rootDir", str(tmp_path), "--ci", "--watchman=false", *reporters]
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--rerun-scope", "test", "--", *command)
    assert code == 0, err
    assert "flaketally run: rerunning planted flaky (once) alone\n" in err
    assert (_runs(tmp_path, "flaky"), _runs(tmp_path, "stable")) == (2, 1)
    assert _outcomes(tmp_path / "junit.rerun-1.xml")["planted flaky (once)"] == ["passed"]


# --- GitHub Actions -----------------------------------------------------------------------------------


def test_in_github_actions_a_flaky_pass_is_annotated_and_summarised(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path)
    summary = tmp_path / "summary.md"
    summary.write_text("an earlier step's summary\n")
    monkeypatch.setenv("GITHUB_ACTIONS", "true")
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(summary))
    code, out, err = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 0, err
    line = SUITE.splitlines().index('    assert runs("flaky") >= 1, "planted: fails on its first run only"') + 1
    assert [row for row in out.splitlines() if row.startswith("::")] == [
        f"::warning file=tests/test_planted.py,line={line},title=Flaky test%3A tests/test_planted.py%3A%3Atest_flaky"
        f"::{FLAKY_ID} failed, then passed when rerun (flaketally run): AssertionError: planted: fails on its first "
        "run only"
    ]
    text = summary.read_text()
    assert text.startswith("an earlier step's summary\n### Flaky passes (flaketally run)\n")
    assert "| Test | First failure |\n|---|---|\n" in text
    assert f"| `{FLAKY_ID}` | AssertionError: planted: fails on its first run only |" in text.replace("\\", "")
    assert "`junit.xml`, `junit.rerun-1.xml`" in text


def test_outside_github_actions_nothing_is_annotated(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    _plant(tmp_path)
    monkeypatch.delenv("GITHUB_ACTIONS", raising=False)
    monkeypatch.setenv("GITHUB_STEP_SUMMARY", str(tmp_path / "summary.md"))
    code, out, _ = _flaketally(tmp_path, monkeypatch, capfd, "--", *PYTEST)
    assert code == 0
    assert "::warning" not in out
    assert not (tmp_path / "summary.md").exists()


def test_workflow_command_escapes() -> None:
    assert escape_data("100% done\r\nnext: a, b") == "100%25 done%0D%0Anext: a, b"
    assert escape_property("tests/x.py::a,b%") == "tests/x.py%3A%3Aa%2Cb%25"


# --- usage ----------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("args", "why"),
    [
        (["--"], "no command given"),
        (["--junit", "report.txt", "--", "pytest"], "--junit report.txt must name a .xml file"),
        (["--max-reruns", "-1", "--", "pytest"], "--max-reruns must be 0 or more, not -1"),
    ],
    ids=["no-command", "not-xml", "negative-reruns"],
)
def test_usage_errors_are_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str], args: list[str], why: str
) -> None:
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, *args)
    assert code == 2
    assert _verdict_line(err).startswith(f"flaketally run: exit 2: {why}")


def test_a_file_at_junit_that_is_not_a_report_is_never_deleted(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "source.xml").write_text("<project><name>not a report</name></project>\n")
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--junit", "source.xml", "--", *PYTEST)
    assert code == 2
    assert "source.xml exists and is not a JUnit report: not deleted" in _verdict_line(err)
    assert (tmp_path / "source.xml").read_text() == "<project><name>not a report</name></project>\n"


def test_a_command_that_cannot_start_is_exit_3(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--", str(tmp_path / "no-such-runner"))
    assert code == 3
    assert _verdict_line(err) == (
        f"flaketally run: exit 3: {tmp_path / 'no-such-runner'} could not be started: No such file or directory; "
        "nothing rerun"
    )


# --- the modules' size ----------------------------------------------------------------------------------


@pytest.mark.parametrize("name", ["run.py", "run_rules.py"])
def test_the_modules_stay_small(name: str) -> None:
    path = ROOT / "bot" / "local" / name
    source = path.read_text()
    assert len(source.splitlines()) <= 450
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef):
            assert node.end_lineno is not None
            assert node.end_lineno - node.lineno + 1 <= 80, f"{name}: {node.name} is longer than 80 lines"


# --- the memory of local runs ---------------------------------------------------------------------------

SWITCHED = """from pathlib import Path


def test_switched():
    assert Path("outcome.txt").read_text() == "pass"


def test_stable():
    pass
"""


def test_a_local_run_remembers_and_says_when_a_failure_may_be_a_flake(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capfd: pytest.CaptureFixture[str]
) -> None:
    """Outside CI, each run goes into the working tree's memory: a pass and a failure on one tree, then the
    next failure there gets the note; a change to a tracked file is other code (no note); reset forgets."""
    from tests.test_recall import git, isolated_git

    isolated_git(monkeypatch, tmp_path)
    _plant(tmp_path, SWITCHED)
    (tmp_path / ".gitignore").write_text("outcome.txt\njunit*.xml\n")  # what a run writes is not the code
    git(tmp_path, "init", "-q")
    git(tmp_path, "add", ".")
    git(tmp_path, "commit", "-q", "-m", "planted")
    switched = "tests/test_planted.py::test_switched"

    def run(outcome: str) -> tuple[int, str]:
        (tmp_path / "outcome.txt").write_text(outcome)
        code, _, err = _flaketally(tmp_path, monkeypatch, capfd, "--max-reruns", "0", "--", *PYTEST)
        return code, err

    assert run("fail")[0] == 1
    assert run("pass")[0] == 0
    code, err = run("fail")
    assert code == 1 and f"flaketally: {switched} failed 2 of 3 runs in the last 7 days" in err, err
    assert "run it again before you change code for it" in err
    (tmp_path / "tests" / "test_planted.py").write_text(SWITCHED + "\n# changed\n")  # other code: a new tree
    code, err = run("fail")
    assert code == 1 and "may be flaky" not in err, err
    assert main(["memory", "reset"]) == 0
    (tmp_path / "tests" / "test_planted.py").write_text(SWITCHED)
    code, err = run("fail")
    assert code == 1 and "may be flaky" not in err, err  # forgotten

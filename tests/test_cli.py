"""``flaketally analyze`` as a user runs it: formats, exit codes, flags, determinism."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from bot.cli import main
from bot.store import Store
from tests.test_store import dump

FIXTURES = Path(__file__).parent / "fixtures"
FLAKELEDGER = FIXTURES / "flakeledger"
RUNNERS = FIXTURES / "real-runners"
SAMPLES = Path(__file__).parent.parent / "samples"


def run(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, str, str]:
    code = main(["analyze", *args])
    out, err = capsys.readouterr()
    return code, out, err


@pytest.mark.parametrize("fmt", ["text", "markdown", "json"])
def test_the_same_analysis_twice_is_byte_identical_and_leaves_the_store_unchanged(
    fmt: str, store_url: str, capsys: pytest.CaptureFixture[str]
) -> None:
    paths = [str(FLAKELEDGER), str(RUNNERS / "gotestsum-rerun"), str(RUNNERS / "playwright-include-retries")]
    first = run(capsys, *paths, "--db", store_url, "--format", fmt)
    store = Store(store_url)
    before = dump(store)
    second = run(capsys, *paths, "--db", store_url, "--format", fmt)
    assert dump(store) == before
    store.close()
    assert first[0] == second[0] == 1
    assert first[1] == second[1]
    assert "new of" in first[2] and "0 new of" in second[2]


def test_input_order_does_not_change_the_output(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    forward = run(capsys, str(RUNNERS / "jest"), str(FLAKELEDGER), "--db", str(tmp_path / "a.db"))[1]
    backward = run(capsys, str(FLAKELEDGER), str(RUNNERS / "jest"), "--db", str(tmp_path / "b.db"))[1]
    assert forward == backward


def test_json_document_shape(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, out, _ = run(capsys, str(FLAKELEDGER), "--db", str(tmp_path / "s.db"), "--format", "json")
    doc = json.loads(out)
    assert code == 1
    assert (doc["flaketally"], doc["version"]) == ("analysis", 1)
    assert set(doc) >= {"policy", "rates", "currency", "warnings", "tests"}
    test = next(t for t in doc["tests"] if t["name"] == "test_apply_coupon")
    assert set(test) >= {
        "classname",
        "name",
        "id",
        "family",
        "context",
        "verdict",
        "commits",
        "score",
        "lower_bound",
        "cost",
        "evidence",
    }
    assert set(test["cost"]) == {
        "events",
        "untimed_events",
        "wasted_compute_minutes",
        "developer_minutes",
        "compute",
        "developer",
        "total",
    }
    assert set(test["commits"][0]) >= {"sha", "verdict", "attempts", "passed", "failed"}
    assert test["verdict"] == "flaky"


def test_exit_zero_without_findings(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    clean = tmp_path / "clean.xml"
    clean.write_text('<testsuite commit="abc" attempt="1"><testcase classname="m" name="t" time="1"/></testsuite>')
    assert run(capsys, str(clean), "--db", str(tmp_path / "s.db"))[0] == 0


def test_exit_two_without_a_usable_report(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    broken = tmp_path / "broken.xml"
    broken.write_text("<testsuite><testcase")
    code, out, err = run(capsys, str(broken), str(tmp_path / "missing.xml"), "--db", str(tmp_path / "s.db"))
    assert (code, out) == (2, "")  # one clear line, no report
    assert f"flaketally: {broken}: not well-formed XML" in err
    assert f"flaketally: {tmp_path / 'missing.xml'}: no such file or directory" in err
    assert "no usable report" in err


@pytest.mark.parametrize("what", ["missing", "empty folder"])
def test_nothing_to_read_is_exit_two_with_one_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], what: str
) -> None:
    path = tmp_path / "nope" if what == "missing" else tmp_path
    code, out, err = run(capsys, str(path))
    assert (code, out) == (2, "")
    assert err.count("\n") == 1 and err.startswith("flaketally: ")
    assert list(tmp_path.iterdir()) == []  # nothing written, not even a store


def test_without_db_nothing_is_written(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    """Never into the App's store because DATABASE_URL happens to be set, never ./flaketally.db."""
    monkeypatch.chdir(tmp_path)
    monkeypatch.setenv("DATABASE_URL", f"sqlite:///{tmp_path / 'app.db'}")
    code, out, err = run(capsys, str(FLAKELEDGER))
    assert code == 1 and out.startswith("policy\t")
    assert list(tmp_path.iterdir()) == [] and "nothing written" in err


def test_version_and_a_fast_help(capsys: pytest.CaptureFixture[str]) -> None:
    import subprocess
    import sys

    with pytest.raises(SystemExit):
        main(["--version"])
    assert capsys.readouterr().out.startswith("flaketally 0.")
    # --help imports no store and no analysis: what makes it answer at once
    heavy = "('sqlalchemy', 'bot.store', 'bot.local', 'bot.core.verdicts', 'rich', 'jinja2')"
    probe = f"import sys, bot.cli; print(sorted(m for m in sys.modules if m.startswith({heavy})))"
    assert subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout == "[]\n"


def test_every_format_the_help_names_renders(monkeypatch: pytest.MonkeyPatch) -> None:
    from bot.cli import FORMATS, _render
    from bot.local.analyze import analyze

    monkeypatch.setenv("COLUMNS", "160")  # the table's width: the terminal's
    analysis = analyze(None, [str(FLAKELEDGER)])
    for fmt in FORMATS:
        assert "test_apply_coupon" in _render(analysis, fmt, 20), fmt


def test_exit_two_on_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    with pytest.raises(SystemExit) as exited:
        main(["analyze", "x.xml", "--single-fail-policy", "maybe"])
    assert exited.value.code == 2
    with pytest.raises(SystemExit) as exited:
        main(["analyze", "x.xml", "--compute-rate", "-1"])
    assert exited.value.code == 2


def test_rates_and_currency_are_declared_inputs(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    args = ["--developer-rate", "2", "--developer-minutes", "10", "--compute-rate", "0", "--currency", "EUR"]
    _, out, _ = run(capsys, str(FLAKELEDGER), "--db", str(tmp_path / "s.db"), *args)
    assert "total\t60.0000 EUR\n" in out  # 3 events x 10 min x 2 EUR
    assert "rates\t10 developer minutes per flaky event at 2.00 EUR/min, CI compute at 0 EUR/min\n" in out


def test_single_fail_policy_is_printed_and_applied(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    one = tmp_path / "one.xml"
    one.write_text(
        '<testsuite commit="abc" attempt="1"><testcase classname="m" name="t"><failure/></testcase></testsuite>'
    )
    _, out, _ = run(capsys, str(one), "--db", str(tmp_path / "s.db"), "--single-fail-policy", "failing")
    assert "policy\tsingle-fail=failing\n" in out
    assert "commit\tfailing\tm::t\t" in out
    _, md, _ = run(capsys, str(one), "--db", str(tmp_path / "t.db"), "--format", "markdown")
    assert "single-fail policy: undetermined" in md
    assert "undetermined on 1 \\(abc\\)" in md


def test_markdown_shows_the_cost_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    _, md, _ = run(capsys, str(FLAKELEDGER), "--db", str(tmp_path / "s.db"), "--format", "markdown")
    assert "| 1 | `tests.payments.test_checkout::test_apply_coupon` | 2 | 0.028 min | 30.0 min |" in md
    assert "Total flaky cost: **67.5008 USD**" in md


def test_progress_goes_to_stderr_on_a_terminal(
    tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    terminal = Terminal()
    monkeypatch.setattr("sys.stderr", terminal)
    main(["analyze", str(SAMPLES / "pytest-rerunfailures"), "--format", "lines"])
    assert "reading" in terminal.getvalue() and "50/50" in terminal.getvalue()
    out, err = capsys.readouterr()
    assert err == "" and out.startswith("policy\t")
    main(["analyze", str(FLAKELEDGER), "--format", "lines"])  # a few reports: read before a bar could show
    assert "7/7" not in terminal.getvalue()


def test_a_terminal_gets_the_table_and_a_pipe_the_lines(
    capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    piped = run(capsys, str(FLAKELEDGER))
    assert (
        piped[1]
        == run(capsys, str(FLAKELEDGER), "--format", "lines")[1]
        == run(capsys, str(FLAKELEDGER), "--format", "text")[1]
    )
    monkeypatch.setattr("sys.stdout.isatty", lambda: True)
    monkeypatch.setenv("COLUMNS", "160")
    code, table, _ = run(capsys, str(FLAKELEDGER))
    assert code == 1
    assert "tests/payments/test_checkout.py::test_apply_coupon" in table and "\t" not in table


def test_missing_commit_is_a_warning_naming_the_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    anon = tmp_path / "anon.xml"
    anon.write_text('<testsuite><testcase classname="m" name="t"/></testsuite>')
    _, out, _ = run(capsys, str(anon), "--db", str(tmp_path / "s.db"))
    assert f"warning\t{anon}\tno commit in the report or a meta.json beside it: judged alone as commit local-" in out


def test_two_tests_sharing_a_name_get_no_verdict_and_a_warning(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """The report that once read as "flaky … passed, then failed (retries in one report)" and cost 22.50
    USD: mocha writes no retries, so the shared name is judged neither flaky nor anything else."""
    code, out, _ = run(capsys, str(FIXTURES / "collision"), "--db", str(tmp_path / "s.db"))
    shared = "applies the coupon::checkout applies the coupon"
    verdicts = [line for line in out.splitlines() if line.startswith(("test\t", "commit\t", "cost\t"))]
    assert verdicts and all(shared not in line for line in verdicts)
    assert "total\t0.0000 USD" in out
    (warning,) = [line for line in out.splitlines() if line.startswith("warning") and shared in line]
    assert "different tests sharing one name, not retries (1 of them failed): left out of the verdicts" in warning
    assert code == 1  # a failure was seen and could not be judged: not a clean run


def test_json_names_the_failure_and_where_it_is_and_a_skipped_only_test_is_skipped(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    report = tmp_path / "report.xml"
    report.write_text(
        '<testsuite name="pytest" commit="a1b2c3d">'
        '<testcase classname="tests.test_cart" name="test_total"><failure message="assert 100 == 90">'
        "def test_total():\n&gt;       assert total() == 90\nE       assert 100 == 90\n\n"
        "tests/test_cart.py:12: AssertionError</failure></testcase>"
        '<testcase classname="tests.test_cart" name="test_later"><skipped message="not yet"/></testcase>'
        "</testsuite>"
    )
    code, out, _ = run(capsys, str(report), "--format", "json")
    tests = {t["name"]: t for t in json.loads(out)["tests"]}
    total = tests["test_total"]
    assert (total["message"], total["file"], total["line"]) == ("assert 100 == 90", "tests/test_cart.py", 12)
    assert total["display"] == "tests/test_cart.py::test_total"
    assert (
        tests["test_later"]["verdict"] == "skipped"
        and tests["test_later"]["evidence"] == "skipped on all 1 run on 1 commit"
    )
    assert code == 1

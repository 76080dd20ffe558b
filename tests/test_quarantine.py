"""Quarantine as code: the file's rules, reading it, and the gate honouring it per execution context
(through the pipeline, the store on SQLite and PostgreSQL, and the fake GitHub)."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta
from pathlib import Path

import pytest

from bot.cli import main
from bot.config.load import CONFIG_PATH, Source
from bot.config.quarantine import parse_quarantine, render_quarantine
from bot.config.schema import QUARANTINE_PATH
from bot.core.baseline import Word
from bot.core.findings import CommitReport
from bot.core.observations import Observation
from bot.core.quarantine import CLEAN_DAYS, CLEAN_RUNS, Entry, Quarantine, clean_runs_needed, recovery
from bot.pipeline.attempt import process_workflow_run
from bot.pipeline.quarantine import ADD_BRANCH, REMOVE_BRANCH, adding, propose, removing
from bot.store import Store
from tests.github_fake import FakeGitHub, FakeRun, zip_of
from tests.test_config import REPO, check, pr_run, process
from tests.test_end_to_end import golden, junit

TEST = "tests/payments/test_checkout.py::test_apply_coupon"
OTHER = "tests/payments/test_checkout.py::test_total"


def _file(*entries: tuple[str, str]) -> str:
    return render_quarantine(
        [Entry(t, c, "flaky on 3 of 10 commits, 67.50 USD", date(2026, 11, 30)) for t, c in entries]
    )


# --- the rules -------------------------------------------------------------------------------------


def test_an_entry_covers_its_context_only_or_every_context_with_all() -> None:
    one = Entry(TEST, "ci.yml · test (3.11) · ubuntu-latest")
    assert one.covers(TEST, "ci.yml · test (3.11) · ubuntu-latest")
    assert not one.covers(TEST, "ci.yml · test (3.12) · ubuntu-latest")  # a matrix variant is its own
    assert not one.covers(OTHER, "ci.yml · test (3.11) · ubuntu-latest")
    assert Entry(TEST).covers(TEST, "anything")
    both = Quarantine((Entry(TEST, reason="everywhere"), Entry(TEST, "ci.yml · x", reason="here")))
    assert both.entry_for(TEST, "ci.yml · x") == Entry(TEST, "ci.yml · x", reason="here")
    assert both.entry_for(TEST, "elsewhere") == Entry(TEST, reason="everywhere")


def test_the_default_clean_runs_rule_out_a_five_percent_failure_rate_at_95_percent() -> None:
    assert CLEAN_RUNS == clean_runs_needed(0.05, 0.95) == 59
    assert 0.95**59 < 0.05 <= 0.95**58
    assert CLEAN_DAYS == 7


def _runs(outcomes: str, days_apart: float) -> list[Observation]:
    start = datetime(2026, 11, 1, tzinfo=UTC)
    return [
        Observation(i, f"c{i}", 1, i, (start + timedelta(days=i * days_apart)).isoformat(), letter, 1.0)
        for i, letter in enumerate(outcomes)
    ]


def test_recovery_needs_the_runs_and_the_days_since_the_last_failure() -> None:
    q = Quarantine(clean_runs=5, clean_days=2)
    assert recovery(_runs("FPPPPP", 0.5), q).due  # 5 clean runs over 2 days
    assert not recovery(_runs("FPPPPP", 0.1), q).due  # the runs, not the days
    assert not recovery(_runs("PPPPPFPPP", 1), q).due  # failed again: counted from there
    found = recovery(_runs("FPPPPPP", 1), q)
    assert found.clean_runs == 6 and found.days == 5.0
    assert found.evidence.startswith("6 clean runs in a row over 5.0 days since its last failure")


# --- the file --------------------------------------------------------------------------------------


def test_the_file_round_trips_and_a_wrong_entry_is_named_and_left_out() -> None:
    text = _file((TEST, "all"), (OTHER, "ci.yml · test (3.11)"))
    quarantine, problems = parse_quarantine(Source("f", text))
    assert problems == [] and [e.test for e in quarantine.entries] == [TEST, OTHER]
    assert render_quarantine(quarantine.entries) == text
    broken = text + "- test: x\n  reason: y\n- test: z\n  reason: r\n  since: 2026-01-01\n  colour: red\n"
    quarantine, problems = parse_quarantine(Source("f", broken))
    assert len(quarantine.entries) == 2
    assert problems == [
        "f: entry 3 (x) `since` is missing; it is left out",
        "f: entry 4 (z) `colour` is not a key of an entry; it is left out",
    ]
    assert parse_quarantine(Source("f", "tests: []\n"))[1] == [
        "f: expected one key, `quarantine:`, a list of entries; nothing is quarantined"
    ]
    assert parse_quarantine(Source("f", _file((TEST, "all"), (TEST, "all"))))[1] == [
        f"f: entry 2 ({TEST}) repeats an earlier entry for the same test and context"
    ]


def test_config_check_checks_a_quarantine_file(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "flaketally-quarantine.yml"
    good.write_text(_file((TEST, "all")))
    assert main(["config", "check", str(good)]) == 0
    assert f"quarantined\t{TEST}\tall\tsince 2026-11-30" in capsys.readouterr().out
    good.write_text("quarantine:\n  - test: x\n")
    assert main(["config", "check", str(good)]) == 1
    assert "`reason` is missing" in capsys.readouterr().out


# --- the gate --------------------------------------------------------------------------------------


def _run(github: FakeGitHub, n: int, **outcomes: str) -> FakeRun:
    """A pull request's run on a commit of its own (``n``), one attempt."""
    run = github.add_run(REPO, head_sha=f"{n:040x}", pull_requests=[7])
    failed = "fail" in outcomes.values()
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure" if failed else "success")
    github.add_artifact(run, "junit-results", zip_of({"junit.xml": junit(**outcomes)}), attempt=1)
    return run


def _context(store: Store, github: FakeGitHub) -> str:
    """The execution context the fake run's job gives (learnt from an unquarantined run)."""
    report = process(store, github, _run(github, 1, test_apply_coupon="fail"))
    return report.findings[0].context.display()


def test_a_quarantined_failure_leaves_the_gate_green_and_is_shown(store: Store, github: FakeGitHub) -> None:
    context = _context(store, github)
    github.add_file(REPO, QUARANTINE_PATH, _file((TEST, context)))
    run = _run(github, 2, test_apply_coupon="fail", test_total="pass")
    report = process(store, github, run)
    (finding,) = report.findings
    assert finding.word is Word.QUARANTINED and finding.quarantine is not None
    conclusion, summary, _ = check(github, run)
    assert conclusion == "success"
    assert summary.startswith(f"Success: `{TEST}` failed and is quarantined in its context")
    comment = github.comments_on(REPO, 7)[-1].body
    assert "**quarantined**" in comment and "quarantined since 2026-11-30" in comment


def test_another_failure_in_the_same_run_still_fails_it(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, QUARANTINE_PATH, _file((TEST, "all")))
    run = pr_run(github, {"test_apply_coupon": "fail", "test_total": "fail"})
    report = process(store, github, run)
    assert {f.name: f.word for f in report.findings} == {
        "test_apply_coupon": Word.QUARANTINED,
        "test_total": Word.UNDETERMINED,
    }
    conclusion, summary, _ = check(github, run)
    reason = summary.split("\n")[0]
    assert conclusion == "failure" and "test_total" in reason and "test_apply_coupon" not in reason


def test_an_entry_for_one_context_does_not_cover_another(store: Store, github: FakeGitHub) -> None:
    context = _context(store, github)
    github.add_file(REPO, QUARANTINE_PATH, _file((TEST, context.replace("3.11", "3.12"))))
    run = _run(github, 2, test_apply_coupon="fail")
    report = process(store, github, run)
    assert [f.word for f in report.findings] == [Word.UNDETERMINED]
    assert check(github, run)[0] == "failure"


def test_the_configuration_can_move_the_file_and_a_wrong_file_is_named(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG_PATH, "quarantine:\n  file: ci/quarantine.yml\n")
    github.add_file(REPO, "ci/quarantine.yml", _file((TEST, "all")))
    run = pr_run(github, {"test_apply_coupon": "fail"})
    assert [f.word for f in process(store, github, run).findings] == [Word.QUARANTINED]
    github.add_file(REPO, "ci/quarantine.yml", "quarantine: [\n")
    run = _run(github, 2, test_apply_coupon="fail")
    assert [f.word for f in process(store, github, run).findings] == [Word.UNDETERMINED]
    conclusion, summary, _ = check(github, run)
    assert conclusion == "failure"
    assert "acme/widgets:ci/quarantine.yml: not valid YAML at line 2; nothing is quarantined" in summary.replace(
        "\\", ""
    )


# --- pull requests that change the file ------------------------------------------------------------


def test_adding_opens_one_pull_request_and_a_second_click_updates_it(github: FakeGitHub) -> None:
    first, second = _entries_of(TEST), _entries_of(OTHER)
    with github.port() as gh:
        one = propose(gh, REPO, "main", QUARANTINE_PATH, adding(first, "octocat"))
        again = propose(gh, REPO, "main", QUARANTINE_PATH, adding(first, "octocat"))  # the same click redelivered
        more = propose(gh, REPO, "main", QUARANTINE_PATH, adding(second, "hubot"))
    assert one.opened and one.number is not None
    assert (again.number, again.opened, again.said) == (one.number, False, f"#{one.number} says so")
    assert (more.number, more.opened) == (one.number, False)
    (pull,) = github.pulls_opened(REPO)
    assert (pull.head, pull.base, pull.state) == (ADD_BRANCH, "main", "open")
    assert "`tests/payments/test_checkout.py::test_total`" in pull.body
    assert len(github.commits_written) == 2  # the redelivered click wrote nothing
    written = github.file_on(REPO, ADD_BRANCH, QUARANTINE_PATH)
    assert written is not None
    quarantine, problems = parse_quarantine(Source("f", written))
    assert problems == [] and [e.test for e in quarantine.entries] == [TEST, OTHER]
    assert github.files.get((REPO, QUARANTINE_PATH)) is None  # the default branch is never written


def test_an_existing_file_is_extended_and_a_file_with_unreadable_entries_is_left_alone(github: FakeGitHub) -> None:
    github.add_file(REPO, QUARANTINE_PATH, _file((TEST, "all")))
    with github.port() as gh:
        same = propose(gh, REPO, "main", QUARANTINE_PATH, adding(_entries_of(TEST), "octocat"))
        assert (same.number, same.said) == (None, "no change proposed: the quarantine file already says so")
        github.add_file(REPO, QUARANTINE_PATH, _file((TEST, "all")) + "- test: x\n")
        refused = propose(gh, REPO, "main", QUARANTINE_PATH, adding(_entries_of(OTHER), "octocat"))
    assert refused.number is None and "`reason` is missing" in refused.said and "nothing is dropped" in refused.said
    assert github.pulls_opened(REPO) == []


def test_recovered_entries_leave_by_their_own_pull_request(github: FakeGitHub) -> None:
    github.add_file(REPO, QUARANTINE_PATH, _file((TEST, "all"), (OTHER, "all")))
    recovered = [(Entry(TEST, "all"), "59 clean runs in a row over 8.0 days since its last failure")]
    with github.port() as gh:
        done = propose(gh, REPO, "main", QUARANTINE_PATH, removing(recovered))
    assert done.opened
    (pull,) = github.pulls_opened(REPO)
    assert pull.head == REMOVE_BRANCH and "59 clean runs in a row" in pull.body
    written = github.file_on(REPO, REMOVE_BRANCH, QUARANTINE_PATH)
    assert written is not None and [e.test for e in parse_quarantine(Source("f", written))[0].entries] == [OTHER]


def test_a_branch_left_by_a_closed_pull_request_starts_again_from_the_default_branch(github: FakeGitHub) -> None:
    with github.port() as gh:
        first = propose(gh, REPO, "main", QUARANTINE_PATH, adding(_entries_of(TEST), "octocat"))
        assert first.number is not None
        github.opened[first.number].state = "closed"
        again = propose(gh, REPO, "main", QUARANTINE_PATH, adding(_entries_of(OTHER), "octocat"))
    assert again.opened and again.number != first.number
    written = github.file_on(REPO, ADD_BRANCH, QUARANTINE_PATH)
    assert written is not None and [e.test for e in parse_quarantine(Source("f", written))[0].entries] == [OTHER]


def _entries_of(*tests: str) -> list[Entry]:
    return [Entry(t, "all", "flaky on 2 of 3 commits", date(2026, 12, 1)) for t in tests]


# --- recovery ----------------------------------------------------------------------------------------


def _push(store: Store, github: FakeGitHub, n: int, outcome: str) -> CommitReport:
    """A push to the default branch, a day after the one before, on a commit of its own."""
    github.now += 86400
    run = github.add_run(REPO, head_sha=f"{n:040x}", event="push", head_branch="main")
    github.add_job(run, attempt=1, name="test (3.11)", conclusion="failure" if outcome == "fail" else "success")
    report = junit(test_apply_coupon=outcome, test_total="pass")
    github.add_artifact(run, "junit-results", zip_of({"junit.xml": report}), attempt=1)
    with github.port() as gh:
        found = process_workflow_run(
            store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=1, default_branch="main"
        )
    assert found is not None
    return found


def test_a_test_clean_past_the_threshold_gets_one_removal_pull_request(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG_PATH, "quarantine:\n  clean_runs: 5\n  clean_days: 3\n")
    github.add_file(REPO, QUARANTINE_PATH, _file((TEST, "all"), (OTHER, "ci.yml · another job")))
    reports = [_push(store, github, n, outcome) for n, outcome in enumerate(["fail", *["pass"] * 6], 1)]
    assert [r.leaving != () for r in reports] == [False, False, False, False, False, True, True]
    (pull,) = github.pulls_opened(REPO)  # opened by the 6th push, left as it was by the 7th
    assert pull.head == REMOVE_BRANCH and len(github.commits_written) == 1
    written = github.file_on(REPO, REMOVE_BRANCH, QUARANTINE_PATH)
    assert written is not None
    # the other entry's context never ran: nothing says it recovered, and it stays
    assert [e.test for e in parse_quarantine(Source("f", written))[0].entries] == [OTHER]
    assert reports[-1].leaving_note == f"#{pull.number} says so"
    newest = max(github.check_runs.values(), key=lambda c: c.id)  # the check run says so, with the evidence
    assert "`tests/payments/test_checkout.py::test_apply_coupon` (`all`) is due to leave the quarantine: " in (
        newest.output.get("text") or ""
    )
    golden("quarantine/recovered.pull.md", f"{pull.title}\n\n{pull.body}\n")
    golden("quarantine/recovered.file.yml", written)


def test_a_test_that_flakes_again_inside_the_window_stays(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG_PATH, "quarantine:\n  clean_runs: 5\n  clean_days: 3\n")
    github.add_file(REPO, QUARANTINE_PATH, _file((TEST, "all")))
    outcomes = ["fail", "pass", "pass", "pass", "fail", "pass", "pass", "pass"]
    reports = [_push(store, github, n, outcome) for n, outcome in enumerate(outcomes, 1)]
    assert all(r.leaving == () for r in reports)
    assert github.pulls_opened(REPO) == []

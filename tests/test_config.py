"""``.github/flaketally.yml``: the schema, reading and merging the files, the CLI, and each key changing what
the App does (through the pipeline, the store on SQLite and PostgreSQL, and the fake GitHub)."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.cli import main
from bot.config.load import CONFIG_PATH, Source, resolve
from bot.config.schema import MAX_FILE_BYTES, reference
from bot.core.findings import CommitReport
from bot.core.verdicts import CommitVerdict
from bot.pipeline.attempt import process_workflow_run
from bot.store import Store
from tests.github_fake import FakeGitHub, FakeRun, zip_of
from tests.test_end_to_end import junit

ROOT = Path(__file__).resolve().parent.parent
REPO = "acme/widgets"
ORG = "acme/.github"
REPO_FILE = f"{REPO}:{CONFIG_PATH}"
ORG_FILE = f"{ORG}:{CONFIG_PATH}"


# --- reading and merging ---------------------------------------------------------------------------


def test_the_repository_overrides_the_organisation_key_by_key_inside_sections_too() -> None:
    org = Source(ORG_FILE, "rerun: failed-jobs\nrates:\n  currency: EUR\n  developer_per_minute: 2\n")
    repo = Source(REPO_FILE, "rates:\n  currency: CHF\nsingle_fail: failing\n")
    effective = resolve([org, repo])
    config = effective.config
    assert (config.rerun.value, config.rates.currency, config.rates.developer_per_minute) == ("failed-jobs", "CHF", 2)
    assert config.policy is CommitVerdict.FAILING
    assert effective.problems == ()
    lines = effective.lines()
    assert f"rates.currency: CHF ({REPO_FILE})" in lines
    assert f"rates.developer_per_minute: 2.0 ({ORG_FILE})" in lines
    assert f"rerun: failed-jobs ({ORG_FILE})" in lines
    assert "rates.compute_per_minute: 0.008 (default)" in lines


def test_a_wrong_key_is_named_and_left_out_while_the_others_count() -> None:
    repo = Source(REPO_FILE, "comment: sometimes\nrates:\n  currency: 12\nretries: 3\nsingle_fail: flaky\n")
    effective = resolve([Source(ORG_FILE, "comment: always\n"), repo])
    assert effective.config.comment.value == "always"  # the organisation's value stands for the wrong one
    assert effective.config.rates.currency == "USD"
    assert effective.config.policy is CommitVerdict.FLAKY
    assert effective.problems == (
        f"{REPO_FILE}: `comment` is wrong: input should be 'on-failure', 'always' or 'off'; it is left out",
        f"{REPO_FILE}: `rates.currency` is wrong: input should be a valid string; it is left out",
        f"{REPO_FILE}: `retries` is not a key Flaketally knows (see `flaketally config schema`); it is left out",
    )


def test_yaml_reads_a_bare_off_as_false_and_it_means_off() -> None:
    effective = resolve(
        [Source(ORG_FILE, "rerun: failed-jobs\ncomment: always\n"), Source(REPO_FILE, "rerun: off\ncomment: off\n")]
    )
    assert (effective.config.rerun.value, effective.config.comment.value, effective.problems) == ("off", "off", ())


@pytest.mark.parametrize(
    ("text", "problem"),
    [
        ("rerun: [", "not valid YAML at line 1; the defaults apply"),
        ("- rerun\n", "a mapping of keys was expected, not list"),
        ("x" * (MAX_FILE_BYTES + 1), f"larger than {MAX_FILE_BYTES // 1024} KiB, not read; the defaults apply"),
        ("history:\n  stable_below: 0.2\n", "`history` is wrong: stable_below (0.2) must be below flaky_above"),
    ],
    ids=["bad yaml", "not a mapping", "oversized", "thresholds out of order"],
)
def test_a_file_that_cannot_be_used_gives_the_defaults_and_says_why(text: str, problem: str) -> None:
    effective = resolve([Source(REPO_FILE, text)])
    assert effective.config == resolve([]).config
    (said,) = effective.problems
    assert said.startswith(f"{REPO_FILE}: {problem}")


def test_values_valid_alone_but_not_together_fall_back_to_the_defaults() -> None:
    org = Source(ORG_FILE, "history:\n  stable_below: 0.08\n")
    repo = Source(REPO_FILE, "history:\n  flaky_above: 0.06\n")
    effective = resolve([org, repo])
    assert (effective.config.history.stable_below, effective.config.history.flaky_above) == (0.05, 0.10)
    assert "once the files are merged" in effective.problems[0]


def test_an_empty_or_absent_file_is_the_defaults_without_a_problem() -> None:
    assert resolve([Source(REPO_FILE, ""), Source(ORG_FILE, None)]).problems == ()


def test_the_readme_documents_every_key_from_the_schema_itself() -> None:
    assert reference() in (ROOT / "README.md").read_text(encoding="utf-8"), "run `flaketally config schema`"


# --- the CLI ---------------------------------------------------------------------------------------


def test_config_check_says_what_is_wrong_and_exits_1(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    good = tmp_path / "org.yml"
    good.write_text("rates:\n  currency: EUR\n")
    bad = tmp_path / "flaketally.yml"
    bad.write_text("gate:\n  known_flaky: maybe\n")
    assert main(["config", "check", str(good)]) == 0
    assert "ok\t" in capsys.readouterr().out
    assert main(["config", "check", str(good), str(bad)]) == 1
    out = capsys.readouterr().out
    assert f"problem\t{bad}: `gate.known_flaky` is wrong: input should be 'success', 'neutral' or 'failure'" in out
    assert f"key\trates.currency: EUR ({good})" in out
    assert main(["config", "check", str(tmp_path / "missing.yml")]) == 2
    assert "cannot be read" in capsys.readouterr().err


def test_config_schema_prints_the_reference(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["config", "schema"]) == 0
    assert capsys.readouterr().out == reference() + "\n"


def test_config_show_reads_the_files_as_the_installation_does(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    github.add_file(ORG, CONFIG_PATH, "rates:\n  currency: EUR\n")
    github.add_file(REPO, CONFIG_PATH, "comment: always\n")
    for name, value in {
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_APP_PRIVATE_KEY": github.private_key,
        "GITHUB_WEBHOOK_SECRET": "s",
        "GITHUB_API_URL": github.api_url,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'show.db'}",
    }.items():
        monkeypatch.setenv(name, value)
    assert main(["config", "show", "--repo", REPO]) == 0
    out = capsys.readouterr().out
    assert f"key\trates.currency: EUR ({ORG_FILE})" in out and f"key\tcomment: always ({REPO_FILE})" in out
    assert main(["config", "show", "--repo", "acme/elsewhere"]) == 2
    assert "the App is not installed on acme/elsewhere (404)" in capsys.readouterr().err


# --- every key through the App ---------------------------------------------------------------------


def pr_run(github: FakeGitHub, *attempts: dict[str, str], artifact: str = "junit-results") -> FakeRun:
    run = github.add_run(REPO, pull_requests=[7], attempts=len(attempts))
    for n, outcomes in enumerate(attempts, 1):
        failed = "fail" in outcomes.values()
        github.add_job(run, attempt=n, name="test (3.11)", conclusion="failure" if failed else "success")
        github.add_artifact(run, artifact, zip_of({"junit.xml": junit(**outcomes)}), attempt=n)
    return run


def process(store: Store, github: FakeGitHub, run: FakeRun) -> CommitReport:
    with github.port() as gh:
        report = process_workflow_run(
            store, gh, installation_id=77, repo=REPO, repo_id=1, run_id=run.id, attempt=len(run.attempts)
        )
    assert report is not None
    return report


def check(github: FakeGitHub, run: FakeRun) -> tuple[str | None, str, str]:
    found = [c for c in github.check_runs.values() if c.external_id == f"{run.id}:{len(run.attempts)}"]
    (one,) = found
    return one.conclusion, one.output["summary"], one.output.get("text") or ""


def test_an_unchanged_file_is_asked_with_its_etag_and_answered_304(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG_PATH, "rates:\n  currency: EUR\n")
    for _ in range(2):
        report = process(store, github, pr_run(github, {"test_apply_coupon": "pass"}))
        assert report.rates.currency == "EUR"
    reads = [c for c in github.calls("get_content") if c.path.startswith(f"/repos/{REPO}/contents/{CONFIG_PATH}")]
    assert len(reads) == 2
    assert "if-none-match" not in {k.lower() for k in reads[0].params}
    assert [a for a in github.content_answers if a[1] == CONFIG_PATH][-1] == (REPO, CONFIG_PATH, 304)
    github.add_file(REPO, CONFIG_PATH, "rates:\n  currency: CHF\n")  # changed on the default branch
    assert process(store, github, pr_run(github, {"test_apply_coupon": "pass"})).rates.currency == "CHF"
    assert [a for a in github.content_answers if a[1] == CONFIG_PATH][-1] == (REPO, CONFIG_PATH, 200)


def test_an_invalid_file_gives_the_defaults_and_the_check_run_names_the_key(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG_PATH, "single_fail: sometimes\nrates:\n  currency: EUR\n")
    run = pr_run(github, {"test_apply_coupon": "fail"})
    report = process(store, github, run)
    assert report.policy is CommitVerdict.UNDETERMINED and report.rates.currency == "EUR"
    _, summary, text = check(github, run)
    said = "Configuration: acme/widgets:.github/flaketally.yml: `single_fail` is wrong: input should be 'undetermined'"
    assert said in summary.replace("\\", "")  # Markdown escapes
    assert "`rates.currency: EUR (acme/widgets:.github/flaketally.yml)`" in text
    assert "`single_fail: undetermined (default)`" in text


@pytest.mark.parametrize(
    ("mode", "comments_on_a_green_run", "comments_on_a_red_run"),
    [("on-failure", 0, 1), ("always", 1, 1), ("off", 0, 0)],
)
def test_comment_mode(
    store: Store, github: FakeGitHub, mode: str, comments_on_a_green_run: int, comments_on_a_red_run: int
) -> None:
    github.add_file(REPO, CONFIG_PATH, f"comment: {mode}\n")
    process(store, github, pr_run(github, {"test_apply_coupon": "pass"}))
    assert len(github.comments_on(REPO, 7)) == comments_on_a_green_run
    process(store, github, pr_run(github, {"test_apply_coupon": "fail"}))
    assert len(github.comments_on(REPO, 7)) == comments_on_a_red_run


def test_single_fail_policy(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG_PATH, "single_fail: failing\n")
    run = pr_run(github, {"test_apply_coupon": "fail"})
    report = process(store, github, run)
    assert [f.verdict for f in report.findings] == [CommitVerdict.FAILING]
    assert check(github, run)[0] == "failure"


def test_rates_and_currency(store: Store, github: FakeGitHub) -> None:
    github.add_file(ORG, CONFIG_PATH, "rates:\n  currency: EUR\n  developer_per_minute: 2\n")
    github.add_file(REPO, CONFIG_PATH, "rates:\n  developer_minutes_per_event: 10\n")
    process(store, github, pr_run(github, {"test_apply_coupon": "fail"}, {"test_apply_coupon": "pass"}))
    (comment,) = github.comments_on(REPO, 7)
    assert "20.00 EUR so far (20.00 for 10 developer minutes per flaky event at 2.00 EUR/min" in comment.body


def known_flaky_then_a_single_failure(store: Store, github: FakeGitHub) -> FakeRun:
    """The test failed and passed on an earlier commit (known flaky), then fails once on this one."""
    earlier = github.add_run(REPO, head_sha="0bd1e5d0c5e9d7b1a2f4e6c8d0b2a4c6e8f0a2b4", event="push", attempts=2)
    for n, outcome in ((1, "fail"), (2, "pass")):
        github.add_job(earlier, attempt=n, name="test (3.11)")
        github.add_artifact(earlier, "junit-results", zip_of({"j.xml": junit(test_apply_coupon=outcome)}), attempt=n)
    process(store, github, earlier)
    github.now += 3 * 86400
    return pr_run(github, {"test_apply_coupon": "fail"})


@pytest.mark.parametrize("conclusion", ["neutral", "failure", "success"])
def test_gate_for_a_known_flake_not_rerun(store: Store, github: FakeGitHub, conclusion: str) -> None:
    if conclusion != "neutral":
        github.add_file(REPO, CONFIG_PATH, f"gate:\n  known_flaky: {conclusion}\n")
    run = known_flaky_then_a_single_failure(store, github)
    process(store, github, run)
    got, summary, _ = check(github, run)
    assert got == conclusion
    shown = "`tests/payments/test_checkout.py::test_apply_coupon`"
    assert summary.startswith(f"{conclusion.capitalize()}: {shown} failed once and is known flaky")


def test_history_window(store: Store, github: FakeGitHub) -> None:
    """With a 2-day window the flake 3 days ago is not read: the single failure has no flaky history."""
    github.add_file(REPO, CONFIG_PATH, "history:\n  window_days: 2\n")
    run = known_flaky_then_a_single_failure(store, github)
    process(store, github, run)
    conclusion, summary, _ = check(github, run)
    assert conclusion == "failure" and "has no flaky history" in summary


def test_artifact_patterns(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG_PATH, "artifacts: ['junit-*']\n")
    run = pr_run(github, {"test_apply_coupon": "fail"}, artifact="e2e-reports")
    report = process(store, github, run)
    assert report.reports == 0 and github.calls("download_artifact") == []


def test_ignored_tests_are_stored_but_never_judged_nor_shown(store: Store, github: FakeGitHub) -> None:
    github.add_file(REPO, CONFIG_PATH, "ignore: ['*::test_apply_*']\n")
    run = pr_run(github, {"test_apply_coupon": "fail", "test_total": "pass"})
    report = process(store, github, run)
    assert report.findings == () and report.tests_seen == 2
    assert check(github, run)[0] == "success"
    assert github.comments_on(REPO, 7) == []


def test_the_readme_example_is_a_valid_file(tmp_path: Path) -> None:
    readme = (ROOT / "README.md").read_text(encoding="utf-8")
    example = readme.split("```yaml\n# .github/flaketally.yml\n", 1)[1].split("```", 1)[0]
    effective = resolve([Source("README example", example)])
    assert effective.problems == () and effective.config.rates.currency == "EUR"


def test_thresholds_change_the_history_verdict() -> None:
    """A test failing now and then across commits: flaky by the default threshold, not by a stricter one,
    and out of a short window entirely."""
    from bot.core.verdicts import TestVerdict, history_judgement
    from tests.test_verdicts import history, obs

    runs = [obs(f"c{i:02d}", "F" if i % 3 == 0 else "P", order=i, days_ago=40 - i) for i in range(40)]
    flaky = history(*runs)
    assert history_judgement(flaky).verdict is TestVerdict.FLAKY
    strict = resolve([Source(REPO_FILE, "history:\n  flaky_above: 0.9\n  stable_below: 0.01\n")]).config
    assert history_judgement(flaky, strict.history.thresholds()).verdict is TestVerdict.INSUFFICIENT_DATA
    short = resolve([Source(REPO_FILE, "history:\n  window_days: 2\n")]).config
    assert history_judgement(flaky, short.history.thresholds()).observations < 5

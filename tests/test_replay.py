"""``flaketally replay``: the whole pipeline for one delivery against local zips, printing what it posts."""

from __future__ import annotations

import json
import zipfile
from pathlib import Path

import pytest

from bot.cli import main
from tests.conftest import shared_path

SHA = "3484a3fb816e0859fd6e1cea078d76385ff50625"


def payload(attempt: int) -> dict[str, object]:
    """The keys a workflow_run completed delivery carries that the pipeline reads (official example shape)."""
    return {
        "action": "completed",
        "installation": {"id": 1},
        "repository": {"id": 186853002, "full_name": "octo-org/octo-repo"},
        "workflow_run": {
            "id": 289782451,
            "run_attempt": attempt,
            "head_sha": SHA,
            "head_branch": "feature",
            "event": "pull_request",
            "status": "completed",
            "conclusion": "failure",
            "path": ".github/workflows/test.yml",
            "name": "Test",
            "run_number": 163,
            "html_url": "https://github.com/octo-org/octo-repo/actions/runs/289782451",
            "run_started_at": f"2026-12-01T1{attempt}:00:00Z",
            "updated_at": f"2026-12-01T1{attempt}:10:00Z",
            "pull_requests": [{"number": 2}],
            "head_repository": {"full_name": "octo-org/octo-repo"},
        },
    }


def artifacts(folder: Path, outcome: str) -> Path:
    folder.mkdir()
    body = '<failure message="AssertionError: discount not applied"/>' if outcome == "fail" else ""
    report = f'<testsuite name="pytest"><testcase classname="tests.checkout" name="test_coupon">{body}</testcase>'
    with zipfile.ZipFile(folder / "junit-results.zip", "w") as z:
        z.writestr("junit.xml", report + '<testcase classname="tests.checkout" name="test_total"/></testsuite>')
    return folder


def replay(tmp_path: Path, attempt: int, outcome: str, *extra: str) -> tuple[int, str]:
    path = tmp_path / f"payload-{attempt}.json"
    path.write_text(json.dumps(payload(attempt)))
    folder = artifacts(tmp_path / f"artifacts-{attempt}", outcome)
    return main(["replay", str(path), "--artifacts", str(folder), *extra]), str(path)


def test_dry_run_prints_the_check_run_and_the_comment(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    code, _ = replay(tmp_path, 1, "fail", "--dry-run")
    out = capsys.readouterr().out
    assert code == 0
    assert f"=== check run 'Flaketally' on {SHA}: completed, conclusion failure" in out
    assert "failure .github/workflows/test.yml:1 tests/checkout.py::test_coupon" in out
    assert "=== comment on pull request #2 (new)" in out
    assert "**undetermined**" in out
    assert not list(tmp_path.glob("*.db"))  # a dry run keeps nothing


def test_two_attempts_replayed_into_a_store_show_the_flake(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    db = str(tmp_path / "replay.db")
    replay(tmp_path, 1, "fail", "--db", db)
    capsys.readouterr()
    replay(tmp_path, 2, "pass", "--db", db)
    out = capsys.readouterr().out
    assert "conclusion success" in out
    assert "**flaky**" in out
    assert "failed on attempt 1 of run 289782451; passed on attempt 2 of run 289782451" in out.replace("\\", "")


def test_a_bad_payload_is_a_usage_error(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    bad = tmp_path / "bad.json"
    bad.write_text('{"action": "opened"}')
    folder = artifacts(tmp_path / "a", "pass")
    assert main(["replay", str(bad), "--artifacts", str(folder), "--dry-run"]) == 2
    assert "not a workflow_run completed delivery" in capsys.readouterr().err


@pytest.mark.shared
def test_the_official_example_payload_replays(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    example = shared_path("github", "webhooks", "workflow_run.completed.with-pull-requests.payload.json")
    folder = artifacts(tmp_path / "a", "fail")
    assert main(["replay", str(example), "--artifacts", str(folder), "--dry-run"]) == 0
    assert "=== comment on pull request #2 (new)" in capsys.readouterr().out

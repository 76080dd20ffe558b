"""The FlakeLedger worked example: its labels and its cost table, exactly."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from bot.cli import main

SAMPLES = Path(__file__).parent / "fixtures" / "flakeledger"

EXPECTED = {
    ("tests.payments.test_checkout::test_apply_coupon", "a1b2c3"): ("flaky", 2, 1, 1),
    ("tests.payments.test_checkout::test_apply_coupon", "d4e5f6"): ("flaky", 2, 1, 1),
    ("tests.integration.test_sync::test_replica_catchup", "b7c8d9"): ("flaky", 2, 1, 1),
    ("tests.reports.test_export::test_pdf_header", "a1b2c3"): ("failing", 2, 0, 2),
    ("tests.reports.test_export::test_pdf_header", "d4e5f6"): ("failing", 2, 0, 2),
}


def run_json(capsys: pytest.CaptureFixture[str], *args: str) -> tuple[int, dict]:  # type: ignore[type-arg]
    code = main(["analyze", *args, "--format", "json"])
    return code, json.loads(capsys.readouterr().out)


def test_labels_match_the_worked_example(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    code, doc = run_json(capsys, str(SAMPLES), "--db", store_url)
    assert code == 1
    judged = {
        (t["id"], c["sha"]): (c["verdict"], c["attempts"], c["passed"], c["failed"])
        for t in doc["tests"]
        for c in t["commits"]
    }
    assert judged == EXPECTED
    # the nine other (test, commit) pairs passed on every attempt: counted, not listed
    assert sum(t["passing_commits"] for t in doc["tests"]) == 9
    assert doc["policy"] == {"single_fail": "undetermined"}


def test_cost_table_is_exact(store_url: str, capsys: pytest.CaptureFixture[str]) -> None:
    _, doc = run_json(capsys, str(SAMPLES), "--db", store_url)
    by_id = {t["id"]: t["cost"] for t in doc["tests"]}
    coupon = by_id["tests.payments.test_checkout::test_apply_coupon"]
    replica = by_id["tests.integration.test_sync::test_replica_catchup"]
    assert coupon["events"] == 2 and replica["events"] == 1
    assert round(coupon["wasted_compute_minutes"], 3) == 0.028
    assert round(replica["wasted_compute_minutes"], 3) == 0.075
    assert (round(coupon["compute"], 4), round(coupon["developer"], 4), round(coupon["total"], 4)) == (
        0.0002,
        45.0,
        45.0002,
    )
    assert (round(replica["compute"], 4), round(replica["total"], 4)) == (0.0006, 22.5006)
    assert [r["id"] for r in doc["ranking"]] == [
        "tests.payments.test_checkout::test_apply_coupon",
        "tests.integration.test_sync::test_replica_catchup",
    ]
    assert f"{doc['total_cost']:.4f}" == "67.5008"
    assert doc["currency"] == "USD"


def test_text_output_states_the_total(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["analyze", str(SAMPLES), "--db", str(tmp_path / "s.db")]) == 1
    out = capsys.readouterr().out
    assert "total\t67.5008 USD\n" in out
    assert "policy\tsingle-fail=undetermined\n" in out

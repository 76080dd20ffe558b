"""The benchmarks read what the App posts; this keeps their reading in step with the bodies (a changed
table must not make a benchmark report zero flaky tests)."""

from __future__ import annotations

from pathlib import Path

from bench.replay import words_in

GOLDEN = Path(__file__).parent / "golden"


def test_the_replay_reads_the_words_of_a_check_runs_summary() -> None:
    summary = (GOLDEN / "attempt2-flaky.check.md").read_text().split("## summary\n", 1)[1].split("\n## text")[0]
    assert words_in(summary) == [("test_apply_coupon", "ubuntu-latest", "flaky")]
    lines = summary.replace("Context: `.github/workflows/ci.yml · test (3.11) · ubuntu-latest`\n", "").splitlines()
    row = next(n for n, line in enumerate(lines) if line.startswith("| `tests/"))
    lines[row] = lines[row].removesuffix(" |") + "<br>`ci.yml · test · windows-latest` |"  # a context per row
    several = "\n".join(lines)
    assert words_in(several) == [("test_apply_coupon", "windows-latest", "flaky")]

"""What people read: Flaketally's own sentences plain, outside text inert."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.render.findings import money, prose

GOLDEN = Path(__file__).parent / "golden"


@pytest.mark.parametrize(
    "path",
    sorted(p for p in GOLDEN.rglob("*.md") if not p.name.startswith("injection")),
    ids=lambda p: str(p.relative_to(GOLDEN)),
)
def test_flaketallys_own_sentences_carry_no_backslash_escape(path: Path) -> None:
    """Every body Flaketally sent in the golden cases (each word, each gate, reruns, recovery, the order
    histories) reads without a Markdown escape: only outside text is ever escaped."""
    markdown = path.read_text(encoding="utf-8").split("\n## annotations\n", 1)[0]  # annotations are JSON lines
    assert "\\" not in markdown


@pytest.mark.parametrize(
    ("outside", "shown"),
    [
        ("feature/x_y", "feature/x\\_y"),
        ("<img src=x>", "\\<img src=x>"),
        ("0.000 < 0.05", "0.000 < 0.05"),
        ("@octocat [see](https://evil)", "\\@octocat \\[see\\](https://evil)"),
        ("# heading", "\\# heading"),
        ("a | b", "a \\| b"),
        ("3.11-ubuntu: ok (fine)", "3.11-ubuntu: ok (fine)"),
    ],
)
def test_prose_escapes_only_what_markdown_would_act_on(outside: str, shown: str) -> None:
    assert prose(outside) == shown


def test_money_is_to_the_cent_and_never_a_rounded_away_zero() -> None:
    assert (money(22.5), money(0.0002), money(0.0), money(0.016)) == ("22.50", "< 0.01", "0.00", "0.02")

"""What people read: Flaketally's own sentences plain, outside text inert."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.pipeline.attempt import process_workflow_run
from bot.render.findings import money, prose
from bot.store import Store
from tests.github_fake import FakeGitHub, zip_of

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


def test_a_pytest_failure_is_annotated_where_its_traceback_points_with_the_trace_beside_it(
    store: Store, github: FakeGitHub
) -> None:
    """pytest's xunit2 report has no file and line: the traceback's frame in the repository gives them."""
    trace = (
        "def test_total():\n        cart = Cart(items=3)\n&gt;       assert cart.total() == 90\n"
        "E       assert 100 == 90\n\ntests/shop/test_cart.py:44: AssertionError"
    )
    xml = (
        '<testsuites><testsuite name="pytest" tests="1"><testcase classname="tests.shop.test_cart" '
        f'name="test_total" time="0.1"><failure message="assert 100 == 90">{trace}</failure></testcase>'
        "</testsuite></testsuites>"
    )
    run = github.add_run("acme/widgets", pull_requests=[7])
    github.add_job(run, attempt=1, name="test", conclusion="failure")
    github.add_artifact(run, "junit", zip_of({"junit.xml": xml.encode()}), attempt=1)
    with github.port() as gh:
        process_workflow_run(store, gh, installation_id=77, repo="acme/widgets", repo_id=1, run_id=run.id, attempt=1)
    (check,) = github.check_runs.values()
    (annotation,) = check.annotations
    assert (annotation["path"], annotation["start_line"]) == ("tests/shop/test_cart.py", 44)
    assert annotation["title"].startswith("tests/shop/test_cart.py::test_total")
    assert "E       assert 100 == 90" in annotation["raw_details"]
    (comment,) = github.comments_on("acme/widgets", 7)
    assert "<details><summary>Failure of <code>tests/shop/test_cart.py::test_total</code></summary>" in comment.body
    assert ">       assert cart.total() == 90" in comment.body
    assert "/blob/3484a3f0c5e9d7b1a2f4e6c8d0b2a4c6e8f0a2b4/tests/shop/test_cart.py#L44" in comment.body

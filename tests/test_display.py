"""Display ids: each runner's test as that runner prints it, so it can be pasted into a command."""

from __future__ import annotations

import pytest

from bot.core.display import display_id
from bot.core.junit import parse
from tests.conftest import FIXTURES

# runner (tests/fixtures/junit/<runner>.xml, from ../shared/corpus/real-runners) → the display id of its
# parameterised case b, or of flaky_p30 where the runner writes no parameters
SHOWN = {
    "pytest": "tests/test_planted.py::test_param[b]",
    "pytest-rerunfailures": "tests/test_planted.py::test_param[b]",
    "jest": "planted param[b]",
    "jest-retry": "planted param[b]",
    "vitest": "planted.test.js > planted > param[b]",
    "mocha": "planted param[b]",
    "playwright": "planted.spec.js › planted › param[b]",
    "playwright-include-retries": "planted.spec.js › planted › param[b]",
    "gotestsum": "example.com/planted.Test_param/b",
    "gotestsum-rerun": "example.com/planted.Test_param/b",
    "surefire": "com.example.planted.ParamTest.param[b]",
    "surefire-rerun": "com.example.planted.ParamTest.param[b]",
    "cargo-libtest": "integration::param::b",
    "nextest": "planted::planted::param::b",
}


@pytest.mark.parametrize("runner", sorted(SHOWN))
def test_each_runners_test_is_shown_as_the_runner_prints_it(runner: str) -> None:
    with (FIXTURES / "junit" / f"{runner}.xml").open("rb") as stream:
        report = parse(stream)
    shown = {display_id(r.classname, r.name, r.file, r.project) for r in report.results}
    assert SHOWN[runner] in shown
    assert len(shown) == len(report.results)  # as distinct as the ids


@pytest.mark.parametrize(
    ("classname", "name", "file", "project", "shown"),
    [
        (
            "tests.payments.test_checkout",
            "test_apply",
            "tests/payments/test_checkout.py",
            None,
            "tests/payments/test_checkout.py::test_apply",
        ),
        ("tests.test_cart.TestCart", "test_total[eur]", None, None, "tests/test_cart.py::TestCart::test_total[eur]"),
        (
            "tests.test_cart.TestCart",
            "test_total",
            "tests/test_cart.py",
            None,
            "tests/test_cart.py::TestCart::test_total",
        ),
        ("checkout.spec.ts", "cart › total", None, "firefox", "checkout.spec.ts › cart › total [firefox]"),
        ("Cart total", "Cart total adds tax", "src/cart.test.ts", None, "src/cart.test.ts › Cart total adds tax"),
        ("com.acme.Cart", "total", None, None, "com.acme.Cart.total"),
        ("Cart", "total", None, None, "Cart::total"),
    ],
    ids=[
        "pytest with file",
        "pytest class",
        "pytest class and file",
        "playwright project",
        "jest with file",
        "junit",
        "other",
    ],
)
def test_display_ids(classname: str, name: str, file: str | None, project: str | None, shown: str) -> None:
    assert display_id(classname, name, file, project) == shown

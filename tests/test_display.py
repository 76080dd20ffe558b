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


def test_a_bare_file_name_is_used_only_where_the_tests_own_name_places_it() -> None:
    from bot.core.display import failure_frame, source_location

    vitest = "AssertionError: expected 1\n ❯ planted.test.js:15:21\n ❯ helper.js:3:1"
    assert failure_frame(vitest, "planted.test.js") == ("planted.test.js", 15)
    assert failure_frame(" ❯ helper.js:3:1") is None  # which folder it is in, nothing says
    go = "=== RUN   TestX\n    x_test.go:81: want 4\n--- FAIL: TestX"
    assert failure_frame(go, "github.com/acme/widgets/internal/store") == ("internal/store/x_test.go", 81)
    assert failure_frame(go, "github.com/acme/widgets") == ("x_test.go", 81)
    assert failure_frame(go, "example.com/planted") is None  # where the module sits in the repo is unknown
    jest = "at Object.toEqual (/tmp/build/planted.test.js:16:32)"
    assert failure_frame(jest, "planted.test.js") is None  # absolute, outside GitHub's workspace
    assert source_location("m", "src/a.py", 3, "tests/b.py:9: boom") == ("src/a.py", 3)  # the report's own first
    assert source_location("tests.test_b", None, None, "tests/b.py:9: AssertionError") == ("tests/b.py", 9)

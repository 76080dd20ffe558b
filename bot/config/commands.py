"""``flaketally config check`` and ``flaketally config schema``: the configuration without GitHub, for a
pre-commit hook, a CI step, or a person writing the file."""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

from bot.config.load import Effective, Source, resolve
from bot.config.quarantine import parse_quarantine
from bot.config.schema import reference


def check(files: Sequence[str]) -> tuple[int, str]:
    """(exit code, what to print): each file's problems, then the configuration in force when the files
    are read in the order given (an organisation's first, then the repository's). A file whose name says
    ``quarantine`` is checked as a quarantine file, and its entries listed. 0 when every key is right, 1 when
    something is wrong, 2 when a file cannot be read."""
    sources: list[Source] = []
    quarantines: list[Source] = []
    for name in files:
        try:
            source = Source(name, Path(name).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            return 2, f"flaketally: {name} cannot be read: {exc}\n"
        (quarantines if "quarantine" in Path(name).name else sources).append(source)
    effective = resolve(sources)
    problems = list(effective.problems)
    lines = []
    for source in quarantines:
        quarantine, found = parse_quarantine(source, effective.config.quarantine)
        problems += found
        lines += [f"quarantined\t{e.test}\t{e.context}\tsince {e.since}\t{e.reason}" for e in quarantine.entries]
    ok = [f"ok\t{', '.join(files)}: every key is valid"]
    shown = [*(f"problem\t{p}" for p in problems), *(ok if not problems else []), *lines]
    if sources or not quarantines:
        shown += show(effective)
    return (1 if problems else 0), "\n".join(shown) + "\n"


def show(effective: Effective) -> list[str]:
    return [f"key\t{line}" for line in effective.lines()]


def schema() -> str:
    return reference() + "\n"

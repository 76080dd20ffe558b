"""The quarantine file (``.github/flaketally-quarantine.yml``, or the path ``quarantine.file`` names): read
into ``bot.core.quarantine.Quarantine``, and written back when a pull request adds or removes entries.

Like the configuration, a file never stops anything: an entry that is wrong is named with why and left
out, and every other entry still counts. The file reads:

    quarantine:
      - test: tests/test_checkout.py::test_apply_coupon
        context: ci.yml · test (3.12) · ubuntu-latest    # or: all
        reason: flaky on 4 of 20 commits in 30 days, 90.00 USD
        since: 2026-11-30
        owner: alice                                       # optional
        issue: https://github.com/acme/shop/issues/12      # optional
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import yaml
from pydantic import ValidationError

from bot.config.load import Source
from bot.config.schema import DEFAULT, MAX_FILE_BYTES, MAX_QUARANTINED, QuarantineConfig, QuarantineEntry
from bot.core.quarantine import Entry, Quarantine

HEADER = (
    "# Tests taken out of Flaketally's gate until they are fixed: their failures are still observed and shown.\n"
    "# Each entry: the test as its runner prints it, its execution context (or `all`), why, and since when.\n"
    "# Flaketally proposes changes to this file by pull request; edit it by hand the same way.\n"
)


def parse_quarantine(source: Source, settings: QuarantineConfig = DEFAULT.quarantine) -> tuple[Quarantine, list[str]]:
    """The entries of one quarantine file, and a sentence for everything wrong in it (no file: none)."""
    empty = Quarantine((), settings.clean_runs, settings.clean_days)
    if source.text is None:
        return empty, []
    if len(source.text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        return empty, [f"{source.where}: larger than {MAX_FILE_BYTES // 1024} KiB, not read; nothing is quarantined"]
    try:
        document = yaml.safe_load(source.text)
    except yaml.YAMLError as exc:
        mark = getattr(exc, "problem_mark", None)
        at = f" at line {mark.line + 1}" if mark is not None else ""
        return empty, [f"{source.where}: not valid YAML{at}; nothing is quarantined"]
    if document is None:
        return empty, []
    if not isinstance(document, dict) or set(document) - {"quarantine"}:
        return empty, [f"{source.where}: expected one key, `quarantine:`, a list of entries; nothing is quarantined"]
    raw = document.get("quarantine") or []
    if not isinstance(raw, list):
        return empty, [f"{source.where}: `quarantine` must be a list of entries; nothing is quarantined"]
    entries: list[Entry] = []
    problems: list[str] = []
    seen: set[tuple[str, str]] = set()
    for number, item in enumerate(raw[:MAX_QUARANTINED], 1):
        named = f"entry {number}" + (f" ({item['test']})" if isinstance(item, dict) and "test" in item else "")
        try:
            entry = QuarantineEntry.model_validate(item)
        except ValidationError as exc:
            problems.append(f"{source.where}: {named} {_why(exc)}; it is left out")
            continue
        key = (entry.test, entry.context)
        if key in seen:
            problems.append(f"{source.where}: {named} repeats an earlier entry for the same test and context")
            continue
        seen.add(key)
        entries.append(Entry(entry.test, entry.context, entry.reason, entry.since, entry.owner, entry.issue))
    if len(raw) > len(entries) + len(problems):
        problems.append(f"{source.where}: only the first {len(entries) + len(problems)} entries are read")
    return Quarantine(tuple(entries), settings.clean_runs, settings.clean_days), problems


def _why(exc: ValidationError) -> str:
    reasons = []
    for error in exc.errors(include_url=False):
        field = ".".join(str(part) for part in error["loc"]) or "the entry"
        if error["type"] == "extra_forbidden":
            reasons.append(f"`{field}` is not a key of an entry")
        elif error["type"] == "missing":
            reasons.append(f"`{field}` is missing")
        else:
            reasons.append(f"`{field}` is wrong: {str(error['msg']).removeprefix('Value error, ').lower()}")
    return "; ".join(reasons)


def _as_yaml(entry: Entry) -> dict[str, Any]:
    document: dict[str, Any] = {"test": entry.test, "context": entry.context, "reason": entry.reason}
    if entry.since is not None:
        document["since"] = entry.since
    if entry.owner:
        document["owner"] = entry.owner
    if entry.issue:
        document["issue"] = entry.issue
    return document


def render_quarantine(entries: Sequence[Entry]) -> str:
    """The file for ``entries``, in their order, readable by ``parse_quarantine`` (a round trip is exact)."""
    body = yaml.safe_dump(
        {"quarantine": [_as_yaml(e) for e in entries]}, sort_keys=False, allow_unicode=True, width=120
    )
    return HEADER + body

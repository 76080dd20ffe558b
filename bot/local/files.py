"""Local report files: finding them and telling which run each one came from."""

from __future__ import annotations

import json
from collections.abc import Iterable
from datetime import UTC
from pathlib import Path

from bot.core.analysis import FileWarning
from bot.core.identity import ExecutionContext, RunIdentity
from bot.core.results import Report
from bot.core.times import parse_time

META = "meta.json"


def report_files(paths: Iterable[str]) -> tuple[list[Path], list[FileWarning]]:
    """Files named on the command line as they are; directories searched for ``*.xml``."""
    found: set[Path] = set()
    warnings = []
    for name in paths:
        path = Path(name)
        if path.is_dir():
            found.update(p for p in path.rglob("*.xml") if p.is_file())
        elif path.is_file():
            found.add(path)
        else:
            warnings.append(FileWarning(name, "no such file or directory"))
    return sorted(found), warnings


def _iso(value: str | None) -> str | None:
    if not value:
        return None
    try:
        parsed = parse_time(value)
    except ValueError:
        return None
    return parsed.astimezone(UTC).isoformat(timespec="milliseconds")


def _meta(path: Path) -> tuple[dict[str, object], str | None]:
    meta_path = path.parent / META
    if not meta_path.is_file():
        return {}, None
    try:
        value = json.loads(meta_path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {}, f"{meta_path}: unreadable ({exc}); ignored"
    return (value, None) if isinstance(value, dict) else ({}, f"{meta_path}: not a JSON object; ignored")


def identify(path: Path, report: Report, repo: str) -> tuple[RunIdentity, list[FileWarning]]:
    """Run identity, in order: the report's own ``commit``/``attempt`` (attributes or properties),
    a ``meta.json`` beside it, otherwise the report is its own commit, attempt 1, with a warning."""
    meta, problem = _meta(path)
    warnings = [FileWarning(str(path), problem)] if problem else []
    commit = report.commit or (str(meta["commit"]) if meta.get("commit") else None)
    attempt = report.attempt
    if attempt is None and isinstance(meta.get("attempt"), int):
        attempt = int(meta["attempt"])  # type: ignore[call-overload]
    if commit is None:
        commit = f"local-{report.digest[:12]}"
        warnings.append(
            FileWarning(str(path), f"no commit in the report or a {META} beside it: judged alone as commit {commit}")
        )
    if attempt is None or attempt < 1:
        attempt = 1
        warnings.append(FileWarning(str(path), f"no attempt in the report or a {META} beside it: taken as attempt 1"))
    run_index = meta.get("run_index")
    context = ExecutionContext(
        job=str(meta.get("runner") or ""),
        os=str(meta.get("os") or report.os),
        arch=report.arch,
        runtime=report.runtime,
    )
    identity = RunIdentity(
        repo=repo,
        commit=commit,
        attempt=attempt,
        context=context,
        source=str(path),
        run_index=run_index if isinstance(run_index, int) else None,
        started_at=_iso(str(meta["started_at"])) if meta.get("started_at") else _iso(report.timestamp),
    )
    return identity, warnings

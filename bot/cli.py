"""flaketally: tells flaky test failures from real ones in JUnit reports, with the evidence and the cost.

Each command imports what it needs when it runs, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import importlib
import os
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from bot.cli_parser import FORMATS as FORMATS
from bot.cli_parser import SKIP_FORMATS as SKIP_FORMATS
from bot.cli_parser import parser
from bot.core import collector
from bot.core.cost import Rates
from bot.core.verdict_names import CommitVerdict
from bot.settings import Settings, SettingsError, database_url

if TYPE_CHECKING:
    from bot.core.analysis import Analysis
    from bot.store import Store

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
# bot.render.analysis.RENDERERS and the terminal table, named here so --help imports nothing
T = TypeVar("T")
PROGRESS_FROM = 20  # reports: fewer are read before a bar could be seen
# the commands whose whole handling lives in their own module (imported only when run): module, function
ELSEWHERE = {
    "run": ("bot.local.run", "run_command"),
    "hunt": ("bot.local.hunt", "hunt_command"),
    "check": ("bot.local.check", "check_command"),
    "memory": ("bot.local.recall", "memory_command"),
    "register": ("bot.admin.register", "register_command"),
    "doctor": ("bot.admin.doctor", "doctor_command"),
}


def main(argv: Sequence[str] | None = None) -> int:
    args = parser(__doc__.split("\n\n")[0]).parse_args(argv)
    commands = {
        "analyze": _analyze,
        "explain": _explain,
        "quarantine": _quarantine,
        "digest": _digest,
        "serve": _serve,
        "worker": _worker,
        "scheduler": _scheduler,
        "replay": _replay,
        "config": _config,
        "migrate": _migrate,
        "purge": _purge,
    }
    if args.command in ELSEWHERE:
        module, name = ELSEWHERE[args.command]
        command: Callable[[argparse.Namespace], int] = getattr(importlib.import_module(module), name)
        return command(args)
    return commands[args.command](args)


def _settings(*, require_app: bool) -> Settings | None:
    try:
        return Settings.from_env(require_app=require_app)
    except SettingsError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return None


def _current_store(settings: Settings) -> bool:
    """Whether the store is at the newest migration (a SQLite file is brought there); said when not."""
    from bot.store import Store, StoreError

    try:
        Store.open_current(settings.database_url).close()
    except StoreError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return False
    return True


def _serve(args: argparse.Namespace) -> int:
    settings = _settings(require_app=False)
    if settings is None or not _current_store(settings):
        return EXIT_USAGE
    from bot.web.serve import serve

    serve(settings, args.host, args.port)
    return EXIT_CLEAN


def _worker(args: argparse.Namespace) -> int:
    settings = _settings(require_app=True)
    if settings is None:
        return EXIT_USAGE
    from bot.store import StoreError
    from workers.main import run_worker

    try:
        run_worker(settings, burst=args.burst)
    except StoreError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return EXIT_USAGE
    return EXIT_CLEAN


def _scheduler(args: argparse.Namespace) -> int:
    settings = _settings(require_app=True)
    if settings is None or not _current_store(settings):
        return EXIT_USAGE
    from workers.scheduler import run_scheduler

    run_scheduler(settings)
    return EXIT_CLEAN


def _migrate(args: argparse.Namespace) -> int:
    from bot.store import SCHEMA_HEAD, Store, StoreError

    try:
        store = Store(args.db or database_url())
        try:
            done = store.migrate()
        finally:
            store.close()
    except StoreError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if done:
        print(f"flaketally: migrated the store from {done.before or 'empty'} to {SCHEMA_HEAD}")
    else:
        print(f"flaketally: the store is already at {SCHEMA_HEAD}; nothing to do")
    return EXIT_CLEAN


def _purge(args: argparse.Namespace) -> int:
    from bot.store.retention import purge_installation

    store = _open_store(args.db or database_url())
    if store is None:
        return EXIT_USAGE
    try:
        removed = purge_installation(store, args.installation)
    finally:
        store.close()
    print(f"flaketally: installation {args.installation}: {removed}")
    return EXIT_CLEAN


def _replay(args: argparse.Namespace) -> int:
    from bot.local.replay import LocalGitHub, ReplayError, load_payload, render
    from bot.pipeline.attempt import process_workflow_run
    from bot.pipeline.scope import Options

    try:
        payload = load_payload(Path(args.payload))
        github = LocalGitHub(payload, Path(args.artifacts))
    except ReplayError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return EXIT_USAGE
    with tempfile.TemporaryDirectory(prefix="flaketally-replay-") as scratch:
        store = _open_store(f"sqlite:///{scratch}/replay.db" if args.dry_run else (args.db or database_url()))
        if store is None:
            return EXIT_USAGE
        try:
            installation = payload.get("installation") or {}
            repository = payload.get("repository") or {}
            process_workflow_run(
                store,
                github,
                installation_id=int(installation.get("id") or 0),
                repo=github.repo,
                repo_id=int(repository.get("id") or 0),
                run_id=github.run.id,
                attempt=github.run.run_attempt,
                options=Options(policy=CommitVerdict(args.single_fail_policy)),
            )
        finally:
            store.close()
    sys.stdout.write(render(github))
    return EXIT_CLEAN


@collector.paused()  # judged and written out: many small objects, none in a cycle
def _analyze(args: argparse.Namespace) -> int:
    if args.top < 0:
        print("flaketally: --top must be 0 (all) or more", file=sys.stderr)
        return EXIT_USAGE
    judged = _judge(args)
    if judged is None:
        return EXIT_USAGE
    return _report(args, *judged)


def _judge(args: argparse.Namespace) -> tuple[Analysis, str] | None:
    """The reports in ``args.paths`` (and in ``--db``) judged, and where they were kept; None, having said
    why on stderr, when there is nothing to judge."""
    from bot.local.files import report_files
    from bot.local.memory import MAX_BYTES

    files, warnings = report_files(args.paths)
    if not files and not (args.db and not args.paths):
        missing = [p for p in args.paths if not Path(p).exists()]
        why = f"no such file or directory: {', '.join(missing)}" if missing else "no *.xml report in the paths given"
        print(f"flaketally: {why}", file=sys.stderr)
        return None
    if args.db and "://" not in args.db and not Path(args.db).expanduser().resolve().parent.is_dir():
        print(f"flaketally: the folder of --db {args.db} does not exist", file=sys.stderr)
        return None
    from bot.local.analyze import analyze_files

    with contextlib.ExitStack() as stack:
        progress = None
        if sys.stderr.isatty() and len(files) >= PROGRESS_FROM:
            from bot.render.table import progress_bar

            progress = stack.enter_context(progress_bar(sys.stderr))
        judged = functools.partial(
            analyze_files,
            files=files,
            warnings=warnings,
            repo=args.repo,
            policy=CommitVerdict(args.single_fail_policy),
            rates=Rates(args.compute_rate, args.developer_rate, args.developer_minutes, args.currency[:10]),
            progress=progress,
        )
        if not args.db and sum(f.stat().st_size for f in files) <= MAX_BYTES:
            # judged in memory: no database layer to import, so it starts at once
            return judged(None), "judged in memory, nothing written (--db keeps them)"
        scratch = stack.enter_context(tempfile.TemporaryDirectory(prefix="flaketally-analyze-"))
        store = _open_store(args.db or f"sqlite:///{scratch}/analysis.db")  # thrown away unless --db names one
        if store is None:
            return None
        try:
            analysis = judged(store)
        finally:
            store.close()
        return analysis, (f"stored in {args.db}" if args.db else "judged in a throwaway store (--db keeps them)")


def _explain(args: argparse.Namespace) -> int:
    if not args.paths and not args.db:
        print("flaketally: give the reports to read (PATH...) or the store that keeps them (--db)", file=sys.stderr)
        return EXIT_USAGE
    judged = _judge(args)
    if judged is None:
        return EXIT_USAGE
    from bot.local.explain import NotFound, explain, find, render

    analysis = judged[0]
    try:
        tests = find(analysis.tests, args.test, args.context)
    except NotFound as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return EXIT_USAGE
    sys.stdout.write(render([explain(t, analysis.policy) for t in tests], args.format))
    return EXIT_FINDINGS if any(t.is_finding for t in tests) else EXIT_CLEAN


def _quarantine(args: argparse.Namespace) -> int:
    from bot.config.load import Source
    from bot.config.quarantine import parse_quarantine
    from bot.config.skiplist import skip_list
    from bot.local.quarantine import most_costly_first

    db, history_repo = args.db, args.history_repo
    if args.file:
        try:
            source = Source(args.file, Path(args.file).read_text(encoding="utf-8"))
        except (OSError, UnicodeDecodeError) as exc:
            print(f"flaketally: {args.file} cannot be read: {exc}", file=sys.stderr)
            return EXIT_USAGE
        quarantine, problems = parse_quarantine(source)
    else:
        settings = _settings(require_app=True)
        if settings is None:
            return EXIT_USAGE
        from bot.pipeline.config import quarantine_of_repository

        found = _as_app(settings, args.repo, quarantine_of_repository, "the quarantine file")
        if found is None:
            return EXIT_USAGE
        quarantine, problems = found
        db, history_repo = db or settings.database_url, args.repo
    for problem in problems:
        print(f"flaketally: {problem}", file=sys.stderr)
    entries = list(quarantine.entries)
    if db and entries:
        store = _open_store(db)
        if store is None:
            return EXIT_USAGE
        try:
            from bot.core.judge import judge

            tests = [judge(h, CommitVerdict.UNDETERMINED, Rates()) for h in store.history(history_repo)]
        finally:
            store.close()
        entries = most_costly_first(entries, tests)
    skips = skip_list(entries, args.format)
    sys.stdout.write(skips.text)
    for test, why in skips.left_out:
        print(f"flaketally: left out {test}: {why}", file=sys.stderr)
    return EXIT_FINDINGS if skips.left_out else EXIT_CLEAN


def _digest(args: argparse.Namespace) -> int:
    from datetime import UTC, datetime, timedelta

    from bot.core.digest import week_of, week_start
    from bot.github.limits import DEFAULT_API_URL, web_url

    week = args.week or week_of(datetime.now(UTC) - timedelta(weeks=1))
    try:
        week_start(week)
    except ValueError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return EXIT_USAGE
    if args.post:
        return _post_digest(args.installation, week)
    server = args.server or web_url(os.environ.get("GITHUB_API_URL") or DEFAULT_API_URL)
    store = _open_store(args.db or database_url())
    if store is None:
        return EXIT_USAGE
    from bot.digest.collect import organisation_week

    try:
        found = organisation_week(store, args.installation, week)
    finally:
        store.close()
    sys.stdout.write(found.render(args.format, server))
    return EXIT_CLEAN


def _post_digest(installation_id: int, week: str) -> int:
    """``digest --post``: as the App's worker would, once (a week already posted is left alone)."""
    settings = _settings(require_app=True)
    if settings is None:
        return EXIT_USAGE
    from redis import RedisError

    from bot.github.errors import GitHubError
    from bot.store import StoreError
    from bot.store.digests import DigestState
    from workers.scheduler import post_now

    try:
        done = post_now(settings, installation_id, week)
    except (StoreError, GitHubError, RedisError) as exc:
        print(f"flaketally: the digest was not posted: {exc}", file=sys.stderr)
        return EXIT_FINDINGS
    if "skipped" in done:
        print(f"flaketally: installation {installation_id}: {done['skipped']}", file=sys.stderr)
        return EXIT_FINDINGS
    posted = done["state"] == DigestState.POSTED.value
    print(f"flaketally: {done['line']}", file=sys.stdout if posted else sys.stderr)
    return EXIT_CLEAN if posted else EXIT_FINDINGS


def _as_app(settings: Settings, repo: str, read: Callable[..., T], what: str) -> T | None:
    """``read`` of ``repo`` with the App's keys and store from ``settings``; None, having said why, when it
    fails (a usage problem to the person at the terminal, not a traceback)."""
    try:
        return read(
            app_id=settings.app_id,
            private_key=settings.private_key,
            api_url=settings.api_url,
            database_url=settings.database_url,
            repo=repo,
        )
    except Exception as exc:
        print(f"flaketally: cannot read {what} of {repo}: {exc}", file=sys.stderr)
        return None


def _open_store(url: str) -> Store | None:
    """The store at ``url``, migrated; None (having said why) when it cannot be opened."""
    from bot.store import Store, StoreError

    try:
        return Store.open(url)
    except StoreError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return None


def _render(analysis: Analysis, fmt: str, top: int) -> str:
    """The analysis in the format asked for (the table is sized for the terminal it goes to)."""
    if fmt == "table":
        import io

        from bot.render import table

        out = io.StringIO()
        table.render(analysis, out, top=top, width=shutil.get_terminal_size().columns)
        return out.getvalue()
    if fmt == "html":
        from bot.render.html import to_html

        return to_html(analysis)
    from bot.render.analysis import RENDERERS

    return RENDERERS["text" if fmt == "lines" else fmt](analysis)


def _report(args: argparse.Namespace, analysis: Analysis, where: str) -> int:
    if analysis.usable == 0:
        for warning in analysis.warnings:
            print(f"flaketally: {warning.path}: {warning.message}", file=sys.stderr)
        print("flaketally: no usable report among the paths given", file=sys.stderr)
        return EXIT_USAGE
    fmt = getattr(args, "format", None) or ("table" if sys.stdout.isatty() else "lines")
    sys.stdout.write(_render(analysis, fmt, args.top))
    # on stderr, so that the same analysis run twice prints the same bytes on stdout
    print(f"flaketally: {analysis.new_reports} new of {analysis.usable} reports {where}", file=sys.stderr)
    findings = analysis.collided_failures or any(t.is_finding for t in analysis.tests)
    return EXIT_FINDINGS if findings else EXIT_CLEAN


def _config(args: argparse.Namespace) -> int:
    from bot.config import commands

    if args.config_command == "check":
        code, text = commands.check(args.files)
        (sys.stdout if code < 2 else sys.stderr).write(text)
        return code
    if args.config_command == "schema":
        sys.stdout.write(commands.schema())
        return EXIT_CLEAN
    if args.config_command == "settings":
        from bot.settings import reference

        sys.stdout.write(reference() + "\n")
        return EXIT_CLEAN
    settings = _settings(require_app=True)
    if settings is None:
        return EXIT_USAGE
    from bot.pipeline.config import show_repository

    shown = _as_app(settings, args.repo, show_repository, "the configuration")
    if shown is None:
        return EXIT_USAGE
    sys.stdout.write(shown)
    return EXIT_CLEAN

"""flaketally: tells flaky test failures from real ones in JUnit reports, with the evidence and the cost.

Each command imports what it needs when it runs, so ``--help`` answers at once.
"""

from __future__ import annotations

import argparse
import contextlib
import functools
import shutil
import sys
import tempfile
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import TYPE_CHECKING, TypeVar

from bot import __version__
from bot.core.cost import Rates
from bot.core.verdict_names import SINGLE_FAIL_POLICIES, CommitVerdict
from bot.settings import DEFAULT_DATABASE_URL, Settings, SettingsError, database_url

if TYPE_CHECKING:
    from bot.core.analysis import Analysis
    from bot.store import Store

EXIT_CLEAN, EXIT_FINDINGS, EXIT_USAGE = 0, 1, 2
# bot.render.analysis.RENDERERS and the terminal table, named here so --help imports nothing
FORMATS = ("table", "lines", "text", "markdown", "json", "html")
SKIP_FORMATS = ("pytest", "go", "jest", "vitest", "playwright", "maven", "yaml")  # bot.config.skiplist.FORMATS
T = TypeVar("T")
PROGRESS_FROM = 20  # reports: fewer are read before a bar could be seen
EXIT_CODES = "exit codes: 0 nothing to report, 1 findings (flaky, broken or failing tests), 2 usage error or no report"


def _positive(text: str) -> float:
    try:
        value = float(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"not a number: {text!r}") from None
    if value < 0 or value != value or value == float("inf"):
        raise argparse.ArgumentTypeError(f"must be a finite number >= 0: {text!r}")
    return value


def _judging_options(parser: argparse.ArgumentParser) -> None:
    """The options of every command that judges reports: policy, rates, repository and store."""
    parser.add_argument(
        "--single-fail-policy",
        choices=[p.value for p in SINGLE_FAIL_POLICIES],
        default=CommitVerdict.UNDETERMINED.value,
        help="what a single failure with no rerun counts as",
    )
    defaults = Rates()
    parser.add_argument("--compute-rate", type=_positive, default=defaults.compute_per_minute, help="per CI minute")
    parser.add_argument("--developer-rate", type=_positive, default=defaults.developer_per_minute, help="per minute")
    parser.add_argument(
        "--developer-minutes",
        type=_positive,
        default=defaults.developer_minutes_per_event,
        help="developer minutes lost per flaky event",
    )
    parser.add_argument("--currency", default=defaults.currency, help="the label printed beside every figure")
    parser.add_argument("--repo", default="local", help="the repository name the reports are stored under")
    parser.add_argument(
        "--db",
        default=None,
        help="keep the reports in this store (a SQLite path or a database URL) to judge them again with more "
        "later; without it nothing is written",
    )


def _parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="flaketally", description=__doc__.split("\n\n")[0], epilog=EXIT_CODES)
    parser.add_argument("--version", action="version", version=f"flaketally {__version__}")
    commands = parser.add_subparsers(dest="command", required=True)
    a = commands.add_parser(
        "analyze",
        help="judge JUnit reports on local files",
        description="Judge the JUnit reports in the paths given: every test's verdict with its evidence, and what "
        "the flakes cost.",
        epilog=EXIT_CODES,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    a.add_argument("paths", nargs="+", metavar="PATH", help="report files, or directories searched for *.xml")
    a.add_argument(
        "--format",
        choices=FORMATS,
        default=argparse.SUPPRESS,  # chosen by where the output goes, said in the help
        help="table: the tests that need attention, worst first (the default on a terminal); lines (or text): one "
        "tab-separated record a line, sorted, for diffing and scripts (the default when piped); markdown: for a "
        "PR; json: versioned, everything; html: one self-contained page with a heatmap and the cost chart",
    )
    a.add_argument(
        "--top",
        type=int,
        default=20,
        metavar="N",
        help="the table shows the N worst tests; 0 shows all",
    )
    _judging_options(a)
    e = commands.add_parser(
        "explain",
        help="every commit and attempt behind one test's verdict, and why no other verdict applied",
        description="Explain one test's verdict: the judge's rules in order, which held and which did not, the "
        "score and its bound, and every commit and attempt in the window. TEST is the id as the runner prints it "
        "(as analyze shows it), or the end or a part of it when only one test matches.",
        epilog=EXIT_CODES,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    e.add_argument("test", metavar="TEST", help="the test, e.g. tests/test_x.py::test_y or just test_y")
    e.add_argument("paths", nargs="*", metavar="PATH", help="report files or directories (or none, with --db)")
    e.add_argument("--context", default=None, help="only this execution context (a part of its name will do)")
    e.add_argument("--format", choices=("text", "json"), default="text")
    _judging_options(e)
    q = commands.add_parser(
        "quarantine",
        help="the quarantined tests in the form a runner takes to skip them",
        description="Print the quarantine file's tests, most costly first, as a runner takes them: pytest "
        "--deselect arguments, a go test -skip expression, a jest/vitest --testNamePattern, a Playwright "
        "--grep-invert, a Surefire -Dtest exclusion list, or the YAML file. Tests a format cannot express are "
        "named on stderr.",
        epilog="exit codes: 0 printed, 1 some tests could not be expressed (named on stderr), 2 usage error",
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    where = q.add_mutually_exclusive_group(required=True)
    where.add_argument("--file", metavar="PATH", help="a local quarantine file")
    where.add_argument(
        "--repo", metavar="OWNER/NAME", help="the repository's file, read with the App's keys from the environment"
    )
    q.add_argument("--format", choices=SKIP_FORMATS, default="yaml")
    q.add_argument(
        "--db",
        default=None,
        help="the store whose history ranks the tests by cost (with --repo: $DATABASE_URL); without it, the "
        "file's order",
    )
    q.add_argument("--history-repo", default="local", help="with --file --db: the repository name in the store")
    d = commands.add_parser(
        "digest",
        help="an organisation's weekly flake digest, from the store (printed; no GitHub request)",
        description="The weekly digest of one installation (an organisation): the week against the one before, "
        "the cost trend, the tests to fix first, new and fixed flakes, tests left undetermined. Only that "
        "installation's repositories are read.",
        epilog=EXIT_CODES,
        formatter_class=argparse.ArgumentDefaultsHelpFormatter,
    )
    d.add_argument("--installation", type=int, required=True, metavar="ID", help="the App's installation id")
    d.add_argument("--week", default=None, metavar="YYYY-Www", help="the ISO week (default: the last complete one)")
    d.add_argument("--format", choices=("markdown", "json"), default="markdown")
    d.add_argument("--db", default=None, help=f"store URL (default: $DATABASE_URL, else ./{DEFAULT_DATABASE_URL})")
    d.add_argument("--server", default="https://github.com", help="where links to runs point (GitHub Enterprise)")
    serve = commands.add_parser("serve", help="run the webhook receiver (settings from the environment)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    worker = commands.add_parser("worker", help="run an rq worker with the scheduler (settings from the environment)")
    worker.add_argument("--burst", action="store_true", help="work through the queue, then exit")
    replay = commands.add_parser(
        "replay", help="run the whole pipeline for one delivery against local artifact zips, printing what it posts"
    )
    replay.add_argument("payload", metavar="PAYLOAD.json", help="a workflow_run completed delivery's JSON body")
    replay.add_argument("--artifacts", required=True, metavar="DIR", help="a folder of the run's artifact zips")
    replay.add_argument("--dry-run", action="store_true", help="judge in a throwaway store: nothing is kept")
    replay.add_argument("--db", default=None, help=f"store URL (default: $DATABASE_URL, else ./{DEFAULT_DATABASE_URL})")
    replay.add_argument(
        "--single-fail-policy",
        choices=[p.value for p in SINGLE_FAIL_POLICIES],
        default=CommitVerdict.UNDETERMINED.value,
    )
    config = commands.add_parser("config", help="check, explain or show the .github/flaketally.yml configuration")
    what = config.add_subparsers(dest="config_command", required=True)
    check = what.add_parser("check", help="validate local files, no GitHub needed (exit 1 when a key is wrong)")
    check.add_argument(
        "files",
        nargs="+",
        metavar="FILE",
        help="a .github/flaketally.yml (give the organisation's first to merge), or a quarantine file (its name "
        "says quarantine)",
    )
    what.add_parser("schema", help="every key: its values, default and what it does (Markdown)")
    show = what.add_parser("show", help="the configuration in force for a repository, read with the App's keys")
    show.add_argument("--repo", required=True, metavar="OWNER/NAME")
    return parser


def main(argv: Sequence[str] | None = None) -> int:
    args = _parser().parse_args(argv)
    commands = {
        "analyze": _analyze,
        "explain": _explain,
        "quarantine": _quarantine,
        "digest": _digest,
        "serve": _serve,
        "worker": _worker,
        "replay": _replay,
        "config": _config,
    }
    return commands[args.command](args)


def _settings(*, require_app: bool) -> Settings | None:
    try:
        return Settings.from_env(require_app=require_app)
    except SettingsError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return None


def _serve(args: argparse.Namespace) -> int:
    settings = _settings(require_app=False)
    if settings is None:
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
    import dataclasses
    import json
    from datetime import UTC, datetime, timedelta

    from bot.core.digest import week_of, week_start
    from bot.digest.collect import organisation_week
    from bot.render.digest import digest_markdown

    week = args.week or week_of(datetime.now(UTC) - timedelta(weeks=1))
    try:
        week_start(week)
    except ValueError as exc:
        print(f"flaketally: {exc}", file=sys.stderr)
        return EXIT_USAGE
    store = _open_store(args.db or database_url())
    if store is None:
        return EXIT_USAGE
    try:
        found = organisation_week(store, args.installation, week)
    finally:
        store.close()
    if args.format == "json":
        document = {"flaketally": "digest", "version": 1, "organisation": found.organisation}
        document |= dataclasses.asdict(found.digest) | {"rates_from": found.rates_from}
        sys.stdout.write(json.dumps(document, ensure_ascii=False, indent=2) + "\n")
    else:
        body = digest_markdown(found.digest, found.organisation, server=args.server, rates_from=found.rates_from)
        sys.stdout.write(body + "\n")
    return EXIT_CLEAN


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
    settings = _settings(require_app=True)
    if settings is None:
        return EXIT_USAGE
    from bot.pipeline.config import show_repository

    shown = _as_app(settings, args.repo, show_repository, "the configuration")
    if shown is None:
        return EXIT_USAGE
    sys.stdout.write(shown)
    return EXIT_CLEAN

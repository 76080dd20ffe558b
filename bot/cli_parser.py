"""The ``flaketally`` command line: each sub-command's arguments, their defaults and help. It imports
nothing heavy, so ``flaketally --help`` answers at once; ``bot.cli`` runs the commands."""

from __future__ import annotations

import argparse
from typing import TypeAlias

from bot import __version__
from bot.core.cost import Rates
from bot.core.verdict_names import SINGLE_FAIL_POLICIES, CommitVerdict
from bot.settings import DEFAULT_DATABASE_URL

# bot.render.analysis.RENDERERS and the terminal table, named here so --help imports nothing
FORMATS = ("table", "lines", "text", "markdown", "json", "html")
SKIP_FORMATS = ("pytest", "go", "jest", "vitest", "playwright", "maven", "yaml")  # bot.config.skiplist.FORMATS
EXIT_CODES = "exit codes: 0 nothing to report, 1 findings (flaky, broken or failing tests), 2 usage error or no report"


class _Defaults(argparse.ArgumentDefaultsHelpFormatter):
    """Help that shows each default, except where there is none to show (None, a flag's False): those
    options say in words what happens without them."""

    def _get_help_string(self, action: argparse.Action) -> str | None:
        if action.default is None or action.default is False:
            return action.help
        return super()._get_help_string(action)


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


def parser(description: str) -> argparse.ArgumentParser:
    """The ``flaketally`` command line, a sub-command each."""
    top = argparse.ArgumentParser(prog="flaketally", description=description, epilog=EXIT_CODES)
    top.add_argument("--version", action="version", version=f"flaketally {__version__}")
    commands = top.add_subparsers(dest="command", required=True)
    for add in (_analyze, _explain, _quarantine, _digest, _local, _app, _admin, _config):
        add(commands)
    return top


Commands: TypeAlias = "argparse._SubParsersAction[argparse.ArgumentParser]"


def _analyze(commands: Commands) -> None:
    a = commands.add_parser(
        "analyze",
        help="judge JUnit reports on local files",
        description="Judge the JUnit reports in the paths given: every test's verdict with its evidence, and what "
        "the flakes cost.",
        epilog=EXIT_CODES,
        formatter_class=_Defaults,
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


def _explain(commands: Commands) -> None:
    e = commands.add_parser(
        "explain",
        help="every commit and attempt behind one test's verdict, and why no other verdict applied",
        description="Explain one test's verdict: the judge's rules in order, which held and which did not, the "
        "score and its bound, and every commit and attempt in the window. TEST is the id as the runner prints it "
        "(as analyze shows it), or the end or a part of it when only one test matches.",
        epilog=EXIT_CODES,
        formatter_class=_Defaults,
    )
    e.add_argument("test", metavar="TEST", help="the test, e.g. tests/test_x.py::test_y or just test_y")
    e.add_argument("paths", nargs="*", metavar="PATH", help="report files or directories (or none, with --db)")
    e.add_argument("--context", default=None, help="only this execution context (a part of its name will do)")
    e.add_argument("--format", choices=("text", "json"), default="text")
    _judging_options(e)


def _quarantine(commands: Commands) -> None:
    q = commands.add_parser(
        "quarantine",
        help="the quarantined tests in the form a runner takes to skip them",
        description="Print the quarantine file's tests, most costly first, as a runner takes them: pytest "
        "--deselect arguments, a go test -skip expression, a jest/vitest --testNamePattern, a Playwright "
        "--grep-invert, a Surefire -Dtest exclusion list, or the YAML file. Tests a format cannot express are "
        "named on stderr.",
        epilog="exit codes: 0 printed, 1 some tests could not be expressed (named on stderr), 2 usage error",
        formatter_class=_Defaults,
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


def _digest(commands: Commands) -> None:
    d = commands.add_parser(
        "digest",
        help="an organisation's weekly flake digest, from the store (printed, or posted with --post)",
        description="The weekly digest of one installation (an organisation): the week against the one before, "
        "the cost trend, the tests to fix first, new and fixed flakes, tests left undetermined. Only that "
        "installation's repositories are read. With --post it is posted as the App's scheduler would: once "
        "a week, in digest.repository of the organisation's configuration (else its .github repository), "
        "closing last week's digest issue.",
        epilog="exit codes: 0 printed or posted, 1 not posted (why, on stderr), 2 usage error",
        formatter_class=_Defaults,
    )
    d.add_argument("--installation", type=int, required=True, metavar="ID", help="the App's installation id")
    d.add_argument("--week", default=None, metavar="YYYY-Www", help="the ISO week (default: the last complete one)")
    d.add_argument(
        "--format",
        choices=("markdown", "html", "json"),
        default="markdown",
        help="markdown: the issue's body; html: one self-contained page with the charts; json: every figure",
    )
    d.add_argument("--db", default=None, help=f"store URL (default: $DATABASE_URL, else ./{DEFAULT_DATABASE_URL})")
    d.add_argument(
        "--server",
        default=None,
        help="where links to runs point (default: GitHub, or the server of $GITHUB_API_URL)",
    )
    d.add_argument(
        "--post",
        action="store_true",
        help="post it now as the App (settings from the environment), once per week, closing last week's",
    )


def _app(commands: Commands) -> None:
    """The App's own processes, and a replay of one delivery."""
    serve = commands.add_parser("serve", help="run the webhook receiver (settings from the environment)")
    serve.add_argument("--host", default="127.0.0.1")
    serve.add_argument("--port", type=int, default=8000)
    worker = commands.add_parser("worker", help="run an rq worker with the scheduler (settings from the environment)")
    worker.add_argument("--burst", action="store_true", help="work through the queue, then exit")
    commands.add_parser(
        "scheduler",
        help="run the scheduler that enqueues each organisation's weekly digest when it is due (settings from "
        "the environment; more than one may run)",
    )
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


def _local(commands: Commands) -> None:
    """Flaketally inside the test command: settle a failure in the same job, hunt for flakes, gate without
    the App, and remember local runs."""
    run = commands.add_parser(
        "run",
        help="run the test command; when a few tests failed, once more: a test that then passes is a flaky pass",
        description="Run CMD (no shell) and read the JUnit report it writes. When tests failed, the runner made "
        "no retries of its own and at most --max-reruns tests failed, run it once more: a test that failed and "
        "then passed cleanly is a flaky pass (green, and kept). Never green by accident: a missing, empty or "
        "malformed report, a crash, a signal, or a failure the report omits keeps the run red.",
        epilog="exit codes: 0 green (flaky passes included), 1 a test failed, 2 usage error, 3 no usable report, "
        "a crash or a runner killed by a signal",
        formatter_class=_Defaults,
    )
    run.add_argument("--junit", default="junit.xml", metavar="PATH", help="the JUnit report CMD writes")
    run.add_argument("--max-reruns", type=int, default=3, metavar="N", help="rerun only when at most N tests failed")
    run.add_argument(
        "--rerun-scope",
        choices=("command", "test"),
        default="command",
        help="command: run the whole command again; test: only the failed tests (pytest, jest, vitest, Playwright)",
    )
    run.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...", help="the test command")
    hunt = commands.add_parser(
        "hunt",
        help="run the suite N times on one checkout: any disagreement is flakiness",
        description="Run CMD N times ({run} and {junit} in it are replaced), judge every test on those runs as one "
        "commit, print the verdicts with their evidence and what N runs could not see. With --parallel, what is "
        "found flaky is run again one at a time and demoted to suspect when it does not reproduce.",
        epilog="exit codes: 0 nothing flaky, 1 flaky or broken tests found, 2 usage error, 3 no usable report",
        formatter_class=_Defaults,
    )
    hunt.add_argument("--runs", type=int, required=True, metavar="N", help="how many times to run the suite")
    hunt.add_argument("--parallel", type=int, default=1, metavar="K", help="runs at once")
    hunt.add_argument(
        "--junit", default="reports/junit-{run}.xml", metavar="TEMPLATE", help="where run {run} writes its report"
    )
    hunt.add_argument("cmd", nargs=argparse.REMAINDER, metavar="-- CMD ARGS...", help="the test command")
    check = commands.add_parser(
        "check",
        help="a gate in CI without the App: the reports just read against the stored history",
        description="Compare the reports just read with the history in --db: nothing changed, a test newly "
        "crossed the flaky threshold, or a known flake got worse. In GitHub Actions it annotates the tests and "
        "writes a Markdown step summary.",
        epilog="exit codes: 0 nothing changed, 1 a test is newly flaky, 2 usage error, 3 a known flake got worse, "
        "4 no usable report",
        formatter_class=_Defaults,
    )
    check.add_argument("paths", nargs="+", metavar="PATH", help="report files or directories just written")
    check.add_argument("--db", required=True, help="the store holding the history (kept: the reports are added)")
    check.add_argument("--repo", default="local", help="the repository name the history is kept under")
    memory = commands.add_parser(
        "memory",
        help="the tests that both passed and failed on one working tree in the last 7 days (local runs)",
        formatter_class=_Defaults,
    )
    memory.add_argument("action", nargs="?", choices=("list", "reset", "on", "off"), default="list", help="what to do")
    memory.add_argument("test", nargs="?", default=None, metavar="TEST", help="with reset: forget only this test")


def _admin(commands: Commands) -> None:
    """Setting the App up and looking after its store."""
    register = commands.add_parser(
        "register",
        help="register the GitHub App from app.yml (GitHub's manifest flow) and write its keys to an env file",
        description="Serve a one-page form on localhost that sends app.yml to GitHub (or the GitHub Enterprise "
        "Server of $GITHUB_URL / $GITHUB_API_URL); GitHub sends you back with a code, exchanged for the new App's "
        "id, private key and webhook secret, written to --env-file (and the key beside it, both mode 0600).",
        epilog="exit codes: 0 registered, 1 GitHub refused or the files exist (nothing overwritten), 2 usage error",
        formatter_class=_Defaults,
    )
    register.add_argument("--org", default=None, help="register it under this organisation (default: your account)")
    register.add_argument("--webhook-url", default=None, help="the public address of `flaketally serve`'s /webhook")
    register.add_argument("--env-file", default="flaketally.env", help="where the App's settings are written")
    register.add_argument("--port", type=int, default=8765, help="the localhost port of the one-page form")
    register.add_argument("--force", action="store_true", help="replace an env file or key written before")
    doctor = commands.add_parser(
        "doctor",
        help="check the settings, the App's key and installations, its webhook deliveries, Redis and the store",
        description="One line per check, in plain words, with how to fix what fails (settings from the environment).",
        epilog="exit codes: 0 every check passed, 1 something failed (said on its line)",
        formatter_class=_Defaults,
    )
    doctor.add_argument("--deliveries", type=int, default=50, metavar="N", help="recent webhook deliveries to look at")
    doctor.add_argument(
        "--redeliver", type=int, default=None, metavar="ID", help="ask GitHub to deliver that webhook delivery again"
    )
    migrate = commands.add_parser(
        "migrate",
        help="bring the store's schema to this version's newest migration (the one way to change it in production)",
        formatter_class=_Defaults,
    )
    migrate.add_argument(
        "--db", default=None, help=f"store URL (default: $DATABASE_URL, else ./{DEFAULT_DATABASE_URL})"
    )
    purge = commands.add_parser(
        "purge",
        help="delete everything the store holds of one installation (its repositories, reports, runs, digests)",
        formatter_class=_Defaults,
    )
    purge.add_argument("--installation", type=int, required=True, metavar="ID", help="the App's installation id")
    purge.add_argument("--db", default=None, help=f"store URL (default: $DATABASE_URL, else ./{DEFAULT_DATABASE_URL})")


def _config(commands: Commands) -> None:
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
    what.add_parser("settings", help="every environment variable of a deployment: what it is, its default (Markdown)")
    show = what.add_parser("show", help="the configuration in force for a repository, read with the App's keys")
    show.add_argument("--repo", required=True, metavar="OWNER/NAME")

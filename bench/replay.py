"""Three weeks of CI of two organisations, replayed to the App as GitHub would send it, and what it said.

The history is made here, deterministically from ``--seed``: four repositories (``acme/api``, ``acme/web``,
``globex/core``, ``globex/tools``), each with pushes to ``main`` and pull requests based on it, every run a
matrix of two jobs (``test (ubuntu-latest)``, ``test (windows-latest)``) that each upload a pytest report.
Planted in every repository, beside twelve stable tests:

- ``test_flaky_network`` fails at random (p 0.30) and ``test_flaky_race`` (p 0.12) on Linux only: flaky;
- ``test_broken_locale`` fails every time: broken;
- ``test_regress_totals`` passes until a commit of main and fails on every run from it: a regression;
- ``test_windows_paths`` fails every time on Windows and passes on Linux: deterministic, not flaky.

People rerun the failed jobs of about half the failed pull-request runs (the other jobs are carried
over, keeping attempt 1). ``acme/api`` opts in to automatic reruns (``rerun: failed-jobs``); there people
rerun nothing and the App's requests are answered by GitHub (this bench) with an attempt 2 of the failed
jobs.

Every attempt is delivered when it completes, in time order, to the App's worker job
(``workers.jobs.process_workflow_run``, with a real Redis for its lock and a fresh SQLite store), against
the suite's fake GitHub (tests/github_fake.py, respx). Then it prints, against the planted truth:

- flaky precision: of the (test, context) pairs the App called ``flaky`` on some commit, the share that
  are planted flaky; recall: of the planted-flaky pairs that a same-commit pass and failure prove flaky
  in this history, the share the App called flaky (and the same per flaky event: test, context, commit);
- the share of the failures in each commit's last check run that are ``undetermined``, with reruns on
  (acme/api) and off (the others), and the other words;
- the requests the App made of GitHub.

    python -m bench.replay                 # seed 1
    python -m bench.replay --seed 7 --weeks 3

Exit 0 when precision is 1.00, recall is at least 0.95, and undetermined is at most 15% with reruns on
and 50% with them off; 1 otherwise.
"""

from __future__ import annotations

import argparse
import hashlib
import random
import sys
import tempfile
import time
from collections import Counter
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

from bench._common import WRITE_METHODS, owner_of, peak_writes
from bot.github.limits import WRITES_PER_HOUR, WRITES_PER_MINUTE

if TYPE_CHECKING:
    from tests.github_fake import FakeRun

REPOS = ("acme/api", "acme/web", "globex/core", "globex/tools")
INSTALLATIONS = {"acme": 77, "globex": 88}  # one installation of the App per organisation
RERUNS_ON = "acme/api"
OSES = ("ubuntu-latest", "windows-latest")
STABLE = tuple(f"test_stable_{n:02d}" for n in range(12))
FLAKY = {"test_flaky_network": (0.30, OSES), "test_flaky_race": (0.12, ("ubuntu-latest",))}
PLANTED = (*STABLE, *FLAKY, "test_broken_locale", "test_regress_totals", "test_windows_paths")
HOUR = 3600.0


@dataclass
class Planned:
    """One run as the history makes it: its commit, where it ran, and each job's failing tests per attempt."""

    repo: str
    sha: str
    branch: str
    event: str
    pr: int | None
    base: str | None
    at: float
    main_index: int  # how many main commits came before (for the regression)
    attempts: list[dict[str, set[str]]] = field(default_factory=list)  # job os → failing tests


def failing_tests(rng: random.Random, os: str, main_index: int, regress_at: int) -> set[str]:
    failing = {"test_broken_locale"}
    if main_index >= regress_at:
        failing.add("test_regress_totals")
    if os == "windows-latest":
        failing.add("test_windows_paths")
    for name, (p, where) in FLAKY.items():
        if os in where and rng.random() < p:
            failing.add(name)
    return failing


def history(seed: int, weeks: int) -> list[Planned]:
    rng = random.Random(seed)
    runs: list[Planned] = []
    # the history ends about now: the App judges a rerun's age against the real clock (GitHub's 30 days)
    start = float(int(time.time() // 86400 * 86400)) - weeks * 7 * 24 * HOUR
    for r, repo in enumerate(REPOS):
        regress_at = 4 + r
        main_index, main_sha, t = 0, hashlib.sha1(f"{repo} root".encode()).hexdigest(), start + r * 600
        pr = 100
        while t < start + weeks * 7 * 24 * HOUR:
            if rng.random() < 0.4:  # a push to main
                main_index += 1
                main_sha = hashlib.sha1(f"{repo} main {main_index}".encode()).hexdigest()
                plan = Planned(repo, main_sha, "main", "push", None, None, t, main_index)
            else:  # a pull request commit
                pr += 1
                sha = hashlib.sha1(f"{repo} pr {pr}".encode()).hexdigest()
                plan = Planned(repo, sha, f"feature-{pr}", "pull_request", pr, main_sha, t, main_index)
            plan.attempts.append({os: failing_tests(rng, os, main_index, regress_at) for os in OSES})
            human = repo != RERUNS_ON and plan.event == "pull_request" and rng.random() < 0.5
            if human and any(plan.attempts[0].values()):
                plan.attempts.append(rerun_of(rng, plan, regress_at))
            runs.append(plan)
            t += rng.uniform(8, 16) * HOUR
    return sorted(runs, key=lambda p: (p.at, p.repo))


def rerun_of(rng: random.Random, plan: Planned, regress_at: int) -> dict[str, set[str]]:
    """The failed jobs again (the passing ones are carried over: not in the attempt)."""
    return {
        os: failing_tests(rng, os, plan.main_index, regress_at) for os, failed in plan.attempts[-1].items() if failed
    }


def report(failing: set[str]) -> bytes:
    cases = []
    for name in PLANTED:
        body = f'<failure message="AssertionError: {name} failed">trace</failure>' if name in failing else ""
        cases.append(
            f'<testcase classname="tests.test_app" name="{name}" file="tests/test_app.py" line="10" time="0.5">'
            f"{body}</testcase>"
        )
    return f'<testsuite name="pytest" tests="{len(cases)}">{"".join(cases)}</testsuite>'.encode()


class Replay:
    def __init__(self, redis_url: str, store_url: str) -> None:
        import redis

        from bot.github.budget import WriteBudget
        from bot.settings import Settings
        from bot.store import Store
        from tests.github_fake import FakeGitHub
        from workers import jobs

        self.fake = FakeGitHub()
        self.fake.__enter__()
        self.fake.add_file(RERUNS_ON, ".github/flaketally.yml", "rerun: failed-jobs\n")
        self.fake.other_installations.add(INSTALLATIONS["globex"])
        self.store = Store.open(store_url)
        from bot.store import records

        for account, installation in INSTALLATIONS.items():
            records.record_installation(self.store, installation, account, records.InstallationState.ACTIVE)
        self.redis = redis.Redis.from_url(redis_url)
        settings = Settings(
            app_id=self.fake.app_id,
            private_key=self.fake.private_key,
            webhook_secret="replay",
            api_url=self.fake.api_url,
            redis_url=redis_url,
            database_url=store_url,
        )
        jobs.configure(
            settings,
            store=self.store,
            connection=self.redis,
            port_factory=lambda _s, _c, installation, writes: self.fake.port(
                installation_id=installation, writes=writes
            ),
            # the history's own clock: GitHub's budget is a minute and an hour of the history, not of the replay
            budget_factory=lambda connection, installation: WriteBudget(
                connection, installation, clock=self.fake.clock
            ),
        )
        self.jobs = jobs
        self.last: dict[tuple[str, str], dict[str, object]] = {}  # (repo, sha) → the last job's answer
        self.words: dict[tuple[str, str], list[tuple[str, str, str]]] = {}  # → (test, context, word)
        self.truth_events: set[tuple[str, str, str, str]] = set()  # (repo, test, os, sha) proven flaky
        self.last_attempt_at: dict[tuple[str, str], str] = {}  # (repo, sha) → when its last attempt started

    def close(self) -> None:
        self.fake.__exit__(None, None, None)
        self.store.close()
        self.redis.close()

    def add(self, plan: Planned) -> FakeRun:
        from tests.github_fake import zip_of

        fake = self.fake
        fake.now = plan.at
        run = fake.add_run(
            plan.repo,
            head_sha=plan.sha,
            head_branch=plan.branch,
            event=plan.event,
            pull_requests=[plan.pr] if plan.pr else [],
            base_sha=plan.base or "f" * 40,
            conclusion="failure" if any(plan.attempts[0].values()) else "success",
        )
        for os, failing in plan.attempts[0].items():
            fake.add_job(
                run, attempt=1, name=f"test ({os})", conclusion="failure" if failing else "success", labels=(os,)
            )
            fake.add_artifact(run, f"junit-{os}", zip_of({"report.xml": report(failing)}), attempt=1)
        return run

    def add_attempt(self, plan: Planned, run: FakeRun, outcomes: dict[str, set[str]]) -> None:
        from tests.github_fake import zip_of

        fake = self.fake
        fake.now = plan.at
        fake.add_attempt(run, conclusion="failure" if any(outcomes.values()) else "success")
        n = len(run.attempts)
        for os in OSES:
            if os in outcomes:
                failing = outcomes[os]
                fake.add_job(
                    run, attempt=n, name=f"test ({os})", conclusion="failure" if failing else "success", labels=(os,)
                )
                fake.add_artifact(run, f"junit-{os}", zip_of({"report.xml": report(failing)}), attempt=n)
            else:
                fake.add_job(run, attempt=n, name=f"test ({os})", labels=(os,), carried_from=n - 1)

    def deliver(self, plan: Planned, run: FakeRun, attempt: int) -> None:
        self.fake.now = plan.at + (attempt - 1) * HOUR + 700
        installation = INSTALLATIONS[plan.repo.split("/")[0]]
        answer = self.jobs.process_workflow_run(
            installation, plan.repo, 1000 + REPOS.index(plan.repo), run.id, attempt, default_branch="main"
        )
        self.last[(plan.repo, plan.sha)] = answer
        self.last_attempt_at[(plan.repo, plan.sha)] = run.attempts[attempt].run_started_at

    def play(self, plans: list[Planned], rng: random.Random) -> None:
        for plan in plans:
            run = self.add(plan)
            self.deliver(plan, run, 1)
            if len(plan.attempts) > 1:
                self.add_attempt(plan, run, plan.attempts[1])
                self.deliver(plan, run, 2)
            elif self.fake.reruns and self.fake.reruns[-1] == (plan.repo, run.id) and len(run.attempts) == 1:
                # GitHub takes the App's request: the failed jobs run again
                plan.attempts.append(rerun_of(rng, plan, 4 + REPOS.index(plan.repo)))
                self.add_attempt(plan, run, plan.attempts[1])
                self.deliver(plan, run, 2)
            self.record_truth(plan)

    def record_truth(self, plan: Planned) -> None:
        for os in OSES:
            seen = [a[os] for a in plan.attempts if os in a]
            for test in FLAKY:
                fails = [test in failing for failing in seen]
                if any(fails) and not all(fails):
                    self.truth_events.add((plan.repo, test, os, plan.sha))


def weekly_digests(replay: Replay) -> list[tuple[str, str, int, int, str]]:
    """Each organisation's digest of every whole week of the history, as the scheduler posts it: a tick on
    the Monday after, at 09:05 UTC. (organisation, week, flaky events it reports, planted events of that
    organisation's commits whose last attempt ran that week, where it was posted)."""
    import re
    from datetime import timedelta

    from bot.core.digest import week_of, week_start
    from bot.core.times import parse_time

    times = sorted(parse_time(t) for t in replay.last_attempt_at.values())
    week, found = week_of(times[0]), []
    while (monday := week_start(week) + timedelta(weeks=1)) <= times[-1]:
        tick = replay.jobs.digest_tick((monday + timedelta(hours=9, minutes=5)).isoformat())
        for key in tick["enqueued"]:
            installation, covered = key.split(":")
            done = replay.jobs.post_digest(int(installation), covered)
            organisation = next(o for o, i in INSTALLATIONS.items() if i == int(installation))
            issue = replay.fake.issues[done["issue"]] if done["issue"] else None
            shown = re.search(r"^\| flaky events \| (\d+) \|", issue.body if issue else "", re.M)
            planted = sum(
                1
                for repo, _, _, sha in replay.truth_events
                if repo.startswith(organisation + "/")
                and week_of(parse_time(replay.last_attempt_at[(repo, sha)])) == covered
            )
            reported = int(shown.group(1)) if shown else 0
            found.append((organisation, covered, reported, planted, f"{done['repo']}#{done['issue']}"))
        week = week_of(monday)
    return found


def words_in(summary: str) -> list[tuple[str, str, str]]:
    """(test, runner OS, word) of each row of a check run's summary table. The context is said once above
    the table ("Context: `…`") when every row shares it, else last in each row's evidence."""
    import re

    row = re.compile(r"^\| `[^`]*::(test_[a-z_0-9]+)`[^|]* \| \*\*([a-z ]+)\*\* \| (.*) \|$")
    shared = re.compile(r"^Context: `(.*)`$")
    found, context = [], ""
    for line in summary.splitlines():
        said = shared.match(line)
        if said:
            context = said.group(1)
        matched = row.match(line)
        if matched:
            test, word, evidence = matched.groups()
            where = context or evidence.rsplit("<br>", 1)[-1]
            found.append((test, next((o for o in OSES if o in where), "?"), word))
    return found


def final_words(replay: Replay) -> list[tuple[str, str, str, str]]:
    """(repo, sha, test, context job) → word, from each commit's last check run as the fake holds it."""
    latest: dict[tuple[str, str], Any] = {}
    for check in sorted(replay.fake.check_runs.values(), key=lambda c: c.id):
        if check.name == "Flaketally":
            latest[(check.repo, check.head_sha)] = check
    return [
        (repo, sha, test, f"{os} {word}")
        for (repo, sha), check in latest.items()
        for test, os, word in words_in(str(check.output.get("summary", "")))
    ]


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="bench.replay", description=__doc__.split("\n\n")[0])
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("--weeks", type=int, default=3)
    parser.add_argument("--redis", default="redis://127.0.0.1:6379/14")
    args = parser.parse_args(argv)
    sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
    plans = history(args.seed, args.weeks)
    import redis

    redis.Redis.from_url(args.redis).flushdb()
    with tempfile.TemporaryDirectory() as tmp:
        replay = Replay(args.redis, f"sqlite:///{tmp}/replay.db")
        try:
            replay.play(plans, random.Random(args.seed + 1))
            rows = final_words(replay)
            digests = weekly_digests(replay)
        finally:
            replay.close()
            redis.Redis.from_url(args.redis).flushdb()
    failed = summarise(plans, replay, rows)
    wrong = 0
    for organisation, week, reported, planted, where in digests:
        wrong += reported != planted
        print(f"digest {organisation} {week}: {reported} flaky events reported, {planted} planted; posted as {where}")
    closed = sum(1 for issue in replay.fake.issues.values() if issue.state == "closed")
    print(f"digests: {len(digests)} posted, {closed} closed by the next week's, {wrong} with a wrong count")
    return failed or int(wrong > 0 or closed != len(digests) - len(INSTALLATIONS))


def summarise(plans: list[Planned], replay: Replay, rows: list[tuple[str, str, str, str]]) -> int:
    called: set[tuple[str, str, str]] = set()
    called_events: set[tuple[str, str, str, str]] = set()
    words: dict[bool, Counter[str]] = {True: Counter(), False: Counter()}
    for repo, sha, test, os_word in rows:
        os, word = os_word.split(" ", 1)
        words[repo == RERUNS_ON][word] += 1
        if word == "flaky":
            called.add((repo, test, os))
            called_events.add((repo, test, os, sha))
    planted = {(repo, test, os) for repo, test, os, _ in replay.truth_events}
    precision = len({c for c in called if c[1] in FLAKY}) / len(called) if called else 1.0
    recall = len(called & planted) / len(planted) if planted else 1.0
    event_recall = len(called_events & replay.truth_events) / len(replay.truth_events) if replay.truth_events else 1.0
    attempts = sum(len(p.attempts) for p in plans)
    print(
        f"bench.replay: {len(REPOS)} repositories, {len(plans)} workflow runs, {attempts} attempts "
        f"({sum(1 for p in plans if len(p.attempts) > 1)} rerun: people on the others, the App on {RERUNS_ON})"
    )
    print(f"flaky precision {precision:.2f} ({len(called)} (test, context) pairs called flaky; aim 1.00)")
    print(f"flaky recall    {recall:.2f} of {len(planted)} pairs a same-commit pass and failure prove (aim >= 0.95)")
    print(f"  per event     {event_recall:.2f} of {len(replay.truth_events)} (test, context, commit) flaky events")
    shares = {}
    for on, counted in words.items():
        total = sum(counted.values())
        shares[on] = counted["undetermined"] / total if total else 0.0
        where = f"reruns on ({RERUNS_ON})" if on else "reruns off (the others)"
        detail = ", ".join(f"{w} {n}" for w, n in counted.most_common())
        aim = 0.15 if on else 0.50
        print(
            f"undetermined in the last check run, {where}: {shares[on]:.0%} of {total} failures "
            f"(aim <= {aim:.0%}): {detail}"
        )
        rest = total - counted["broken"] - counted["regression"]
        if rest:
            print(
                f"  of the {rest} failures not already failing on main: "
                f"{counted['undetermined'] / rest:.0%} undetermined"
            )
    routes = Counter(r.route for r in replay.fake.requests)
    print("GitHub requests: " + ", ".join(f"{k} {v}" for k, v in sorted(routes.items())))
    # GitHub's secondary limits count content-creating requests (POST, PATCH, PUT, DELETE): issue 14 aims at
    # 1.2 a workflow-run attempt on average; the digest's issues are counted apart (weekly, not per attempt)
    writes = [r for r in replay.fake.requests if r.method in WRITE_METHODS and r.route != "token"]
    per_attempt = [r for r in writes if r.route not in ("create_issue", "update_issue")]
    print(
        f"content-creating requests: {len(per_attempt) / attempts:.2f} a workflow-run attempt ({len(per_attempt)} "
        f"for {attempts} attempts; aim <= 1.2), plus {len(writes) - len(per_attempt)} for the weekly digests"
    )
    minute, hour = peak_writes([(r.at, owner_of(r.path)) for r in writes])
    print(
        f"peak content-creating requests per installation: {minute} in a minute of the history "
        f"({minute / WRITES_PER_MINUTE:.2f}x GitHub's budget of {WRITES_PER_MINUTE}), {hour} in an hour "
        f"({hour / WRITES_PER_HOUR:.2f}x its {WRITES_PER_HOUR})"
    )
    ok = precision == 1.0 and recall >= 0.95 and shares[True] <= 0.15 and shares[False] <= 0.50
    ok = ok and minute <= WRITES_PER_MINUTE and hour <= WRITES_PER_HOUR
    print("ok" if ok else "FAILED: an aim was missed")
    return 0 if ok else 1


if __name__ == "__main__":
    raise SystemExit(main())

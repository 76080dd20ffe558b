"""Small builders for reports and run identities, so tests state only what they are about."""

from __future__ import annotations

from bot.core.identity import ExecutionContext, RunIdentity
from bot.core.results import Attempt, Outcome, Report, TestResult

P, F, E, S = Outcome.PASSED, Outcome.FAILED, Outcome.ERROR, Outcome.SKIPPED


def result(name: str, *outcomes: Outcome, seconds: float = 1.0, classname: str = "tests.mod") -> TestResult:
    attempts = tuple(Attempt(o, seconds, "boom" if o.is_failure else "") for o in outcomes or (P,))
    return TestResult(classname, name, attempts)


def report(*results: TestResult, digest: str | None = None) -> Report:
    key = digest or "|".join(f"{r.name}:{''.join(a.outcome.value[0] for a in r.attempts)}" for r in results)
    return Report(digest=key.ljust(64, "0")[:64] if digest else _digest(key), results=list(results))


def _digest(text: str) -> str:
    import hashlib

    return hashlib.sha256(text.encode()).hexdigest()


def run(
    commit: str,
    attempt: int = 1,
    *,
    repo: str = "acme/widgets",
    os: str = "ubuntu-latest",
    run_id: int | None = None,
    started_at: str | None = None,
    run_index: int | None = None,
) -> RunIdentity:
    return RunIdentity(
        repo=repo,
        commit=commit,
        attempt=attempt,
        context=ExecutionContext(job="test", os=os),
        source=f"{commit}/{attempt}",
        run_id=run_id,
        started_at=started_at,
        run_index=run_index,
    )

"""How a report's results lie in the store, and how a few tests' histories are read back from them.

A report is split (``Split``) into the tests it held (its manifest, shared by every report that held the
same tests and skips), its plain passes' seconds and its kept results (a failed attempt or a retry: an
``observations`` row each). Reading the histories of wanted tests asks SQL for those tests' rows only,
decodes each distinct manifest once, and looks the wanted tests up in it: the cost follows the tests that
failed, not the passes. The per-report durations of plain passes are decoded only when asked for
(``timed``); otherwise a plain pass's seconds come from ``pass_times``, kept at ingest for the passes the
judge adds up (a test that failed or retried on the same commit and context), and are 0.0 elsewhere.
"""

from __future__ import annotations

import functools
import hashlib
import operator
from bisect import bisect_left
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from typing import Any, NamedTuple

import sqlalchemy as sa
from sqlalchemy.engine import Connection

from bot.core.observations import PASSED, SKIPPED, Observation, TestHistory, has_failure
from bot.core.results import Outcome, TestResult
from bot.store import codec
from bot.store.schema import contexts, manifests, observations, pass_times, reports, tests

_BATCH = 500
_FEW = 1000  # reports in a window that are asked by id as well (``history_rows``)
_REPORT_AND_TEST, _SECONDS = operator.itemgetter(0, 1), operator.itemgetter(2)  # of a pass_times row


@dataclass(slots=True)
class Split:
    """One report's results as the store keeps them (``ran`` and the manifest are sorted by test row id)."""

    ran: list[int]  # every test the report held
    passed: dict[int, float]  # plain single-attempt passes: their seconds
    skipped: set[int]  # plain single-attempt skips
    kept: list[tuple[int, TestResult]]  # the rest: an observations row each

    @classmethod
    def of(cls, ids: Sequence[int], results: Sequence[TestResult]) -> Split:
        passed: dict[int, float] = {}
        skipped: set[int] = set()
        kept: list[tuple[int, TestResult]] = []
        for test_pk, result in zip(ids, results, strict=True):
            if len(result.attempts) == 1 and result.outcome is Outcome.PASSED:
                passed[test_pk] = result.attempts[0].duration
            elif len(result.attempts) == 1 and result.outcome is Outcome.SKIPPED:
                skipped.add(test_pk)
            else:
                kept.append((test_pk, result))
        return cls(sorted(set(ids)), passed, skipped, kept)


def test_key(test_id: str) -> str:
    return hashlib.sha256(test_id.encode("utf-8", "surrogatepass")).hexdigest()


def pass_time_rows(
    conn: Connection, report_id: int, siblings: sa.ColumnElement[bool], split: Split
) -> list[dict[str, Any]]:
    """The ``pass_times`` rows a new report brings: its plain passes of tests kept by another report of the
    same commit and context (``siblings``), and those reports' plain passes of the tests it keeps."""
    found = conn.execute(
        sa.select(reports.c.id, reports.c.manifest_id, reports.c.passed_ms).where(siblings, reports.c.id != report_id)
    ).all()
    if not found:
        return []
    kept_there: dict[int, set[int]] = {int(r.id): set() for r in found}
    for rid, test_pk in conn.execute(
        sa.select(observations.c.report_id, observations.c.test_id).where(observations.c.report_id.in_(kept_there))
    ):
        kept_there[int(rid)].add(int(test_pk))
    wanted_here = set().union(*kept_there.values())
    rows = [
        {"report_id": report_id, "test_id": t, "seconds": codec.stored_seconds(split.passed[t])}
        for t in sorted(wanted_here)
        if t in split.passed
    ]
    mine = {t for t, _ in split.kept}
    for r in found:
        rows += _passes_of(conn, int(r.id), int(r.manifest_id), r.passed_ms, mine - kept_there[int(r.id)])
    return rows


def _passes_of(
    conn: Connection, report_id: int, manifest_id: int, passed_ms: bytes, wanted: set[int]
) -> list[dict[str, Any]]:
    """The plain passes of ``wanted`` tests in one stored report, with their seconds."""
    if not wanted:
        return []
    manifest = conn.execute(
        sa.select(manifests.c.test_ids, manifests.c.skipped_ids).where(manifests.c.id == manifest_id)
    ).one()
    ran, skipped = codec.unpack_ids(manifest.test_ids), set(codec.unpack_ids(manifest.skipped_ids))
    ms = codec.ms_at(passed_ms)
    rows = []
    for t in sorted(wanted - skipped):
        at = bisect_left(ran, t)
        if at < len(ran) and ran[at] == t:
            rows.append({"report_id": report_id, "test_id": t, "seconds": ms[at] / 1000})
    return rows


# reading


class HistoryRows(NamedTuple):
    tests: dict[int, Any]  # the wanted tests' rows, by row id
    context_keys: dict[int, str]
    reports: list[Any]
    manifests: dict[int, Any]  # by id: the manifests the reports point at
    kept: list[Any]  # the wanted tests' observation rows: results with a failure or a retry
    pass_seconds: dict[tuple[int, int], float]  # (report, test) -> seconds, unless ``timed``
    # (context, commit) -> the tests that failed there, when only those commits are read (``histories``)
    failed: dict[tuple[int, str], set[int]] | None = None


def history_rows(
    conn: Connection,
    repo_key: int,
    wanted: set[str] | None,
    since: str | None,
    *,
    timed: bool,
    texts_on: Collection[str] | None = None,
) -> HistoryRows:
    """The rows of the wanted tests' histories (``Store.history``). ``texts_on``: the commits whose failures'
    messages and details are read (None: every commit's); elsewhere they are left empty, unread."""
    info = {row.id: row for row in _test_rows(conn, repo_key, wanted)}
    started = reports.c.started_at
    recent = sa.true() if since is None else sa.or_(started.is_(None), started >= since)
    in_window = sa.and_(reports.c.repo_id == repo_key, recent)
    context_keys = {int(i): str(k) for i, k in conn.execute(sa.select(contexts.c.id, contexts.c.key))}
    columns = [  # ``histories`` unpacks them in this order
        reports.c.id,
        reports.c.context_id,
        reports.c.commit_sha,
        reports.c.attempt,
        reports.c.run_id,
        reports.c.run_index,
        reports.c.started_at,
        reports.c.digest,
        reports.c.manifest_id,
    ]
    report_rows = list(
        conn.execute(sa.select(*columns, *([reports.c.passed_ms] if timed else [])).where(in_window)).all()
    )
    if not info or not report_rows:
        return HistoryRows(info, context_keys, [], {}, [], {})
    manifest_rows = _in(
        conn,
        sa.select(manifests.c.id, manifests.c.test_ids, manifests.c.skipped_ids),
        manifests.c.id,
        sorted({int(r.manifest_id) for r in report_rows}),
    )
    of_tests = None if wanted is None else sorted(info)
    message: sa.ColumnElement[Any] = observations.c.message
    details: sa.ColumnElement[Any] = observations.c.details
    if texts_on is not None:  # NULL elsewhere: a month of stack traces is most of what a history weighs
        on = reports.c.commit_sha.in_(sorted(texts_on))
        message, details = sa.case((on, message), else_=sa.null()), sa.case((on, details), else_=sa.null())
    # a few reports (a day's, as ``known_flaky`` asks first): named as well, so that PostgreSQL walks the
    # (report, test) index from them, not every stored row of the tests (it did, planning a hash join: 34 ms
    # for 200 tests' last day, against 4 ms)
    few = sorted(int(r.id) for r in report_rows) if of_tests is not None and len(report_rows) <= _FEW else None
    kept = _in_reports(
        conn,
        sa.select(observations.c.report_id, observations.c.test_id, observations.c.attempts, message, details)
        .join(reports, reports.c.id == observations.c.report_id)
        .where(in_window),
        observations.c.test_id,
        of_tests,
        observations.c.report_id,
        few,
    )
    seconds: dict[tuple[int, int], float] = {}
    if not timed:
        query = (
            sa.select(pass_times.c.report_id, pass_times.c.test_id, pass_times.c.seconds)
            .join(reports, reports.c.id == pass_times.c.report_id)
            .where(in_window)
        )
        found = _in_reports(conn, query, pass_times.c.test_id, of_tests, pass_times.c.report_id, few)
        # integer ids, float seconds: as the columns say
        seconds = dict(zip(map(_REPORT_AND_TEST, found), map(_SECONDS, found), strict=True))
    return HistoryRows(info, context_keys, report_rows, {int(m.id): m for m in manifest_rows}, kept, seconds)


def _test_rows(conn: Connection, repo_key: int, wanted: set[str] | None) -> list[Any]:
    """The repository's tests, or those of them named in ``wanted`` (looked up by their key)."""
    query = sa.select(
        tests.c.id,
        tests.c.test_id,
        tests.c.family,
        tests.c.classname,
        tests.c.name,
        tests.c.file,
        tests.c.line,
    ).where(tests.c.repo_id == repo_key)
    if wanted is None:
        return list(conn.execute(query))
    found = _in(conn, query, tests.c.key, sorted(test_key(t) for t in wanted))
    return [row for row in found if row.test_id in wanted]


def _in(conn: Connection, query: sa.Select[Any], column: sa.ColumnElement[Any], values: list[Any] | None) -> list[Any]:
    """The query's rows, with ``column`` among ``values`` (asked in batches), or all when ``values`` is None."""
    if values is None:
        return list(conn.execute(query))
    found: list[Any] = []
    for start in range(0, len(values), _BATCH):
        found += conn.execute(query.where(column.in_(values[start : start + _BATCH]))).all()
    return found


def _in_reports(
    conn: Connection,
    query: sa.Select[Any],
    column: sa.ColumnElement[Any],
    values: list[Any] | None,
    report_column: sa.ColumnElement[Any],
    report_ids: list[int] | None,
) -> list[Any]:
    """``_in``, with ``report_column`` among ``report_ids`` too unless they are None."""
    if report_ids is None:
        return _in(conn, query, column, values)
    found: list[Any] = []
    for start in range(0, len(report_ids), _BATCH):
        found += _in(conn, query.where(report_column.in_(report_ids[start : start + _BATCH])), column, values)
    return found


class _Entry(NamedTuple):
    position: int  # in the manifest, and in a report's ``passed_ms``
    test_pk: int
    skipped: bool


@functools.lru_cache(maxsize=4)  # a repository's reports mostly share a few manifests, read attempt after attempt
def _manifest(test_ids: bytes, skipped_ids: bytes) -> tuple[dict[int, int], frozenset[int]]:
    """A manifest's tests, each with its position, and its skipped tests; decoded in C."""
    ids = codec.unpack_ids(test_ids)
    return dict(zip(ids, range(len(ids)), strict=True)), frozenset(codec.unpack_ids(skipped_ids))


def _entries(manifest: Any, info: dict[int, Any]) -> list[_Entry]:
    """The wanted tests a manifest holds, in its order: looked up in it, however many tests it holds."""
    positions, skipped = _manifest(manifest.test_ids, manifest.skipped_ids)
    held = sorted((positions[t], t) for t in info if t in positions)
    return [_Entry(position, test_pk, test_pk in skipped) for position, test_pk in held]


def _in_every_report(report_rows: list[Any], entries: dict[int, list[_Entry]]) -> dict[int, set[int]]:
    """Per context, the wanted tests that every report of it held and none skipped."""
    used: dict[int, set[int]] = {}
    for r in report_rows:
        used.setdefault(r[1], set()).add(r[8])  # context_id, manifest_id
    return {
        context_id: set.intersection(*({e.test_pk for e in entries[m] if not e.skipped} for m in manifest_ids))
        for context_id, manifest_ids in used.items()
    }


def histories(rows: HistoryRows, *, timed: bool, failed_commits: bool = False) -> list[TestHistory]:
    """The observation lists, per test and context, in the order the reports ran.

    ``failed_commits``: only the observations on the commits where the test failed (in that context), which
    is all a same-code pass and failure (``bot.core.verdicts.known_flaky``) can be found in.

    An untimed pass is one observation per report, shared by the tests that passed in it. A test that every
    report of its context held (most of a repository's tests, when judging) starts from a copy of that
    context's passes, with its failures, retries and timed passes put in their places; the others are filled
    report by report."""
    info, context_keys, report_rows = rows.tests, rows.context_keys, rows.reports
    if failed_commits:
        report_rows, rows = _on_failed_commits(rows)
    # a total order on what was executed, never on when it was stored: two runs of one commit that started
    # in the same second are told apart by their run ids, so the evidence reads the same whoever stored first
    # (by position, as ``history_rows`` asks the columns: started_at, run_index, commit_sha, attempt, run_id,
    # digest, id)
    report_rows.sort(key=lambda r: (r[6] or "", r[5] or 0, r[2], r[3], r[4] or 0, r[7], r[0]))
    entries = {mid: _entries(m, info) for mid, m in rows.manifests.items()}
    new = _NEW
    # each report's untimed pass, made once; where each report sits in its context's run of reports
    shared: list[Observation] = []
    passes: dict[int, list[Observation]] = {}  # per context
    slot: dict[int, tuple[int, int, int, Any]] = {}  # report id: (context, place in its context, order, row)
    for order, r in enumerate(report_rows):
        report_id, context_id, commit, attempt, run_id, _, started = r[:7]  # the columns asked
        passed = new(Observation, (order, commit, attempt, run_id, started, PASSED, 0.0, "", ""))
        shared.append(passed)
        in_context = passes.setdefault(context_id, [])
        slot[report_id] = (context_id, len(in_context), order, r)
        in_context.append(passed)
    whole = {} if timed or failed_commits else _in_every_report(report_rows, entries)
    found: dict[tuple[int, int], TestHistory] = {}
    copies: dict[tuple[int, int], list[Observation]] = {}  # (context, test): the tests in ``whole``
    for context_id, tests_held in whole.items():
        for test_pk in tests_held:
            t = info[test_pk]
            history = TestHistory(
                t.test_id,
                t.family,
                t.classname,
                t.name,
                t.file,
                t.line,
                context_keys[context_id],
                passes[context_id].copy(),
            )
            found[(test_pk, context_id)] = history
            copies[(context_id, test_pk)] = history.observations
    for (report_id, test_pk), secs in rows.pass_seconds.items() if copies else ():  # timed passes first: a kept
        where = slot.get(report_id)  # result in the same place wins
        if where is not None and (observations := copies.get((where[0], test_pk))) is not None:
            order, r = where[2], where[3]
            observations[where[1]] = new(Observation, (order, r[2], r[3], r[4], r[6], PASSED, secs, "", ""))
    kept: dict[int, dict[int, tuple[str, str, str]]] = {}  # by report, then test: the ones filled report by report
    for report_id, test_pk, attempts, message, details in rows.kept:  # as ``history_rows`` asks them
        where = slot.get(report_id)
        if where is not None and (observations := copies.get((where[0], test_pk))) is not None:
            order, r = where[2], where[3]
            letters, seconds = codec.attempt_outcomes(attempts)
            observations[where[1]] = new(
                Observation, (order, r[2], r[3], r[4], r[6], letters, seconds, message or "", details or "")
            )
        else:
            kept.setdefault(report_id, {})[test_pk] = (attempts, message or "", details or "")
    _report_by_report(rows, report_rows, shared, entries, whole, kept, found, timed=timed)
    return sorted(found.values(), key=lambda h: (h.test_id, h.context))


_NEW = tuple.__new__  # an Observation from a tuple of every field, in C: this runs once per observation


def _kept(order: int, r: Any, attempts_text: str, message: str, details: str) -> Observation:
    """The observation of a kept result (a failure or a retry) in report ``r``, ``order``-th in time."""
    letters, seconds = codec.attempt_outcomes(attempts_text)
    return _NEW(Observation, (order, r[2], r[3], r[4], r[6], letters, seconds, message, details))


def _report_by_report(
    rows: HistoryRows,
    report_rows: list[Any],
    shared: list[Observation],
    entries: dict[int, list[_Entry]],
    whole: dict[int, set[int]],
    kept: dict[int, dict[int, tuple[str, str, str]]],
    found: dict[tuple[int, int], TestHistory],
    *,
    timed: bool,
) -> None:
    """Fills ``found`` with the histories of the tests not in ``whole``, report by report in time order
    (``shared``: each report's untimed pass, by order)."""
    info, context_keys, pass_seconds, failed = rows.tests, rows.context_keys, rows.pass_seconds, rows.failed
    # the observation lists of one context, by test (a list is never empty once made, so
    # ``get(...) or list_of(...)`` makes each one once)
    lists: dict[int, dict[int, list[Observation]]] = {}

    def list_of(test_pk: int, context_id: int) -> list[Observation]:
        t = info[test_pk]
        history = TestHistory(t.test_id, t.family, t.classname, t.name, t.file, t.line, context_keys[context_id])
        found[(test_pk, context_id)] = history
        lists[context_id][test_pk] = history.observations
        return history.observations

    # the wanted tests of each manifest left to fill here, per context
    left: dict[tuple[int, int], list[_Entry]] = {}
    by_pk: dict[tuple[int, int], dict[int, _Entry]] = {}  # the same, by test
    new = _NEW
    for order, r in enumerate(report_rows):
        report_id, context_id, commit, attempt, run_id, _, started, _, manifest_id = r[:9]  # the columns asked
        by_test = lists.setdefault(context_id, {})
        mine = kept.get(report_id) or {}
        ms = codec.ms_at(r.passed_ms) if timed else None
        only = None if failed is None else failed[(context_id, commit)]
        # an untimed pass (or a skip) is the same observation for every test of the report: made once
        passed = shared[order]
        skip = new(Observation, (order, commit, attempt, run_id, started, SKIPPED, 0.0, "", ""))
        mine_entries = left.get((context_id, manifest_id))
        if mine_entries is None:
            held = whole.get(context_id, ())
            mine_entries = left[(context_id, manifest_id)] = [e for e in entries[manifest_id] if e.test_pk not in held]
        if only is not None:  # the tests that failed on the commit: mostly a few of the wanted ones
            of_test = by_pk.get((context_id, manifest_id))
            if of_test is None:
                of_test = by_pk[(context_id, manifest_id)] = {e.test_pk: e for e in mine_entries}
            mine_entries = [of_test[t] for t in only if t in of_test]
        for position, test_pk, skipped in mine_entries:
            if test_pk in mine:
                continue
            if skipped:
                obs = skip
            elif ms is not None:
                obs = new(Observation, (order, commit, attempt, run_id, started, PASSED, ms[position] / 1000, "", ""))
            elif (secs := pass_seconds.get((report_id, test_pk))) is not None:
                obs = new(Observation, (order, commit, attempt, run_id, started, PASSED, secs, "", ""))
            else:
                obs = passed
            (by_test.get(test_pk) or list_of(test_pk, context_id)).append(obs)
        for test_pk, (attempts_text, message, details) in mine.items():
            (by_test.get(test_pk) or list_of(test_pk, context_id)).append(
                _kept(order, r, attempts_text, message, details)
            )


def _on_failed_commits(rows: HistoryRows) -> tuple[list[Any], HistoryRows]:
    """The reports of the commits on which a wanted test failed (per context), and the rows narrowed to
    them: the tests that failed on each, and their kept results there."""
    # by position, as ``history_rows`` asks the columns (reports: id, context_id, commit_sha; kept: report_id,
    # test_id, attempts): the kept rows of a month are tens of thousands
    where = {r[0]: (r[1], r[2]) for r in rows.reports}
    failed: dict[tuple[int, str], set[int]] = {}
    for report_id, test_pk, attempts, *_ in rows.kept:
        if has_failure(codec.attempt_outcomes(attempts)[0]):
            failed.setdefault(where[report_id], set()).add(test_pk)
    kept = [row for row in rows.kept if row[1] in failed.get(where[row[0]], ())]
    reports_there = [r for r in rows.reports if (r[1], r[2]) in failed]
    return reports_there, rows._replace(reports=reports_there, kept=kept, failed=failed)

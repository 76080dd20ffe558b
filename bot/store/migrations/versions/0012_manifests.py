"""Judging stays flat as repositories grow: a report points at a shared manifest of the tests it held.

Each report's ``passed_ids`` and ``skipped_ids`` become a ``manifests`` row (every test it held, its
plain skips), stored once per repository and shared by every report that held the same tests; the report
keeps its plain passes' count, skips and total seconds, and ``passed_ms`` is rewritten in manifest order
(0 where the test did not plainly pass). ``pass_times`` gets the seconds of every plain pass of a test that
failed or retried in a report of the same commit and context. Nothing is lost: ``downgrade`` rebuilds the
old arrays (on PostgreSQL).

Revision ID: 0012
Revises: 0011
"""

from __future__ import annotations

import hashlib
import zlib
from array import array
from collections.abc import Iterator, Sequence
from itertools import accumulate
from typing import Any

import sqlalchemy as sa
from alembic import op

revision = "0012"
down_revision = "0011"
branch_labels = None
depends_on = None

_BATCH = 200

_reports = sa.table(
    "reports",
    sa.column("id", sa.Integer),
    sa.column("repo_id", sa.Integer),
    sa.column("context_id", sa.Integer),
    sa.column("commit_sha", sa.String),
    sa.column("passed_ids", sa.LargeBinary),
    sa.column("passed_ms", sa.LargeBinary),
    sa.column("skipped_ids", sa.LargeBinary),
    sa.column("manifest_id", sa.Integer),
    sa.column("passed", sa.Integer),
    sa.column("skipped", sa.Integer),
    sa.column("passed_seconds", sa.Float),
)
_manifests = sa.table(
    "manifests",
    sa.column("id", sa.Integer),
    sa.column("repo_id", sa.Integer),
    sa.column("digest", sa.String),
    sa.column("tests", sa.Integer),
    sa.column("test_ids", sa.LargeBinary),
    sa.column("skipped_ids", sa.LargeBinary),
)
_observations = sa.table("observations", sa.column("report_id", sa.Integer), sa.column("test_id", sa.Integer))
_pass_times = sa.table(
    "pass_times", sa.column("report_id", sa.Integer), sa.column("test_id", sa.Integer), sa.column("seconds", sa.Float)
)


def _pack_ids(ids: Sequence[int]) -> bytes:
    return zlib.compress(array("I", (b - a for a, b in zip([0, *ids], ids, strict=False))).tobytes(), 6)


def _unpack_ids(blob: bytes) -> list[int]:
    deltas = array("I")
    deltas.frombytes(zlib.decompress(blob))
    return list(accumulate(deltas))


def _pack_ms(values: Sequence[int]) -> bytes:
    return zlib.compress(array("I", values).tobytes(), 6)


def _unpack_ms(blob: bytes) -> list[int]:
    values = array("I")
    values.frombytes(zlib.decompress(blob))
    return list(values)


def _digest(ids: Sequence[int], skipped: Sequence[int]) -> str:
    return hashlib.sha256(array("I", [len(ids), *ids, *skipped]).tobytes()).hexdigest()


def _batches(conn: sa.Connection, columns: Sequence[Any]) -> Iterator[Sequence[Any]]:
    ids = [int(i) for (i,) in conn.execute(sa.select(_reports.c.id).order_by(_reports.c.id))]
    for start in range(0, len(ids), _BATCH):
        chunk = ids[start : start + _BATCH]
        yield conn.execute(sa.select(*columns).where(_reports.c.id.in_(chunk))).all()


def _kept(conn: sa.Connection, report_ids: list[int]) -> dict[int, set[int]]:
    kept: dict[int, set[int]] = {i: set() for i in report_ids}
    query = sa.select(_observations.c.report_id, _observations.c.test_id).where(
        _observations.c.report_id.in_(report_ids)
    )
    for report_id, test_id in conn.execute(query):
        kept[int(report_id)].add(int(test_id))
    return kept


def _manifest_id(conn: sa.Connection, known: dict[tuple[int, str], int], repo_id: int, ran: list[int], skipped: list[int]) -> int:
    digest = _digest(ran, skipped)
    if (repo_id, digest) not in known:
        found = conn.execute(
            sa.select(_manifests.c.id).where(_manifests.c.repo_id == repo_id, _manifests.c.digest == digest)
        ).scalar()
        if found is None:
            values = {
                "repo_id": repo_id,
                "digest": digest,
                "tests": len(ran),
                "test_ids": _pack_ids(ran),
                "skipped_ids": _pack_ids(skipped),
            }
            found = conn.execute(sa.insert(_manifests).values(**values).returning(_manifests.c.id)).scalar_one()
        known[(repo_id, digest)] = int(found)
    return known[(repo_id, digest)]


def _judged_tests(conn: sa.Connection) -> dict[tuple[int, str, int], set[int]]:
    """(repo, commit, context) -> the tests that failed or retried there."""
    query = (
        sa.select(_reports.c.repo_id, _reports.c.commit_sha, _reports.c.context_id, _observations.c.test_id)
        .distinct()
        .join(_reports, _reports.c.id == _observations.c.report_id)
    )
    judged: dict[tuple[int, str, int], set[int]] = {}
    for repo_id, commit, context_id, test_id in conn.execute(query):
        judged.setdefault((int(repo_id), str(commit), int(context_id)), set()).add(int(test_id))
    return judged


def upgrade() -> None:
    op.create_table(
        "manifests",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("tests", sa.Integer, nullable=False),
        sa.Column("test_ids", sa.LargeBinary, nullable=False),
        sa.Column("skipped_ids", sa.LargeBinary, nullable=False),
        sa.UniqueConstraint("repo_id", "digest", name="uq_manifests_repo_digest"),
    )
    op.create_table(
        "pass_times",
        sa.Column("report_id", sa.Integer, sa.ForeignKey("reports.id"), primary_key=True),
        sa.Column("test_id", sa.Integer, sa.ForeignKey("tests.id"), primary_key=True),
        sa.Column("seconds", sa.Float, nullable=False),
    )
    op.create_index("ix_pass_times_test", "pass_times", ["test_id"])
    sqlite = op.get_bind().dialect.name == "sqlite"
    # SQLite changes ``reports`` in place (ADD and DROP COLUMN): rebuilding it would break the foreign keys
    # of the tables that point at it; its manifest_id stays nullable in the file, always set by the store
    if sqlite:
        op.execute("ALTER TABLE reports ADD COLUMN manifest_id INTEGER REFERENCES manifests (id)")
    else:
        op.add_column("reports", sa.Column("manifest_id", sa.Integer, nullable=True))
    for name, kind in (("passed", sa.Integer), ("skipped", sa.Integer), ("passed_seconds", sa.Float)):
        op.add_column("reports", sa.Column(name, kind, nullable=False, server_default="0"))
    _convert(op.get_bind())
    for name in ("passed_ids", "skipped_ids"):
        op.execute(f"ALTER TABLE reports DROP COLUMN {name}")
    if not sqlite:
        op.alter_column("reports", "manifest_id", existing_type=sa.Integer, nullable=False)
        op.create_foreign_key("fk_reports_manifest", "reports", "manifests", ["manifest_id"], ["id"])
    op.create_index("ix_reports_repo_started", "reports", ["repo_id", "started_at"])


def _convert(conn: sa.Connection) -> None:
    """Every report's arrays into a manifest, the new per-report figures and its judged pass times."""
    judged = _judged_tests(conn)
    known: dict[tuple[int, str], int] = {}
    columns = [c for c in _reports.c if c.name not in ("manifest_id", "passed", "skipped", "passed_seconds")]
    for rows in _batches(conn, columns):
        kept = _kept(conn, [int(r.id) for r in rows])
        times = []
        for r in rows:
            passed = dict(zip(_unpack_ids(r.passed_ids), _unpack_ms(r.passed_ms), strict=True))
            skipped = _unpack_ids(r.skipped_ids)
            ran = sorted(set(passed) | set(skipped) | kept[int(r.id)])
            conn.execute(
                sa.update(_reports)
                .where(_reports.c.id == r.id)
                .values(
                    manifest_id=_manifest_id(conn, known, int(r.repo_id), ran, skipped),
                    passed=len(passed),
                    skipped=len(skipped),
                    passed_seconds=sum(ms / 1000 for _, ms in sorted(passed.items())),
                    passed_ms=_pack_ms([passed.get(t, 0) for t in ran]),
                )
            )
            there = judged.get((int(r.repo_id), str(r.commit_sha), int(r.context_id)), set())
            times += [
                {"report_id": int(r.id), "test_id": t, "seconds": passed[t] / 1000} for t in sorted(there) if t in passed
            ]
        if times:
            conn.execute(sa.insert(_pass_times), times)


def downgrade() -> None:
    with op.batch_alter_table("reports") as batch:
        batch.add_column(sa.Column("passed_ids", sa.LargeBinary, nullable=True))
        batch.add_column(sa.Column("skipped_ids", sa.LargeBinary, nullable=True))
    conn = op.get_bind()
    manifests = {
        int(m.id): (_unpack_ids(m.test_ids), _unpack_ids(m.skipped_ids))
        for m in conn.execute(sa.select(_manifests.c.id, _manifests.c.test_ids, _manifests.c.skipped_ids))
    }
    for rows in _batches(conn, [_reports.c.id, _reports.c.manifest_id, _reports.c.passed_ms]):
        kept = _kept(conn, [int(r.id) for r in rows])
        for r in rows:
            ran, skipped = manifests[int(r.manifest_id)]
            plain = set(ran) - set(skipped) - kept[int(r.id)]
            ms = dict(zip(ran, _unpack_ms(r.passed_ms), strict=True))
            order = sorted(plain)
            conn.execute(
                sa.update(_reports)
                .where(_reports.c.id == r.id)
                .values(
                    passed_ids=_pack_ids(order),
                    passed_ms=_pack_ms([ms[t] for t in order]),
                    skipped_ids=_pack_ids(sorted(set(skipped) - kept[int(r.id)])),
                )
            )
    # on PostgreSQL (SQLite would rebuild ``reports`` under the tables that point at it)
    with op.batch_alter_table("reports") as batch:
        batch.drop_index("ix_reports_repo_started")
        batch.drop_constraint("fk_reports_manifest", type_="foreignkey")
        batch.drop_column("manifest_id")
        batch.drop_column("passed")
        batch.drop_column("skipped")
        batch.drop_column("passed_seconds")
        batch.alter_column("passed_ids", existing_type=sa.LargeBinary, nullable=False)
        batch.alter_column("skipped_ids", existing_type=sa.LargeBinary, nullable=False)
    op.drop_index("ix_pass_times_test", "pass_times")
    op.drop_table("pass_times")
    op.drop_table("manifests")

"""The first schema: repositories, contexts, tests, reports and non-passing observations.

Revision ID: 0001
Revises:
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0001"
down_revision = None
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "repos",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("full_name", sa.String(300), nullable=False, unique=True),
        sa.Column("github_id", sa.BigInteger, nullable=True),
        sa.Column("installation_id", sa.BigInteger, nullable=True),
    )
    op.create_table(
        "contexts",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.Text, nullable=False, unique=True),
    )
    op.create_table(
        "tests",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), nullable=False),
        sa.Column("key", sa.String(64), nullable=False),
        sa.Column("test_id", sa.Text, nullable=False),
        sa.Column("family", sa.Text, nullable=False),
        sa.Column("classname", sa.Text, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("file", sa.Text, nullable=True),
        sa.Column("line", sa.Integer, nullable=True),
        sa.UniqueConstraint("repo_id", "key", name="uq_tests_repo_key"),
    )
    op.create_table(
        "reports",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("key", sa.String(64), nullable=False, unique=True),
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), nullable=False),
        sa.Column("context_id", sa.Integer, sa.ForeignKey("contexts.id"), nullable=False),
        sa.Column("commit_sha", sa.String(100), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("run_id", sa.BigInteger, nullable=True),
        sa.Column("run_index", sa.BigInteger, nullable=True),
        sa.Column("started_at", sa.String(40), nullable=True),
        sa.Column("source", sa.Text, nullable=False),
        sa.Column("digest", sa.String(64), nullable=False),
        sa.Column("artifact_id", sa.BigInteger, nullable=True),
        sa.Column("results", sa.Integer, nullable=False),
        sa.Column("passed_ids", sa.LargeBinary, nullable=False),
        sa.Column("passed_ms", sa.LargeBinary, nullable=False),
        sa.Column("skipped_ids", sa.LargeBinary, nullable=False),
    )
    op.create_index("ix_reports_repo_commit", "reports", ["repo_id", "commit_sha"])
    op.create_table(
        "observations",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("report_id", sa.Integer, sa.ForeignKey("reports.id"), nullable=False),
        sa.Column("test_id", sa.Integer, sa.ForeignKey("tests.id"), nullable=False),
        sa.Column("outcome", sa.String(10), nullable=False),
        sa.Column("attempts", sa.Text, nullable=False),
        sa.Column("duration", sa.Float, nullable=False),
        sa.Column("message", sa.Text, nullable=False),
        sa.UniqueConstraint("report_id", "test_id", name="uq_observations_report_test"),
    )
    op.create_index("ix_observations_test", "observations", ["test_id"])


def downgrade() -> None:
    op.drop_table("observations")
    op.drop_table("reports")
    op.drop_table("tests")
    op.drop_table("contexts")
    op.drop_table("repos")

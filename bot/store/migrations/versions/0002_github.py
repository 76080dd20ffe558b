"""What the GitHub App records beside the reports: tenants, runs and jobs, its check runs and comments,
and which tests were last known flaky (for the one-time "no longer flaky" notice).

Revision ID: 0002
Revises: 0001
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0002"
down_revision = "0001"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "installations",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("account", sa.String(300), nullable=False),
        sa.Column("status", sa.String(20), nullable=False),
    )
    op.create_table(
        "runs",
        sa.Column("id", sa.Integer, primary_key=True),
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), nullable=False),
        sa.Column("run_id", sa.BigInteger, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("head_branch", sa.Text, nullable=True),
        sa.Column("event", sa.String(50), nullable=True),
        sa.Column("workflow_path", sa.Text, nullable=True),
        sa.Column("run_number", sa.Integer, nullable=True),
        sa.Column("html_url", sa.Text, nullable=True),
        sa.Column("conclusion", sa.String(30), nullable=True),
        sa.Column("run_started_at", sa.String(40), nullable=True),
        sa.Column("updated_at", sa.String(40), nullable=True),
        sa.Column("pull_requests", sa.Text, nullable=False),
        sa.UniqueConstraint("repo_id", "run_id", "attempt", name="uq_runs_attempt"),
    )
    op.create_index("ix_runs_repo_sha", "runs", ["repo_id", "head_sha"])
    op.create_table(
        "jobs",
        sa.Column("id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), nullable=False),
        sa.Column("run_id", sa.BigInteger, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("name", sa.Text, nullable=False),
        sa.Column("conclusion", sa.String(30), nullable=True),
        sa.Column("started_at", sa.String(40), nullable=True),
        sa.Column("completed_at", sa.String(40), nullable=True),
        sa.Column("labels", sa.Text, nullable=False),
        sa.Column("html_url", sa.Text, nullable=True),
    )
    op.create_index("ix_jobs_run", "jobs", ["repo_id", "run_id", "attempt"])
    op.create_table(
        "check_runs",
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), primary_key=True),
        sa.Column("head_sha", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("attempt", sa.Integer, primary_key=True, autoincrement=False),
        sa.Column("check_run_id", sa.BigInteger, nullable=False),
        sa.Column("output_digest", sa.String(64), nullable=True),
        sa.Column("annotations_sent", sa.Text, nullable=False),
    )
    op.create_table(
        "comments",
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), primary_key=True),
        sa.Column("pr_number", sa.Integer, primary_key=True),
        sa.Column("comment_id", sa.BigInteger, nullable=False),
    )
    op.create_table(
        "known_flaky",
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), primary_key=True),
        sa.Column("test_id", sa.Integer, sa.ForeignKey("tests.id"), primary_key=True),
        sa.Column("context_id", sa.Integer, sa.ForeignKey("contexts.id"), primary_key=True),
    )


def downgrade() -> None:
    for table in ("known_flaky", "comments", "check_runs", "jobs", "runs", "installations"):
        op.drop_table(table)

"""What could not be judged on a commit (expired, replaced or refused reports, tests sharing a name),
kept so that every check run of the commit names it, whichever delivery found it.

Revision ID: 0003
Revises: 0002
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0003"
down_revision = "0002"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "problems",
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), primary_key=True),
        sa.Column("head_sha", sa.String(64), primary_key=True),
        sa.Column("digest", sa.String(64), primary_key=True),
        sa.Column("run_id", sa.BigInteger, nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("text", sa.Text, nullable=False),
        sa.Column("unjudged_failure", sa.Text, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("problems")

"""The automatic rerun decision of each run: kept before the request is sent, so a run is rerun once,
ever, however often its delivery comes and however many workers see it.

Revision ID: 0006
Revises: 0005
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0006"
down_revision = "0005"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "reruns",
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), primary_key=True),
        sa.Column("run_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("attempt", sa.Integer, nullable=False),
        sa.Column("requested", sa.Boolean, nullable=False),
        sa.Column("line", sa.Text, nullable=False),
    )
    op.create_index("ix_reruns_repo_sha", "reruns", ["repo_id", "head_sha"])


def downgrade() -> None:
    op.drop_table("reruns")

"""The weekly digest: one row per installation and ISO week, where it was posted, or why it was not.

Revision ID: 0009
Revises: 0008
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0009"
down_revision = "0008"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "digests",
        sa.Column("installation_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("week", sa.String(10), primary_key=True),
        sa.Column("state", sa.String(20), nullable=False),
        sa.Column("repo", sa.String(300), nullable=True),
        sa.Column("issue_number", sa.Integer, nullable=True),
        sa.Column("line", sa.Text, nullable=False),
    )


def downgrade() -> None:
    op.drop_table("digests")

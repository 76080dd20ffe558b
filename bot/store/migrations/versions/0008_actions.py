"""The check run's buttons: what each click did (one row per check run and button, so a click delivered
again is not acted on twice), and the permissions an installation granted (to hide a button it cannot use).

Revision ID: 0008
Revises: 0007
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0008"
down_revision = "0007"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "actions",
        sa.Column("repo_id", sa.Integer, sa.ForeignKey("repos.id"), primary_key=True),
        sa.Column("check_run_id", sa.BigInteger, primary_key=True, autoincrement=False),
        sa.Column("identifier", sa.String(20), primary_key=True),
        sa.Column("head_sha", sa.String(64), nullable=False),
        sa.Column("sender", sa.String(100), nullable=False),
        sa.Column("line", sa.Text, nullable=False),
    )
    op.create_index("ix_actions_repo_sha", "actions", ["repo_id", "head_sha"])
    with op.batch_alter_table("installations") as batch:
        batch.add_column(sa.Column("permissions", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("installations") as batch:
        batch.drop_column("permissions")
    op.drop_index("ix_actions_repo_sha", "actions")
    op.drop_table("actions")

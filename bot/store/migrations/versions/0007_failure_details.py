"""A failure's text beside its first line (a bounded stack trace), for the comment's excerpt, the
annotation's details and the file and line a traceback names.

Revision ID: 0007
Revises: 0006
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0007"
down_revision = "0006"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("observations") as batch:
        batch.add_column(sa.Column("details", sa.Text, nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("observations") as batch:
        batch.drop_column("details")

"""When an installation was deleted: its data is purged once the retention period has passed since.

Revision ID: 0010
Revises: 0009
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0010"
down_revision = "0009"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("installations") as batch:
        batch.add_column(sa.Column("deleted_at", sa.String(40), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("installations") as batch:
        batch.drop_column("deleted_at")

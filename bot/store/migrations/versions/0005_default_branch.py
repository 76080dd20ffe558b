"""Each repository's default branch, as its webhooks name it: the branch whose runs tell ``broken``,
``regression`` and ``new failure`` apart.

Revision ID: 0005
Revises: 0004
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0005"
down_revision = "0004"
branch_labels = None
depends_on = None


def upgrade() -> None:
    with op.batch_alter_table("repos") as batch:
        batch.add_column(sa.Column("default_branch", sa.String(255), nullable=True))


def downgrade() -> None:
    with op.batch_alter_table("repos") as batch:
        batch.drop_column("default_branch")

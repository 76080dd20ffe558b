"""The configuration files last read from GitHub, with their ETags, so the next read is a conditional
request (a 304 costs no rate limit).

Revision ID: 0004
Revises: 0003
"""

from __future__ import annotations

import sqlalchemy as sa
from alembic import op

revision = "0004"
down_revision = "0003"
branch_labels = None
depends_on = None


def upgrade() -> None:
    op.create_table(
        "config_files",
        sa.Column("source", sa.String(500), primary_key=True),
        sa.Column("etag", sa.String(200), nullable=True),
        sa.Column("text", sa.Text, nullable=True),
    )


def downgrade() -> None:
    op.drop_table("config_files")

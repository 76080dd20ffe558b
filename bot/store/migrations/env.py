"""Alembic environment: run by ``bot.store.Store.migrate`` on the store's own connection."""

from __future__ import annotations

from alembic import context

from bot.store.schema import metadata

connection = context.config.attributes["connection"]
context.configure(connection=connection, target_metadata=metadata, render_as_batch=True)
with context.begin_transaction():
    context.run_migrations()

"""The scheduler process: rq's cron scheduler running ``workers.jobs.digest_tick`` every few minutes and
``workers.jobs.prune_store`` once a day.

Run as many as you like (one per host is typical, two for failover): each tick only enqueues the digests
that are due and not posted, under one job id per installation and week, and posting happens once under
the installation's lock, so two schedulers post one digest."""

from __future__ import annotations

import logging
from typing import Any

import redis

from bot.digest.schedule import TICK_CRON
from bot.settings import Settings
from workers import jobs

TICK_TIMEOUT = 300
PRUNE_CRON = "17 3 * * *"  # once a day, at a quiet hour (the scheduler's local time)
PRUNE_TIMEOUT = 1800


def build_scheduler(settings: Settings, connection: redis.Redis, *, now: str | None = None) -> Any:
    """An rq ``CronScheduler`` with the digest tick registered (``now`` fixes the tick's clock, for tests)."""
    from rq.cron import CronScheduler

    scheduler = CronScheduler(connection=connection)
    scheduler.register(
        jobs.digest_tick,
        settings.queue_name,
        kwargs={"now": now} if now else None,
        cron=TICK_CRON,
        job_timeout=TICK_TIMEOUT,
        name="flaketally-digest-tick",
    )
    scheduler.register(
        jobs.prune_store, settings.queue_name, cron=PRUNE_CRON, job_timeout=PRUNE_TIMEOUT, name="flaketally-prune"
    )
    return scheduler


def run_scheduler(settings: Settings, *, connection: redis.Redis | None = None) -> None:
    """Run until SIGINT or SIGTERM."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    build_scheduler(settings, connection or redis.Redis.from_url(settings.redis_url)).start()


def post_now(settings: Settings, installation_id: int, week: str) -> dict[str, Any]:
    """``flaketally digest --post``: the digest job run here and now, with this process's own store and Redis
    (the scheduler's own path otherwise: once a week, under the installation's lock)."""
    from bot.store import Store

    store = Store.open_current(settings.database_url)
    connection = redis.Redis.from_url(settings.redis_url)
    jobs.configure(settings, store=store, connection=connection)
    try:
        return jobs.post_digest(installation_id, week)
    finally:
        jobs.reset()
        store.close()
        connection.close()

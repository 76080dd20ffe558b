"""The worker process: rq workers (with the scheduler) on the Flaketally queue."""

from __future__ import annotations

import logging

import redis
from rq import Queue, Worker

from bot.settings import Settings
from workers import jobs


def run_worker(settings: Settings, *, burst: bool = False, connection: redis.Redis | None = None) -> bool:
    """Work through the queue (until it is empty, with ``burst``); True when any job was done."""
    logging.basicConfig(level=logging.INFO, format="%(asctime)s %(levelname)s %(name)s %(message)s")
    connection = connection or redis.Redis.from_url(settings.redis_url)
    jobs.configure(settings, connection=connection)
    queue = Queue(settings.queue_name, connection=connection)
    worker = Worker([queue], connection=connection)
    return bool(worker.work(burst=burst, with_scheduler=True))

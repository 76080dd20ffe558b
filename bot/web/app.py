"""The receiver as an ASGI app: ``POST /webhook``, ``GET /healthz``, ``/readyz`` and ``/metrics``."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
import redis
import sqlalchemy as sa
from prometheus_client.exposition import CONTENT_TYPE_PLAIN_0_0_4, generate_latest
from redis import RedisError
from redis.backoff import ExponentialWithJitterBackoff
from redis.retry import Retry as RedisRetry
from starlette.applications import Starlette
from starlette.concurrency import run_in_threadpool
from starlette.requests import ClientDisconnect, Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

from bot.settings import Settings
from bot.store import Store
from bot.store.digests import digest_warnings
from bot.web import metrics
from bot.web.receiver import Receiver

log = logging.getLogger(__name__)

READY_TIMEOUT = 3.0


async def read_capped(request: Request, limit: int) -> bytes | None:
    """The body, or None as soon as it is known to exceed ``limit``: never more than that is read."""
    declared = request.headers.get("content-length")
    if declared is not None and declared.isascii() and declared.isdigit() and int(declared) > limit:
        return None
    body = bytearray()
    async for chunk in request.stream():
        if len(body) + len(chunk) > limit:
            return None
        body += chunk
    return bytes(body)


def redis_client(url: str) -> redis.Redis:
    """A client that fails fast when Redis is gone, so GitHub gets its 503 within seconds."""
    return redis.Redis.from_url(
        url,
        socket_connect_timeout=2,
        socket_timeout=5,
        retry=RedisRetry(ExponentialWithJitterBackoff(cap=0.1, base=0.01), 2),
        health_check_interval=30,
    )


def create_app(settings: Settings, *, redis: redis.Redis | None = None) -> Starlette:
    """The receiver. ``redis`` overrides the client made from ``settings.redis_url`` (tests, embedding)."""
    owned = redis is None
    connection = redis_client(settings.redis_url) if redis is None else redis
    receiver = Receiver(settings, connection)
    store = Store(settings.database_url)  # no migration here: readiness only asks it for SELECT 1
    registry = metrics.registry(connection, settings.queue_name)

    async def webhook(request: Request) -> Response:
        try:
            body = await read_capped(request, settings.max_body_bytes)
        except ClientDisconnect:
            log.info("webhook client gone", extra={"delivery_id": request.headers.get("x-github-delivery", "")[:64]})
            return Response(status_code=400)
        # Answered on the event loop, not in a thread: a delivery is ~1.5 ms of CPU and three Redis round trips
        # on a client that gives up within seconds, and handing it to a thread cost more than it saved: the
        # loop and the thread fought over the GIL (bench.receiver at 300/s: p99 13-20 ms in threads, 5 ms here,
        # 2.5 -> 2.2 ms of CPU a delivery). Scale out with more receiver processes.
        answer = receiver.respond(request.headers, body)
        # after a 413 the rest of the body is still on the wire: close rather than drain it
        close = {"Connection": "close"} if body is None else None
        return JSONResponse(answer.body, status_code=answer.status, headers=close)

    async def healthz(request: Request) -> Response:
        return PlainTextResponse("ok")

    def ping_redis() -> None:
        connection.ping()

    def ping_store() -> None:
        with store.engine.connect() as conn:
            conn.execute(sa.text("SELECT 1"))

    def digest_warnings_of_store() -> list[str]:
        try:
            return digest_warnings(store)
        except sa.exc.SQLAlchemyError:  # a store the workers have not migrated yet holds no digest
            return []

    async def readyz(request: Request) -> Response:
        failed = []
        for name, check in (("redis", ping_redis), ("store", ping_store)):
            try:
                with anyio.fail_after(READY_TIMEOUT):
                    await anyio.to_thread.run_sync(check, abandon_on_cancel=True)
            except Exception as exc:
                log.warning("not ready", extra={"component": name, "error": repr(exc)})
                failed.append(f"{name} unavailable ({type(exc).__name__})")
        if failed:
            return PlainTextResponse("\n".join(failed) + "\n", status_code=503)
        # ready, with what a person should know: a digest that had nowhere to go
        warnings = await anyio.to_thread.run_sync(digest_warnings_of_store, abandon_on_cancel=True)
        return PlainTextResponse("ready\n" + "".join(f"warning: {w}\n" for w in warnings))

    async def metrics_page(request: Request) -> Response:
        try:
            text = await run_in_threadpool(generate_latest, registry)
        except RedisError as exc:
            log.warning("metrics unavailable", extra={"error": repr(exc)})
            return PlainTextResponse("redis unavailable\n", status_code=503)
        return Response(text, media_type=CONTENT_TYPE_PLAIN_0_0_4)

    @asynccontextmanager
    async def lifespan(app: Starlette) -> AsyncIterator[None]:
        yield
        store.close()
        if owned:
            connection.close()

    return Starlette(
        routes=[
            Route("/webhook", webhook, methods=["POST"]),
            Route("/healthz", healthz, methods=["GET"]),
            Route("/readyz", readyz, methods=["GET"]),
            Route("/metrics", metrics_page, methods=["GET"]),
        ],
        lifespan=lifespan,
    )

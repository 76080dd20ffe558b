"""Real Redis and PostgreSQL for the tests: the ones on this machine, or throwaway ones we start.

Order: an URL from the environment (``FLAKETALLY_TEST_REDIS_URL``, ``FLAKETALLY_TEST_POSTGRES_URL``);
the server on the standard local port; a throwaway server in a temporary folder started from the
installed binaries. When none of these works the run stops and says what to install: never a silent skip.
"""

from __future__ import annotations

import glob
import os
import shutil
import socket
import subprocess
import tempfile
import time
from contextlib import closing
from pathlib import Path

import psycopg
import redis

_started: list[subprocess.Popen[bytes]] = []
_cleanup: list[Path] = []


class MissingService(Exception):
    pass


def _free_port() -> int:
    with closing(socket.socket()) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _redis_ok(url: str) -> bool:
    try:
        return bool(redis.Redis.from_url(url, socket_connect_timeout=1).ping())
    except redis.RedisError:
        return False


def redis_url() -> str:
    url = os.environ.get("FLAKETALLY_TEST_REDIS_URL")
    if url:
        if not _redis_ok(url):
            raise MissingService(f"FLAKETALLY_TEST_REDIS_URL={url} does not answer")
        return url
    if _redis_ok("redis://127.0.0.1:6379/0"):
        return "redis://127.0.0.1:6379/0"
    binary = shutil.which("redis-server")
    if binary is None:
        raise MissingService(
            "no Redis on 127.0.0.1:6379 and no redis-server to start one: install it (apt-get install redis-server)"
        )
    port = _free_port()
    folder = Path(tempfile.mkdtemp(prefix="flaketally-redis-"))
    _cleanup.append(folder)
    _started.append(
        subprocess.Popen(
            [
                binary,
                "--port",
                str(port),
                "--bind",
                "127.0.0.1",
                "--save",
                "",
                "--appendonly",
                "no",
                "--dir",
                str(folder),
            ],
            stdout=subprocess.DEVNULL,
        )
    )
    url = f"redis://127.0.0.1:{port}/0"
    for _ in range(100):
        if _redis_ok(url):
            return url
        time.sleep(0.05)
    raise MissingService(f"started {binary} on port {port} but it does not answer")


def _pg_ok(url: str) -> bool:
    try:
        with psycopg.connect(url, connect_timeout=2):
            return True
    except psycopg.Error:
        return False


def _pg_binary(name: str) -> str | None:
    found = shutil.which(name)
    if found:
        return found
    candidates = sorted(glob.glob(f"/usr/lib/postgresql/*/bin/{name}"))
    return candidates[-1] if candidates else None


def postgres_admin_url() -> str:
    """A URL to a database we may create databases from."""
    url = os.environ.get("FLAKETALLY_TEST_POSTGRES_URL")
    if url:
        if not _pg_ok(url):
            raise MissingService(f"FLAKETALLY_TEST_POSTGRES_URL={url} does not answer")
        return url
    for candidate in ("postgresql://postgres@127.0.0.1:5432/test", "postgresql://postgres@127.0.0.1:5432/postgres"):
        if _pg_ok(candidate):
            return candidate
    initdb, pg_ctl = _pg_binary("initdb"), _pg_binary("pg_ctl")
    if not (initdb and pg_ctl):
        raise MissingService(
            "no PostgreSQL on 127.0.0.1:5432 and no initdb/pg_ctl to start one: install it (apt-get install postgresql)"
        )
    folder = Path(tempfile.mkdtemp(prefix="flaketally-pg-"))
    _cleanup.append(folder)
    port = _free_port()
    run_as: list[str] = []
    if os.geteuid() == 0:  # initdb refuses to run as root
        shutil.chown(folder, "nobody")
        run_as = ["runuser", "-u", "nobody", "--"]
    subprocess.run(
        [*run_as, initdb, "-D", str(folder / "data"), "-U", "postgres", "--auth=trust"],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    subprocess.run(
        [
            *run_as,
            pg_ctl,
            "-D",
            str(folder / "data"),
            "-l",
            str(folder / "log"),
            "-w",
            "-o",
            f"-p {port} -k {folder} -c listen_addresses=127.0.0.1 -c fsync=off",
            "start",
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    _cleanup_cmds.append([*run_as, pg_ctl, "-D", str(folder / "data"), "-m", "immediate", "stop"])
    return f"postgresql://postgres@127.0.0.1:{port}/postgres"


_cleanup_cmds: list[list[str]] = []


def stop_all() -> None:
    for cmd in _cleanup_cmds:
        subprocess.run(cmd, check=False, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
    for proc in _started:
        proc.terminate()
        proc.wait(timeout=10)
    for folder in _cleanup:
        shutil.rmtree(folder, ignore_errors=True)

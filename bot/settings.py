"""Deployment settings, read once from the environment at start-up.

Nothing here runs at import time: a process calls ``Settings.from_env()`` in its entry point and passes
the object down. A missing or malformed variable raises ``SettingsError`` naming the variable.
"""

from __future__ import annotations

import base64
import binascii
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import urlsplit

from bot.github.limits import DEFAULT_API_URL

MIB = 1 << 20
DEFAULT_REDIS_URL = "redis://127.0.0.1:6379/0"
DEFAULT_DATABASE_URL = "flaketally.db"
DEFAULT_QUEUE = "flaketally"

_PEM = re.compile(
    r"-----BEGIN (?P<kind>(?:RSA |EC )?PRIVATE KEY)-----(?P<body>[A-Za-z0-9+/=\s]+)-----END (?P=kind)-----"
)
_QUEUE_NAME = re.compile(r"[A-Za-z0-9_.:-]{1,100}")


# Every environment variable ``Settings.from_env`` reads: (name, what it is, its default). The README's table
# is printed from this (``flaketally config settings``); a test checks from_env reads exactly these.
VARIABLES: tuple[tuple[str, str, str], ...] = (
    ("GITHUB_APP_ID", "the App's id (`flaketally register` writes it)", "required for `worker`, `scheduler`"),
    (
        "GITHUB_APP_PRIVATE_KEY",
        "the App's private key, PEM, inline (or `GITHUB_APP_PRIVATE_KEY_PATH`)",
        "required for `worker`, `scheduler`",
    ),
    ("GITHUB_APP_PRIVATE_KEY_PATH", "a file holding the App's private key (mode 0600)", "unset"),
    ("GITHUB_WEBHOOK_SECRET", "the secret GitHub signs its deliveries with", "required"),
    ("GITHUB_API_URL", "GitHub's API: `https://HOST/api/v3` for GitHub Enterprise Server", f"`{DEFAULT_API_URL}`"),
    ("REDIS_URL", "the queue, delivery records, locks, token cache and metrics", f"`{DEFAULT_REDIS_URL}`"),
    ("DATABASE_URL", "the store: a SQLite path or `sqlite:///...`, or `postgresql://...`", f"`{DEFAULT_DATABASE_URL}`"),
    ("FLAKETALLY_QUEUE", "the rq queue's name", f"`{DEFAULT_QUEUE}`"),
    (
        "FLAKETALLY_ARTIFACTS",
        "comma-separated name patterns (`junit-*,test-results`) of the artifacts to read",
        "every artifact whose zip holds JUnit XML",
    ),
    (
        "FLAKETALLY_RETENTION_DAYS",
        "days reports, runs and jobs are kept (31 to 3650), and a deleted installation's data before it is purged",
        "`90`",
    ),
)


def reference() -> str:
    """The variables as a Markdown table (the README shows it)."""
    rows = ["| variable | what it is | default |", "|---|---|---|"]
    return "\n".join([*rows, *(f"| `{name}` | {what} | {default} |" for name, what, default in VARIABLES)])


class SettingsError(Exception):
    """A deployment setting is missing or malformed; the message names the variable."""


@dataclass(frozen=True, slots=True, kw_only=True)
class Settings:
    """What a Flaketally process needs to know about its deployment.

    ``app_id`` and ``private_key`` are ``0`` and ``""`` when read with ``require_app=False`` and the
    environment does not set them (the receiver only verifies and enqueues); ``has_app`` says which.
    """

    app_id: int
    private_key: str = ""
    webhook_secret: str
    api_url: str = DEFAULT_API_URL
    redis_url: str = DEFAULT_REDIS_URL
    database_url: str = DEFAULT_DATABASE_URL
    queue_name: str = DEFAULT_QUEUE
    max_body_bytes: int = 25 * MIB
    # fnmatch patterns of the artifacts to read (FLAKETALLY_ARTIFACTS, comma-separated); none: every
    # artifact whose zip holds JUnit XML
    artifact_patterns: tuple[str, ...] = ()
    # days reports, runs and jobs are kept, and a deleted installation's data (FLAKETALLY_RETENTION_DAYS)
    retention_days: int = 90

    def __repr__(self) -> str:  # never print the key or the secret
        return (
            f"Settings(app_id={self.app_id}, api_url={self.api_url!r}, redis_url={_redact(self.redis_url)!r}, "
            f"database_url={_redact(self.database_url)!r}, queue_name={self.queue_name!r}, "
            f"max_body_bytes={self.max_body_bytes})"
        )

    @property
    def has_app(self) -> bool:
        return self.app_id > 0 and bool(self.private_key)

    @classmethod
    def from_env(cls, environ: Mapping[str, str] = os.environ, *, require_app: bool = True) -> Settings:
        """The settings in ``environ``; ``require_app=False`` for processes that never call GitHub."""
        app_id, private_key = _app_credentials(environ, require_app)
        return cls(
            app_id=app_id,
            private_key=private_key,
            webhook_secret=_webhook_secret(environ),
            api_url=_api_url(environ),
            redis_url=_redis_url(environ),
            database_url=database_url(environ),
            queue_name=_queue_name(environ),
            artifact_patterns=_artifact_patterns(environ),
            retention_days=_retention_days(environ),
        )


def database_url(environ: Mapping[str, str] = os.environ) -> str:
    """``DATABASE_URL``, else the embedded SQLite default: what every command opens, App or not."""
    return _non_empty(environ, "DATABASE_URL", DEFAULT_DATABASE_URL)


def _retention_days(environ: Mapping[str, str]) -> int:
    raw = _get(environ, "FLAKETALLY_RETENTION_DAYS")
    if raw is None:
        return 90
    if not raw.strip().isdigit() or not 31 <= int(raw) <= 3650:
        raise SettingsError(
            f"FLAKETALLY_RETENTION_DAYS must be a whole number of days from 31 to 3650 (verdicts look back 30), "
            f"not {raw!r}"
        )
    return int(raw)


def _artifact_patterns(environ: Mapping[str, str]) -> tuple[str, ...]:
    raw = _get(environ, "FLAKETALLY_ARTIFACTS")
    if raw is None:
        return ()
    patterns = tuple(p.strip() for p in raw.split(",") if p.strip())
    if not patterns or any(len(p) > 200 for p in patterns):
        raise SettingsError(f"FLAKETALLY_ARTIFACTS must be comma-separated artifact name patterns, not {raw!r}")
    return patterns


def _get(environ: Mapping[str, str], name: str) -> str | None:
    """The variable's value, or None when it is unset or blank."""
    value = environ.get(name)
    return value if value is not None and value.strip() else None


def _non_empty(environ: Mapping[str, str], name: str, default: str) -> str:
    value = _get(environ, name)
    return default if value is None else value.strip()


def _app_credentials(environ: Mapping[str, str], required: bool) -> tuple[int, str]:
    raw_id = _get(environ, "GITHUB_APP_ID")
    inline = _get(environ, "GITHUB_APP_PRIVATE_KEY")
    path = _get(environ, "GITHUB_APP_PRIVATE_KEY_PATH")
    if not required and raw_id is None and inline is None and path is None:
        return 0, ""
    if raw_id is None:
        raise SettingsError("GITHUB_APP_ID is not set: the GitHub App's numeric id (App settings, About)")
    if not raw_id.strip().isdigit() or int(raw_id) <= 0:
        raise SettingsError(f"GITHUB_APP_ID must be a positive integer, not {raw_id!r}")
    return int(raw_id), _private_key(inline, path)


def _private_key(inline: str | None, path: str | None) -> str:
    if inline is not None and path is not None:
        raise SettingsError("set GITHUB_APP_PRIVATE_KEY or GITHUB_APP_PRIVATE_KEY_PATH, not both")
    if inline is not None:
        name = "GITHUB_APP_PRIVATE_KEY"
        # a key pasted into a one-line variable often carries literal "\n" for its line breaks
        key = inline.replace("\\n", "\n") if "\n" not in inline else inline
    elif path is not None:
        name = "GITHUB_APP_PRIVATE_KEY_PATH"
        try:
            key = Path(path).expanduser().read_text(encoding="ascii")
        except (OSError, UnicodeDecodeError) as exc:
            raise SettingsError(f"GITHUB_APP_PRIVATE_KEY_PATH: cannot read {path!r}: {exc}") from None
    else:
        raise SettingsError("GITHUB_APP_PRIVATE_KEY or GITHUB_APP_PRIVATE_KEY_PATH must be set (the App's PEM key)")
    key = key.strip()
    if not _is_pem_private_key(key):
        raise SettingsError(f"{name} does not hold a PEM private key (-----BEGIN ... PRIVATE KEY----- ... -----END)")
    return key + "\n"


def _is_pem_private_key(text: str) -> bool:
    match = _PEM.fullmatch(text)
    if match is None:
        return False
    try:
        return len(base64.b64decode("".join(match["body"].split()), validate=True)) > 0
    except binascii.Error:
        return False


def _webhook_secret(environ: Mapping[str, str]) -> str:
    secret = environ.get("GITHUB_WEBHOOK_SECRET")
    if secret is None or not secret.strip():
        raise SettingsError("GITHUB_WEBHOOK_SECRET is not set: the secret the App signs its webhook deliveries with")
    return secret  # used byte for byte, as GitHub does


def _api_url(environ: Mapping[str, str]) -> str:
    url = _non_empty(environ, "GITHUB_API_URL", DEFAULT_API_URL).rstrip("/")
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a malformed port
    except ValueError as exc:
        raise SettingsError(f"GITHUB_API_URL is not a URL: {url!r} ({exc})") from None
    if parts.scheme not in ("http", "https") or not parts.hostname or parts.query or parts.fragment:
        raise SettingsError(
            f"GITHUB_API_URL must be an http(s) URL such as {DEFAULT_API_URL} or, for GitHub Enterprise Server, "
            f"https://HOST/api/v3; not {url!r}"
        )
    return url


def _redis_url(environ: Mapping[str, str]) -> str:
    url = _non_empty(environ, "REDIS_URL", DEFAULT_REDIS_URL)
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a malformed port
    except ValueError as exc:
        raise SettingsError(f"REDIS_URL is not a URL: {_redact(url)!r} ({exc})") from None
    if parts.scheme in ("redis", "rediss"):
        ok = bool(parts.hostname) and (parts.path.strip("/") == "" or parts.path.strip("/").isdigit())
    else:
        ok = parts.scheme == "unix" and bool(parts.path)
    if not ok:
        raise SettingsError(
            f"REDIS_URL must look like redis://HOST:PORT/DB, rediss://... or unix:///path; not {_redact(url)!r}"
        )
    return url


def _queue_name(environ: Mapping[str, str]) -> str:
    name = _non_empty(environ, "FLAKETALLY_QUEUE", DEFAULT_QUEUE)
    if not _QUEUE_NAME.fullmatch(name):
        raise SettingsError(f"FLAKETALLY_QUEUE must be 1 to 100 of A-Z a-z 0-9 _ . : -, not {name!r}")
    return name


def _redact(url: str) -> str:
    """The URL without its password, for messages and logs."""
    try:
        parts = urlsplit(url)
    except ValueError:
        return "<malformed URL>"
    if parts.password is None:
        return url
    netloc = parts.netloc.rsplit("@", 1)[1]
    user = f"{parts.username}:***@" if parts.username else ":***@"
    return parts._replace(netloc=user + netloc).geturl()

"""``flaketally doctor``: is this deployment ready to answer pull requests? One line per check, in plain
words, and for each that fails how to fix it; exit 1 when any failed.

In order: the settings (from the environment), the private key, that GitHub takes the App's JWT (the key
belongs to the App id), each installation (suspended?) and its permissions against what each feature needs
(``bot.github.permissions``), the webhook's recent deliveries (failed ones named, with the command that
redelivers them), Redis, the store and its migration. A check whose ground failed (no settings: no GitHub
check) says it was not run, so every failure is named once, where it starts.
"""

from __future__ import annotations

import argparse
import os
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

from bot.github.limits import web_url
from bot.github.permissions import CORE, missing
from bot.settings import Settings, SettingsError
from bot.settings import _redact as _redact

OK, FAIL, WARN, SKIP = "ok", "FAIL", "warn", "--"


@dataclass(frozen=True, slots=True)
class Check:
    status: str  # OK, FAIL, WARN or SKIP
    what: str
    said: str
    fix: str = ""

    def line(self) -> str:
        fix = f" → {self.fix}" if self.fix else ""
        return f"{self.status:<4}  {self.what}: {self.said}{fix}"


def doctor(environ: Mapping[str, str], *, deliveries: int = 50) -> list[Check]:
    """Every check against the deployment ``environ`` describes (module docstring)."""
    try:
        settings = Settings.from_env(environ, require_app=True)
    except SettingsError as exc:
        return [
            Check(
                FAIL, "settings", str(exc), "set it in the environment or the env file (flaketally register writes one)"
            ),
            Check(SKIP, "GitHub", "not checked: the settings come first"),
            *_services(environ),
        ]
    checks = [Check(OK, "settings", f"App {settings.app_id} at {settings.api_url}, queue {settings.queue_name!r}")]
    key = _key(settings.private_key)
    checks.append(key)
    if key.status == FAIL:
        checks.append(Check(SKIP, "GitHub", "not checked: the private key comes first"))
    else:
        checks += list(_github(settings, deliveries))
    return [*checks, *_services(environ, settings)]


def _key(pem: str) -> Check:
    from cryptography.hazmat.primitives.asymmetric import rsa
    from cryptography.hazmat.primitives.serialization import load_pem_private_key

    try:
        key = load_pem_private_key(pem.encode(), password=None)
    except (ValueError, TypeError) as exc:
        return Check(FAIL, "private key", f"cannot be read ({exc})", "use the .pem file GitHub gave for this App")
    if not isinstance(key, rsa.RSAPrivateKey):
        return Check(FAIL, "private key", "not an RSA key", "use the .pem file GitHub gave for this App")
    return Check(OK, "private key", f"an RSA key of {key.key_size} bits")


def _app_client(settings: Settings) -> Any:
    """GitHub as the App itself (its JWT), with a cache of its own: the key is checked, not a token made
    earlier in this process."""
    from githubkit import AppAuthStrategy, GitHub
    from githubkit.cache.mem_cache import MemCacheStrategy

    auth = AppAuthStrategy(settings.app_id, settings.private_key)
    base = settings.api_url.rstrip("/") + "/"
    return GitHub(auth, base_url=base, auto_retry=False, cache_strategy=MemCacheStrategy())


def _github(settings: Settings, deliveries: int) -> Iterator[Check]:
    from githubkit.exception import GitHubException, RequestFailed

    with _app_client(settings) as gh:
        try:
            app: Any = gh.rest.apps.get_authenticated().json()
        except RequestFailed as exc:
            status = exc.response.status_code
            yield Check(
                FAIL,
                "GitHub App",
                f"GitHub refused the App's token ({status})",
                f"GITHUB_APP_ID ({settings.app_id}) and the private key must be the same App's; the clock must be "
                "right within a minute",
            )
            return
        except GitHubException as exc:
            yield Check(FAIL, "GitHub App", f"cannot reach {settings.api_url} ({exc})", "check GITHUB_API_URL")
            return
        page = str(app.get("html_url") or f"{web_url(settings.api_url)}/apps/{app.get('slug')}")
        yield Check(OK, "GitHub App", f"{app.get('name')} ({page}), owned by {(app.get('owner') or {}).get('login')}")
        yield from _installations(_call(gh.rest.apps.list_installations, per_page=100), page)
        yield from _deliveries(_call(gh.rest.apps.list_webhook_deliveries, per_page=deliveries))


def _call(request: Callable[..., Any], **params: Any) -> list[dict[str, Any]] | str:
    """The JSON list a listing answered, or what went wrong, said."""
    from githubkit.exception import GitHubException, RequestFailed

    try:
        found = request(**params).json()
    except RequestFailed as exc:
        return f"GitHub answered {exc.response.status_code}"
    except GitHubException as exc:
        return str(exc)
    return [item for item in found if isinstance(item, dict)] if isinstance(found, list) else "not a list"


def _installations(found: list[dict[str, Any]] | str, page: str) -> Iterator[Check]:
    if isinstance(found, str):
        yield Check(FAIL, "installations", f"could not be listed: {found}", "run doctor again; check GitHub's status")
        return
    if not found:
        yield Check(FAIL, "installations", "the App is not installed anywhere", f"install it: {page}/installations/new")
        return
    for item in found:
        account = str((item.get("account") or {}).get("login", item.get("id")))
        what = f"installation {item.get('id')} ({account})"
        settings_page = str(item.get("html_url") or page)
        if item.get("suspended_at"):
            yield Check(FAIL, what, "suspended: nothing is processed", f"unsuspend it: {settings_page}")
            continue
        lacking = missing({str(k): str(v) for k, v in (item.get("permissions") or {}).items()})
        if lacking:
            said = "; ".join(f"{feature} needs {', '.join(perms)}" for feature, perms in lacking.items())
            # without the core ones nothing is answered; without the others, only those features are off
            status = FAIL if set(lacking) & CORE else WARN
            yield Check(status, what, said, f"accept the App's permissions there: {settings_page}")
            continue
        chosen = "every repository" if item.get("repository_selection") == "all" else "the repositories chosen"
        yield Check(OK, what, f"every feature has its permissions, on {chosen}")


def _deliveries(found: list[dict[str, Any]] | str) -> Iterator[Check]:
    if isinstance(found, str):
        yield Check(FAIL, "webhook deliveries", f"could not be listed: {found}", "check the App's webhook settings")
        return
    if not found:
        yield Check(WARN, "webhook deliveries", "none yet", "run a workflow in a repository the App is installed on")
        return
    failed = [d for d in found if not 200 <= int(d.get("status_code") or 0) < 300]
    if not failed:
        yield Check(OK, "webhook deliveries", f"the last {len(found)} all answered 2xx")
        return
    yield Check(
        FAIL,
        "webhook deliveries",
        f"{len(failed)} of the last {len(found)} failed",
        "check that the webhook URL reaches `flaketally serve` and GITHUB_WEBHOOK_SECRET is the App's, then "
        "redeliver each below",
    )
    for d in failed:
        said = (
            f"{d.get('event')}.{d.get('action')} at {d.get('delivered_at')}: {d.get('status')} ({d.get('status_code')})"
        )
        yield Check(FAIL, f"delivery {d.get('id')}", said, f"flaketally doctor --redeliver {d.get('id')}")


def _services(environ: Mapping[str, str], settings: Settings | None = None) -> list[Check]:
    """Redis and the store, from the settings or, when those failed, from the variables that name them."""
    from bot.settings import DEFAULT_REDIS_URL, database_url

    redis_url = settings.redis_url if settings else environ.get("REDIS_URL") or DEFAULT_REDIS_URL
    return [_redis(redis_url), _store(settings.database_url if settings else database_url(environ))]


def _redis(url: str) -> Check:
    import redis

    client = redis.Redis.from_url(url, socket_connect_timeout=3, socket_timeout=3)
    try:
        client.ping()
    except redis.RedisError as exc:
        return Check(FAIL, "Redis", f"{_redact(url)} does not answer ({exc})", "start Redis, or set REDIS_URL to it")
    finally:
        client.close()
    return Check(OK, "Redis", f"{_redact(url)} answers")


def _store(url: str) -> Check:
    import sqlalchemy as sa

    from bot.store import SCHEMA_HEAD, Store, StoreError

    try:
        store = Store(url)
    except StoreError as exc:
        return Check(FAIL, "store", str(exc), "set DATABASE_URL to a PostgreSQL URL or a SQLite file")
    where = store.engine.url.render_as_string(hide_password=True)
    try:
        with store.engine.connect() as conn:
            version = store.schema_version(conn)
    except sa.exc.SQLAlchemyError as exc:
        return Check(
            FAIL, "store", f"{where} cannot be reached ({type(exc).__name__})", "start it, or fix DATABASE_URL"
        )
    finally:
        store.close()
    if version == SCHEMA_HEAD:
        return Check(OK, "store", f"{where}, at migration {SCHEMA_HEAD}")
    if version is not None and version > SCHEMA_HEAD:
        return Check(FAIL, "store", f"{where} is at {version}, newer than this Flaketally", "upgrade Flaketally")
    said = f"{where} is {'at ' + version if version else 'not migrated'}, behind {SCHEMA_HEAD}"
    return Check(FAIL, "store", said, "run `flaketally migrate`")


def redeliver(environ: Mapping[str, str], delivery_id: int) -> Check:
    """Ask GitHub to deliver one webhook delivery again (``doctor --redeliver ID``)."""
    from githubkit.exception import GitHubException, RequestFailed

    try:
        settings = Settings.from_env(environ, require_app=True)
    except SettingsError as exc:
        return Check(FAIL, "settings", str(exc), "set it in the environment or the env file")
    with _app_client(settings) as gh:
        try:
            gh.rest.apps.redeliver_webhook_delivery(delivery_id)
        except RequestFailed as exc:
            status = exc.response.status_code
            fix = "list the failed ones with flaketally doctor" if status == 404 else "try again later"
            return Check(FAIL, f"delivery {delivery_id}", f"GitHub refused to redeliver it ({status})", fix)
        except GitHubException as exc:
            return Check(FAIL, f"delivery {delivery_id}", f"cannot reach {settings.api_url} ({exc})")
    return Check(OK, f"delivery {delivery_id}", "GitHub is delivering it again")


def doctor_command(args: argparse.Namespace) -> int:
    if args.redeliver is not None:
        checks = [redeliver(os.environ, args.redeliver)]
    else:
        checks = doctor(os.environ, deliveries=args.deliveries)
    for check in checks:
        print(check.line())
    failed = sum(1 for c in checks if c.status == FAIL)
    if not args.redeliver:
        print(f"{failed} checks failed" if failed else "every check passed")
    return 1 if failed else 0

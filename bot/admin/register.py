"""``flaketally register``: the GitHub App registered from ``app.yml`` with GitHub's manifest flow.

A one-page form on ``http://127.0.0.1:PORT/`` posts ``app.yml`` (as JSON, webhook URL and ``redirect_url``
filled in) to GitHub's new-App page with a random ``state``. GitHub sends the browser back to
``/callback?code=…&state=…`` (a wrong state is refused, and the form keeps waiting);
``POST /app-manifests/{code}/conversions`` (unauthenticated; a code is good for one hour, once) answers the
App's id, private key and webhook secret. The key goes to ``<env-file stem>.private-key.pem`` beside the env
file, the settings to the env file, both mode 0600; neither is overwritten without ``--force``.
"""

from __future__ import annotations

import argparse
import contextlib
import html
import http.server
import json
import os
import re
import secrets
import shlex
import socketserver
import sys
import threading
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlencode, urlsplit

import yaml

from bot.github.limits import DEFAULT_API_URL, web_url
from bot.settings import Settings, SettingsError

MANIFEST = Path(__file__).resolve().parents[2] / "app.yml"
TIMEOUT = 15 * 60.0  # seconds the form waits for GitHub to send the browser back
NO_BROWSER = "FLAKETALLY_NO_BROWSER"  # set: the form's address is printed, no browser is opened
EXIT_REGISTERED, EXIT_REFUSED, EXIT_USAGE = 0, 1, 2

_LOGIN = re.compile(r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})")
_CODE = re.compile(r"[A-Za-z0-9_-]{1,100}")
_LOCAL_HOSTS = ("127.0.0.1", "localhost")
_HEADERS = {
    "Content-Type": "text/html; charset=utf-8",
    "Cache-Control": "no-store",
    "Referrer-Policy": "no-referrer",  # the callback's address holds the code
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; frame-ancestors 'none'",
}
_AGAIN = "<p>Open the address <code>flaketally register</code> printed and press the button again.</p>"


class _Refusal(Exception):
    """Why register does not start, with its exit code."""

    def __init__(self, code: int, said: str) -> None:
        super().__init__(said)
        self.code = code


def key_path(env_file: Path) -> Path:
    """Where the private key is written: ``flaketally.env`` → ``flaketally.private-key.pem`` beside it."""
    return env_file.with_name(f"{env_file.stem}.private-key.pem")


def register_command(args: argparse.Namespace, environ: Mapping[str, str] = os.environ) -> int:
    """``flaketally register``: GitHub's API from ``GITHUB_API_URL`` and its web pages from ``GITHUB_URL``
    (else those of that API); a browser opened on the form unless ``FLAKETALLY_NO_BROWSER`` is set."""
    api_url = (environ.get("GITHUB_API_URL") or "").strip().rstrip("/") or DEFAULT_API_URL
    web = (environ.get("GITHUB_URL") or "").strip().rstrip("/") or web_url(api_url)
    opener = None if (environ.get(NO_BROWSER) or "").strip() else _open_browser
    env_file = Path(args.env_file).expanduser()
    return register(api_url, web, args.org, args.webhook_url, env_file, args.port, args.force, on_ready=opener)


def register(
    api_url: str,
    web: str,
    org: str | None,
    webhook_url: str | None,
    env_file: Path,
    port: int,
    force: bool,
    *,
    on_ready: Callable[[str], None] | None = None,
    timeout: float = TIMEOUT,
    manifest_path: Path = MANIFEST,
) -> int:
    """The manifest flow from start to end; the exit code. ``port`` 0 takes any free port. ``on_ready`` is
    given the form's address once the server listens (the command opens a browser there)."""
    try:
        _check_usage(api_url, web, org, webhook_url, port)
        _check_files(env_file, force)
        manifest = _read_manifest(manifest_path)
    except _Refusal as refusal:
        _say(str(refusal))
        return refusal.code
    if not webhook_url:
        placeholder = manifest["hook_attributes"].get("url")
        _say(
            f"warning: no --webhook-url, so the App's webhook is app.yml's placeholder {placeholder}: no delivery "
            "arrives until its Webhook URL is set, in the App's settings, to `flaketally serve`'s /webhook"
        )
    try:
        server = _Server(port)
    except OSError as exc:
        _say(f"cannot listen on 127.0.0.1:{port} ({exc.strerror or exc}): choose another --port")
        return EXIT_USAGE
    with server:
        flow = _Flow(secrets.token_urlsafe(24), api_url, env_file, force)
        sent = _filled(manifest, webhook_url, f"http://127.0.0.1:{server.server_port}/callback")
        flow.form = _form_page(_new_app_url(web, org, flow.state), sent, org)
        server.flow = flow
        return _run(server, flow, web, org, on_ready, timeout)


def _open_browser(url: str) -> None:
    import webbrowser

    with contextlib.suppress(webbrowser.Error):  # the address is printed
        webbrowser.open(url)


def _check_usage(api_url: str, web: str, org: str | None, webhook_url: str | None, port: int) -> None:
    for name, url in (("GITHUB_API_URL", api_url), ("GITHUB_URL", web), ("--webhook-url", webhook_url)):
        if url is not None and not _is_http_url(url):
            raise _Refusal(EXIT_USAGE, f"{name} must be an http(s) URL, not {url!r}")
    if org is not None and not _LOGIN.fullmatch(org):
        raise _Refusal(EXIT_USAGE, f"--org must be an organisation's login (letters, digits and -), not {org!r}")
    if not 0 <= port <= 65535:
        raise _Refusal(EXIT_USAGE, f"--port must be from 1 to 65535, not {port}")


def _is_http_url(url: str) -> bool:
    try:
        parts = urlsplit(url)
        _ = parts.port  # raises on a malformed port
    except ValueError:
        return False
    return parts.scheme in ("http", "https") and bool(parts.hostname) and not parts.fragment


def _check_files(env_file: Path, force: bool) -> None:
    """That the env file and the key can be written (and, without ``force``, are not there), before GitHub
    is asked: its code is good once, so nothing may fail after it."""
    folder = env_file.parent
    if not folder.is_dir():
        raise _Refusal(EXIT_USAGE, f"the folder of --env-file {env_file} does not exist")
    if not os.access(folder, os.W_OK | os.X_OK):
        raise _Refusal(EXIT_USAGE, f"the folder of --env-file {env_file} is not writable")
    for path in (env_file, key_path(env_file)):
        if path.is_dir():
            raise _Refusal(EXIT_USAGE, f"{path} is a folder: --env-file names the file to write")
        if not force and (path.exists() or path.is_symlink()):
            raise _Refusal(EXIT_REFUSED, f"{path} exists: nothing was overwritten (--force replaces it)")


def _read_manifest(path: Path) -> dict[str, Any]:
    """app.yml, as a mapping."""
    try:
        manifest = yaml.safe_load(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        why = "is missing: register reads app.yml from the root of a Flaketally checkout"
    except (OSError, UnicodeDecodeError) as exc:
        why = f"cannot be read: {exc}"
    except yaml.YAMLError as exc:
        why = f"is not valid YAML: {exc}"
    else:
        if isinstance(manifest, dict) and isinstance(manifest.get("hook_attributes"), dict):
            return manifest
        why = "is not a GitHub App manifest (a mapping with hook_attributes)"
    raise _Refusal(EXIT_USAGE, f"the App's manifest {path} {why}")


def _filled(manifest: Mapping[str, Any], webhook_url: str | None, redirect_url: str) -> dict[str, Any]:
    """The manifest GitHub is sent: app.yml's, with the webhook (when given) and where to come back."""
    hooks = dict(manifest["hook_attributes"])
    if webhook_url:
        hooks["url"] = webhook_url
    return {**manifest, "hook_attributes": hooks, "redirect_url": redirect_url}


def _new_app_url(web: str, org: str | None, state: str) -> str:
    owner = f"/organizations/{org}" if org else ""
    return f"{web.rstrip('/')}{owner}/settings/apps/new?{urlencode({'state': state})}"


@dataclass(frozen=True, slots=True)
class _Outcome:
    code: int  # the exit code
    page: str  # the browser's answer
    said: tuple[str, ...] = ()  # for stdout
    error: str = ""  # for stderr


@dataclass(slots=True)
class _Flow:
    """One registration: its state, the form, and how it ended (set once, under ``lock``)."""

    state: str
    api_url: str
    env_file: Path
    force: bool
    form: str = ""
    outcome: _Outcome | None = None
    closed: bool = False
    lock: threading.Lock = field(default_factory=threading.Lock)
    done: threading.Event = field(default_factory=threading.Event)

    def callback(self, query: Mapping[str, list[str]]) -> tuple[int, str, bool]:
        """GitHub's return: a wrong state or a malformed code is refused and the form keeps waiting; the
        right one is exchanged for the App, once. The answer, and whether the registration has ended."""
        state, code = query.get("state", [""])[0], query.get("code", [""])[0]
        if not secrets.compare_digest(state.encode(), self.state.encode()):
            _say("refused a return to /callback that is not from this form (wrong state); still waiting")
            return 400, _page("Not this registration", f"<p>This link is not from this form.</p>{_AGAIN}"), False
        if not _CODE.fullmatch(code):
            _say("refused a return to /callback without a code; still waiting")
            return 400, _page("No code", f"<p>GitHub sent no code back.</p>{_AGAIN}"), False
        with self.lock:
            if self.outcome is None and not self.closed:
                self.outcome = _complete(self, code)
                return (200 if self.outcome.code == EXIT_REGISTERED else 502), self.outcome.page, True
        return 409, _page("Already finished", "<p>This registration has finished: see the terminal.</p>"), False


class _Handler(http.server.BaseHTTPRequestHandler):
    server_version = "flaketally-register"
    timeout = 30  # a browser's idle pre-connection does not hold a thread for ever

    def __init__(self, flow: _Flow, *args: Any) -> None:
        self.flow = flow
        super().__init__(*args)

    def do_GET(self) -> None:
        host = self.headers.get("Host") or ""
        parts = urlsplit(self.path)
        if (host.rsplit(":", 1)[0] if ":" in host else host) not in _LOCAL_HOSTS:
            # another site's name pointed at 127.0.0.1 (DNS rebinding) reads neither the form nor its state
            self._send(421, _page("Wrong address", _AGAIN))
        elif parts.path == "/":
            self._send(200, self.flow.form)
        elif parts.path == "/callback":
            status, page, finished = self.flow.callback(parse_qs(parts.query))
            try:
                self._send(status, page)
            finally:
                if finished:
                    self.flow.done.set()
        else:
            self._send(404, _page("Not found", _AGAIN))

    def _send(self, status: int, page: str) -> None:
        body = page.encode("utf-8")
        self.send_response(status)
        for name, value in {**_HEADERS, "Content-Length": str(len(body))}.items():
            self.send_header(name, value)
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, format: str, *args: Any) -> None:
        """No access log: the terminal says each step."""


class _Server(socketserver.ThreadingMixIn, http.server.HTTPServer):
    daemon_threads = True
    flow: _Flow

    def __init__(self, port: int) -> None:
        super().__init__(("127.0.0.1", port), self._handler)

    def _handler(self, *args: Any) -> _Handler:
        return _Handler(self.flow, *args)

    def server_bind(self) -> None:
        socketserver.TCPServer.server_bind(self)  # without HTTPServer's reverse lookup of the address
        self.server_name, self.server_port = "127.0.0.1", int(self.server_address[1])


def _run(
    server: _Server, flow: _Flow, web: str, org: str | None, on_ready: Callable[[str], None] | None, timeout: float
) -> int:
    """Serve the form until GitHub sends the browser back (or ``timeout``); then say how it ended."""
    thread = threading.Thread(target=server.serve_forever, args=(0.1,), name="flaketally-register", daemon=True)
    thread.start()
    url, port = f"http://127.0.0.1:{server.server_port}/", server.server_port
    interrupted = False
    try:
        where = f"the organisation {org}" if org else "your account"
        print(f"flaketally: open {url} to create the App on {web} for {where} (waiting {timeout / 60:g} minutes)")
        print(f"flaketally: from another machine: ssh -L {port}:127.0.0.1:{port} HOST, then open it", flush=True)
        if on_ready is not None:
            on_ready(url)
        flow.done.wait(timeout)
    except KeyboardInterrupt:
        interrupted = True
    finally:
        server.shutdown()
        thread.join(timeout=5)
        with flow.lock:  # an exchange under way finishes first; none starts after
            flow.closed = True
            outcome = flow.outcome
    if outcome is None:
        why = "stopped" if interrupted else f"GitHub did not send the browser back within {timeout / 60:g} minutes"
        _say(f"{why}: nothing was registered or written; run flaketally register again")
        return EXIT_REFUSED
    for line in outcome.said:
        print(line, flush=True)
    if outcome.error:
        _say(outcome.error)
    return outcome.code


def _complete(flow: _Flow, code: str) -> _Outcome:
    """The code exchanged for the App, and its settings written: what to show and to say."""
    app = _exchange(flow.api_url, code)
    if isinstance(app, str):
        return _Outcome(EXIT_REFUSED, _page("Not registered", f"<p>{html.escape(app)}</p>"), error=app)
    env_file, key_file = flow.env_file, key_path(flow.env_file)
    try:
        settings = _settings_of(app, flow.api_url)
        _write_secret(key_file, settings.private_key, replace=flow.force)
        _write_secret(env_file, _env_text(app, settings, key_file), replace=flow.force)
    except (SettingsError, OSError) as exc:
        error = (
            f"the App was created ({_line(app.get('html_url'))}) but its settings were not written: {exc}. On its "
            "page generate a private key and set a webhook secret, and write them to the env file by hand"
        )
        return _Outcome(EXIT_REFUSED, _page("Not written", f"<p>{html.escape(error)}</p>"), error=error)
    name, page_url = _line(app.get("name")), _line(app.get("html_url"))
    install, owner = f"{page_url}/installations/new", app.get("owner")
    sourced = str(env_file) if env_file.is_absolute() else f"./{env_file}"  # `. NAME` would search $PATH
    said = (
        f"flaketally: registered the GitHub App {name} ({page_url}), id {settings.app_id}, owned by "
        f"{_line(owner.get('login') if isinstance(owner, dict) else None)}",
        f"flaketally: wrote {env_file} and {key_file} (both mode 0600)",
        f"flaketally: install it on the organisation or the repositories to judge: {install}",
        "then:",
        f"  set -a; . {shlex.quote(sourced)}; set +a",
        "  flaketally doctor    # the settings, the key, the installations, the webhook, Redis and the store",
        "  flaketally serve     # the webhook receiver, at the App's webhook URL",
        "  flaketally worker    # the jobs that judge each run",
    )
    body = (
        f"<p>Flaketally is registered as <a href='{html.escape(page_url)}'>{html.escape(name)}</a>; its settings "
        f"are in <code>{html.escape(str(env_file))}</code>.</p><p>Next, <a href='{html.escape(install)}'>install "
        "it</a> on the organisation or the repositories to judge. You can close this page.</p>"
    )
    unsigned = "" if app.get("webhook_secret") else "warning: GitHub set no webhook secret: set one in its settings"
    return _Outcome(EXIT_REGISTERED, _page("Registered", body), said, error=unsigned)


def _exchange(api_url: str, code: str) -> dict[str, Any] | str:
    """``apps/create-from-manifest``: the App GitHub made, or why there is none."""
    from githubkit import GitHub
    from githubkit.exception import GitHubException, RequestFailed

    from bot.github.client import USER_AGENT

    try:
        with GitHub(base_url=api_url.rstrip("/") + "/", user_agent=USER_AGENT, timeout=30, auto_retry=False) as gh:
            found: Any = gh.rest.apps.create_from_manifest(code).json()
    except RequestFailed as exc:
        status = exc.response.status_code
        why = {404: "unknown or used already", 422: "not accepted"}.get(status, "refused")
        return f"GitHub refused the code ({status}, {why}; it is good for one hour, once): nothing was written"
    except GitHubException as exc:
        return f"GitHub at {api_url} could not be reached to finish ({exc}): nothing was written"
    return found if isinstance(found, dict) else "GitHub's answer is not a JSON object: nothing was written"


def _settings_of(app: Mapping[str, Any], api_url: str) -> Settings:
    """GitHub's answer read as the settings the env file gives: its id, key and API checked before writing."""
    environ = {"GITHUB_APP_ID": str(app.get("id")), "GITHUB_APP_PRIVATE_KEY": str(app.get("pem") or "")}
    environ |= {"GITHUB_WEBHOOK_SECRET": str(app.get("webhook_secret") or "-"), "GITHUB_API_URL": api_url}
    return Settings.from_env(environ, require_app=True)


def _env_text(app: Mapping[str, Any], settings: Settings, key_file: Path) -> str:
    today = datetime.now(UTC).date().isoformat()
    secret = _line(app.get("webhook_secret") or "")
    lines = [
        f"# The GitHub App {_line(app.get('slug'))} ({_line(app.get('html_url'))}), written by flaketally register "
        f"on {today}.",
        "# Secret, like the private key it names: keep both files mode 0600.",
        f"GITHUB_APP_ID={settings.app_id}",
        f"GITHUB_APP_PRIVATE_KEY_PATH={shlex.quote(str(key_file.resolve()))}",
        f"GITHUB_WEBHOOK_SECRET={shlex.quote(secret)}" if secret else "# GITHUB_WEBHOOK_SECRET= (GitHub set none)",
    ]
    if settings.api_url != DEFAULT_API_URL:
        lines.append(f"GITHUB_API_URL={shlex.quote(settings.api_url)}")
    return "\n".join(lines) + "\n"


def _write_secret(path: Path, text: str, *, replace: bool) -> None:
    """``text`` to ``path``, mode 0600 from its first byte: created exclusively (an existing file stays as it
    was), or with ``replace`` written beside it and renamed over it."""
    target = path.with_name(f".{path.name}.{secrets.token_hex(4)}.tmp") if replace else path
    fd = os.open(target, os.O_CREAT | os.O_EXCL | os.O_WRONLY, 0o600)
    try:
        with os.fdopen(fd, "w", encoding="utf-8", newline="\n") as out:
            out.write(text)
            out.flush()
            os.fsync(out.fileno())
        if replace:
            os.replace(target, path)
    except BaseException:
        if replace:
            target.unlink(missing_ok=True)
        raise


def _form_page(action: str, manifest: Mapping[str, Any], org: str | None) -> str:
    owner = f"the organisation <b>{html.escape(org)}</b>" if org else "your account"
    hook = html.escape(str(manifest["hook_attributes"].get("url")))
    body = (
        f"<p>The button sends Flaketally's manifest (<code>app.yml</code>) to GitHub, to create the App for "
        f"{owner}. GitHub shows its name, permissions and events; confirm there, and GitHub sends you back here "
        f"to finish.</p><p>Webhook: <code>{hook}</code></p>"
        f"<form method='post' action='{html.escape(action)}'>"
        f"<input type='hidden' name='manifest' value='{html.escape(json.dumps(manifest, default=str))}'>"
        "<button type='submit'>Create the GitHub App</button></form>"
    )
    return _page("Register Flaketally", body)


def _page(title: str, body: str) -> str:
    return (
        "<!doctype html><html lang='en'><head><meta charset='utf-8'>"
        f"<title>{html.escape(title)} · flaketally register</title>"
        "<style>body{font:16px/1.5 system-ui,sans-serif;max-width:40em;margin:3em auto;padding:0 1em}"
        "button{font-size:1.1em;padding:.5em 1em}</style></head>"
        f"<body><h1>{html.escape(title)}</h1>{body}</body></html>\n"
    )


def _line(value: Any) -> str:
    """A value from GitHub on one line (it goes into a comment and the terminal)."""
    return " ".join(str(value if value is not None else "?").split())


def _say(line: str) -> None:
    print(f"flaketally: {line}", file=sys.stderr, flush=True)

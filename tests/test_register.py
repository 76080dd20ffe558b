"""``flaketally register``: GitHub's App manifest flow end to end against the fake GitHub.

The browser is played by urllib: respx (the fake) intercepts every httpx client in the process, while the
form is served for real on a free port of 127.0.0.1. Every wait is bounded and synchronised on the
``on_ready`` callback or the register thread itself, never on a sleep.
"""

from __future__ import annotations

import argparse
import json
import os
import shlex
import shutil
import socket
import stat
import subprocess
import threading
import urllib.error
import urllib.request
from collections.abc import Callable, Iterator
from dataclasses import dataclass, field
from html.parser import HTMLParser
from pathlib import Path
from typing import Any
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import yaml

from bot.admin import register as module
from bot.admin.register import key_path, register, register_command
from bot.cli import main
from bot.settings import Settings
from tests.conftest import shared_path
from tests.github_fake import FakeGitHub

ROOT = Path(__file__).resolve().parent.parent
APP_YML: dict[str, Any] = yaml.safe_load((ROOT / "app.yml").read_text(encoding="utf-8"))
WEBHOOK = "https://ci.example.org/webhook"
WAIT = 20.0  # seconds any step may take before the test fails
# urllib without proxies: the form is on 127.0.0.1 whatever http_proxy says
BROWSER = urllib.request.build_opener(urllib.request.ProxyHandler({}))


def get(url: str, **headers: str) -> tuple[int, str]:
    try:
        with BROWSER.open(urllib.request.Request(url, headers=headers), timeout=WAIT) as answer:
            return int(answer.status), answer.read().decode("utf-8")
    except urllib.error.HTTPError as refused:
        with refused:
            return refused.code, refused.read().decode("utf-8")


class Page(HTMLParser):
    """The forms, inputs, buttons and links of a page."""

    def __init__(self, text: str) -> None:
        super().__init__()
        self.forms: list[dict[str, str | None]] = []
        self.inputs: dict[str, dict[str, str | None]] = {}
        self.buttons: list[str] = []
        self.links: list[str] = []
        self._in_button = False
        self.feed(text)
        self.close()

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        found = dict(attrs)
        if tag == "form":
            self.forms.append(found)
        elif tag == "input":
            self.inputs[str(found.get("name"))] = found
        elif tag == "button":
            self._in_button = True
            self.buttons.append("")
        elif tag == "a":
            self.links.append(str(found.get("href")))

    def handle_endtag(self, tag: str) -> None:
        self._in_button = self._in_button and tag != "button"

    def handle_data(self, data: str) -> None:
        if self._in_button:
            self.buttons[-1] += data


@dataclass
class Running:
    """``register`` serving in a thread: its form's address once it listens, and its exit code once done."""

    ready: threading.Event = field(default_factory=threading.Event)
    urls: list[str] = field(default_factory=list)
    codes: list[int] = field(default_factory=list)
    thread: threading.Thread | None = None

    def begin(self, call: Callable[[], int]) -> Running:
        """``call`` in a daemon thread, so that a failing test cannot hang the run."""
        self.thread = threading.Thread(target=lambda: self.codes.append(call()), daemon=True)
        self.thread.start()
        return self

    def on_ready(self, url: str) -> None:
        self.urls.append(url)
        self.ready.set()

    @property
    def url(self) -> str:
        assert self.ready.wait(WAIT), "register did not start serving"
        return self.urls[0]

    @property
    def port(self) -> int:
        return int(urlsplit(self.url).port or 0)

    def form(self) -> tuple[str, str, dict[str, Any], Page]:
        """The form's target, its state, the manifest it sends, and the page."""
        status, text = get(self.url)
        assert status == 200
        page = Page(text)
        assert len(page.forms) == 1 and page.forms[0]["method"] == "post"
        action = str(page.forms[0]["action"])
        manifest = page.inputs["manifest"]
        assert manifest["type"] == "hidden"
        return action, parse_qs(urlsplit(action).query)["state"][0], json.loads(str(manifest["value"])), page

    @property
    def waiting(self) -> bool:
        return self.thread is not None and self.thread.is_alive()

    def exit_code(self) -> int:
        assert self.thread is not None
        self.thread.join(WAIT)
        assert not self.thread.is_alive(), "register did not finish"
        return self.codes[0]


def start_register(github: FakeGitHub, env_file: Path, *, force: bool = False, timeout: float = WAIT) -> Running:
    running = Running()
    web, ready = "https://github.com", running.on_ready
    return running.begin(
        lambda: register(github.api_url, web, None, WEBHOOK, env_file, 0, force, on_ready=ready, timeout=timeout)
    )


def start_command(monkeypatch: pytest.MonkeyPatch, call: Callable[[], int]) -> Running:
    """A command run as a user runs it, the test standing where the browser would be opened."""
    running = Running()
    monkeypatch.setattr(module, "_open_browser", running.on_ready)
    for name in ("FLAKETALLY_NO_BROWSER", "GITHUB_API_URL", "GITHUB_URL"):
        monkeypatch.delenv(name, raising=False)
    return running.begin(call)


def registered(github: FakeGitHub, env_file: Path, code: str, *, force: bool = False) -> int:
    """One whole run: the form read, GitHub's return with ``code``, the exit code."""
    github.manifest_codes.add(code)
    running = start_register(github, env_file, force=force)
    _, state, _, _ = running.form()
    assert get(f"{running.url}callback?code={code}&state={state}")[0] == 200
    return running.exit_code()


def at_once(github: FakeGitHub, env_file: Path, port: int = 0, **options: Any) -> int:
    """A run that must end before serving anything (and, were it to serve, does not wait long)."""
    served: list[str] = []
    code = register(
        github.api_url,
        "https://github.com",
        None,
        WEBHOOK,
        env_file,
        port,
        False,
        on_ready=served.append,
        timeout=0.1,
        **options,
    )
    assert not served, "register served the form"
    return code


def env_values(path: Path) -> dict[str, str]:
    """The env file's variables, read as a shell reads them (its values are shell-quoted)."""
    values = {}
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip() and not line.startswith("#"):
            name, _, value = line.partition("=")
            values[name] = shlex.split(value)[0]
    return values


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def expected_manifest(port: int, webhook: str | None = WEBHOOK) -> dict[str, Any]:
    hooks = {**APP_YML["hook_attributes"], "url": webhook or APP_YML["hook_attributes"]["url"]}
    return {**APP_YML, "hook_attributes": hooks, "redirect_url": f"http://127.0.0.1:{port}/callback"}


@pytest.fixture
def env_file(tmp_path: Path) -> Path:
    return tmp_path / "flaketally.env"


def test_the_manifest_flow_registers_the_app_and_writes_its_settings(
    github: FakeGitHub, env_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    github.manifest_codes.add("c0de")
    running = start_register(github, env_file)
    action, state, manifest, page = running.form()
    assert action == f"https://github.com/settings/apps/new?state={state}" and len(state) >= 20
    assert manifest == expected_manifest(running.port)
    assert [b.strip() for b in page.buttons] == ["Create the GitHub App"]

    # a return that does not carry this form's state is refused, and the form keeps waiting
    status, text = get(f"{running.url}callback?code=c0de&state=WRONG")
    assert status == 400 and "not from this form" in text
    assert get(f"{running.url}callback?state={state}")[0] == 400  # no code
    assert get(running.url, Host="rebound.example.com")[0] == 421  # another name for 127.0.0.1
    assert running.waiting and not github.calls("manifest_conversion")
    assert not env_file.exists() and not key_path(env_file).exists()

    status, text = get(f"{running.url}callback?code=c0de&state={state}")
    assert status == 200
    assert "https://github.com/apps/flaketally/installations/new" in Page(text).links
    assert running.exit_code() == 0
    [conversion] = github.calls("manifest_conversion")
    assert (conversion.method, conversion.path, conversion.authorization) == (
        "POST",
        "/app-manifests/c0de/conversions",
        None,
    )
    assert github.manifest_converted == ["c0de"]

    key = key_path(env_file)
    assert key == env_file.parent / "flaketally.private-key.pem"
    assert mode(env_file) == mode(key) == 0o600
    assert key.read_text(encoding="ascii") == github.private_key
    values = env_values(env_file)
    assert values == {
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_APP_PRIVATE_KEY_PATH": str(key.resolve()),
        "GITHUB_WEBHOOK_SECRET": github.manifest_webhook_secret,
    }
    settings = Settings.from_env(values)
    assert (settings.app_id, settings.private_key) == (github.app_id, github.private_key)
    assert (settings.webhook_secret, settings.api_url) == (github.manifest_webhook_secret, "https://api.github.com")
    assert "flaketally (https://github.com/apps/flaketally)" in env_file.read_text(encoding="utf-8").splitlines()[0]

    out, err = capsys.readouterr()
    assert "registered the GitHub App Flaketally (https://github.com/apps/flaketally), id 4242, owned by acme" in out
    assert "https://github.com/apps/flaketally/installations/new" in out
    for command in ("flaketally doctor", "flaketally serve", "flaketally worker"):
        assert command in out
    assert "wrong state" in err and "warning" not in err


@pytest.mark.skipif(shutil.which("sh") is None, reason="no POSIX shell to source the env file")
def test_the_env_file_sources_in_a_shell_as_the_readme_says(github: FakeGitHub, tmp_path: Path) -> None:
    env_file = tmp_path / "a folder" / "prod.env"  # a space in the key's path: quoted
    env_file.parent.mkdir()
    assert registered(github, env_file, "shell") == 0
    script = f'set -a; . {shlex.quote(str(env_file))}; set +a; printf "%s\\n" "$GITHUB_APP_PRIVATE_KEY_PATH"'
    shell = subprocess.run(["sh", "-c", script], capture_output=True, text=True, check=True, timeout=WAIT)
    assert shell.stdout == f"{tmp_path / 'a folder' / 'prod.private-key.pem'}\n"
    assert Settings.from_env(env_values(env_file)).private_key == github.private_key


def test_files_written_before_are_kept_without_force_and_replaced_with_it(
    github: FakeGitHub, env_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert registered(github, env_file, "first") == 0
    key = key_path(env_file)
    before = env_file.read_bytes(), key.read_bytes()
    capsys.readouterr()

    assert at_once(github, env_file) == 1
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and str(env_file) in err and "--force" in err
    assert (env_file.read_bytes(), key.read_bytes()) == before
    env_file.unlink()  # the key beside it is enough to refuse
    assert at_once(github, env_file) == 1
    assert str(key) in capsys.readouterr().err and key.read_bytes() == before[1] and not env_file.exists()

    env_file.write_bytes(before[0])
    env_file.chmod(0o644)
    key.chmod(0o644)
    github.manifest_webhook_secret = "a-new-secret"
    assert registered(github, env_file, "second", force=True) == 0
    assert env_values(env_file)["GITHUB_WEBHOOK_SECRET"] == "a-new-secret"
    assert mode(env_file) == mode(key) == 0o600  # replaced, not rewritten in place
    assert sorted(p.name for p in env_file.parent.iterdir()) == ["flaketally.env", "flaketally.private-key.pem"]
    assert github.manifest_converted == ["first", "second"]


def test_a_code_github_refuses_exits_1_and_writes_nothing(
    github: FakeGitHub, env_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    running = start_register(github, env_file)  # no code is known to GitHub: used, expired or made up
    _, state, _, _ = running.form()
    status, text = get(f"{running.url}callback?code=used&state={state}")
    assert status == 502 and "GitHub refused the code" in text
    assert running.exit_code() == 1
    assert [c.path for c in github.calls("manifest_conversion")] == ["/app-manifests/used/conversions"]
    assert list(env_file.parent.iterdir()) == []
    err = capsys.readouterr().err
    assert "GitHub refused the code (404, unknown or used already" in err and "nothing was written" in err


def test_an_organisation_s_app_and_no_webhook_url(
    github: FakeGitHub, env_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    args = ["register", "--org", "acme", "--env-file", str(env_file), "--port", "0"]
    running = start_command(monkeypatch, lambda: main(args))
    action, state, manifest, _ = running.form()
    assert action == f"https://github.com/organizations/acme/settings/apps/new?state={state}"
    assert manifest == expected_manifest(running.port, webhook=None)  # app.yml's placeholder, said
    github.manifest_codes.add("org")
    assert get(f"{running.url}callback?code=org&state={state}")[0] == 200
    assert running.exit_code() == 0
    err = capsys.readouterr().err
    assert "no --webhook-url" in err and APP_YML["hook_attributes"]["url"] in err


@pytest.mark.parametrize(
    ("environ", "web"),
    [
        ({"GITHUB_API_URL": "https://ghe.example.com/api/v3/"}, "https://ghe.example.com"),
        ({"GITHUB_API_URL": "https://ghe.example.com/api/v3", "GITHUB_URL": "https://ui.ghe.example.com"}, None),
    ],
)
def test_github_enterprise_server(
    environ: dict[str, str], web: str | None, env_file: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    web = web or environ["GITHUB_URL"]
    args = argparse.Namespace(org=None, webhook_url=WEBHOOK, env_file=str(env_file), port=0, force=False)
    with FakeGitHub(api_url="https://ghe.example.com/api/v3") as ghes:
        ghes.manifest_codes.add("ghes")
        running = start_command(monkeypatch, lambda: register_command(args, environ))
        action, state, _, _ = running.form()
        assert action == f"{web}/settings/apps/new?state={state}"
        status, text = get(f"{running.url}callback?code=ghes&state={state}")
        assert status == 200 and "https://ghe.example.com/apps/flaketally/installations/new" in Page(text).links
        assert running.exit_code() == 0
        assert [c.host for c in ghes.calls("manifest_conversion")] == ["ghe.example.com"]
    values = env_values(env_file)
    assert values["GITHUB_API_URL"] == "https://ghe.example.com/api/v3"
    assert Settings.from_env(values).api_url == "https://ghe.example.com/api/v3"


def test_no_browser_opens_when_told_not_to(env_file: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    opened: list[str] = []
    monkeypatch.setattr(module, "_open_browser", opened.append)
    args = argparse.Namespace(org=None, webhook_url=WEBHOOK, env_file=str(env_file), port=0, force=False)
    seen: list[Any] = []

    def register(*args: Any, on_ready: Any, **options: Any) -> int:
        seen.append(on_ready)
        return 0

    monkeypatch.setattr(module, "register", register)
    assert register_command(args, {"FLAKETALLY_NO_BROWSER": "1"}) == 0
    assert register_command(args, {}) == 0
    assert seen == [None, opened.append]


def test_github_never_sending_the_browser_back_times_out(
    github: FakeGitHub, env_file: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    running = start_register(github, env_file, timeout=0.2)
    assert running.exit_code() == 1
    assert "did not send the browser back" in capsys.readouterr().err
    assert not env_file.exists() and not github.requests
    with pytest.raises(urllib.error.URLError):  # the form is gone
        get(running.url)


@pytest.fixture
def busy_port() -> Iterator[int]:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        sock.listen()
        yield int(sock.getsockname()[1])


@pytest.mark.parametrize(
    ("args", "said"),
    [
        (["--org", "not an org!"], "--org must be"),
        (["--webhook-url", "flaketally.example.com/webhook"], "--webhook-url must be an http(s) URL"),
        (["--env-file", "/no/such/folder/flaketally.env"], "does not exist"),
        (["--port", "70000"], "--port must be"),
    ],
)
def test_usage_errors_exit_2_before_anything_starts(
    args: list[str], said: str, env_file: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def served(url: str) -> None:
        raise AssertionError(f"register served the form at {url}")

    monkeypatch.setattr(module, "_open_browser", served)
    monkeypatch.delenv("FLAKETALLY_NO_BROWSER", raising=False)
    assert main(["register", "--env-file", str(env_file), *args]) == 2
    err = capsys.readouterr().err
    assert said in err and err.count("\n") == 1 and not env_file.exists()


def test_a_busy_port_and_a_missing_manifest_exit_2(
    github: FakeGitHub, env_file: Path, busy_port: int, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    assert at_once(github, env_file, busy_port) == 2
    assert f"cannot listen on 127.0.0.1:{busy_port}" in capsys.readouterr().err
    missing = tmp_path / "elsewhere" / "app.yml"
    assert at_once(github, env_file, manifest_path=missing) == 2
    assert f"the App's manifest {missing} is missing" in capsys.readouterr().err
    assert module.MANIFEST == ROOT / "app.yml"


@pytest.mark.shared
def test_the_fakes_conversion_answers_with_the_official_examples_keys(github: FakeGitHub) -> None:
    example = json.loads(
        shared_path("github", "rest", "examples", "apps.create-from-manifest.201.default.json").read_text()
    )
    github.manifest_codes.add("k")
    answer = httpx.post(f"{github.api_url}/app-manifests/k/conversions")
    assert answer.status_code == 201
    assert set(answer.json()) == set(example)
    assert set(answer.json()["owner"]) <= set(example["owner"])
    again = httpx.post(f"{github.api_url}/app-manifests/k/conversions")  # a code is good once
    assert again.status_code == 404


def test_files_are_created_with_mode_0600_whatever_the_umask(tmp_path: Path) -> None:
    old = os.umask(0)
    try:
        module._write_secret(tmp_path / "secret", "s\n", replace=False)
        module._write_secret(tmp_path / "secret", "t\n", replace=True)
    finally:
        os.umask(old)
    assert mode(tmp_path / "secret") == 0o600 and (tmp_path / "secret").read_text() == "t\n"
    with pytest.raises(FileExistsError):
        module._write_secret(tmp_path / "secret", "u\n", replace=False)
    assert [p.name for p in tmp_path.iterdir()] == ["secret"]

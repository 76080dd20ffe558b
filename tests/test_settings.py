"""Settings: read once from a mapping, and every bad value refused with the variable's name."""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest

from bot.settings import MIB, Settings, SettingsError
from tests.github_fake import private_key_pem


@pytest.fixture(scope="module")
def pem() -> str:
    return private_key_pem()


@pytest.fixture
def env(pem: str) -> dict[str, str]:
    return {"GITHUB_APP_ID": "123456", "GITHUB_APP_PRIVATE_KEY": pem, "GITHUB_WEBHOOK_SECRET": "s3cret"}


def refused(environ: dict[str, str], *, require_app: bool = True) -> str:
    with pytest.raises(SettingsError) as caught:
        Settings.from_env(environ, require_app=require_app)
    return str(caught.value)


def test_the_defaults(env: dict[str, str], pem: str) -> None:
    settings = Settings.from_env(env)
    assert settings == Settings(
        app_id=123456,
        private_key=pem,
        webhook_secret="s3cret",
        api_url="https://api.github.com",
        redis_url="redis://127.0.0.1:6379/0",
        database_url="flaketally.db",
        queue_name="flaketally",
        max_body_bytes=25 * MIB,
    )
    assert settings.has_app


def test_every_variable_is_read(env: dict[str, str]) -> None:
    env.update(
        GITHUB_API_URL="https://ghe.example.com/api/v3/",
        REDIS_URL="rediss://:pw@redis.internal:6380/2",
        DATABASE_URL="postgresql://flaketally@db/flaketally",
        FLAKETALLY_QUEUE="flaketally-staging",
    )
    settings = Settings.from_env(env)
    assert settings.api_url == "https://ghe.example.com/api/v3"
    assert settings.redis_url == "rediss://:pw@redis.internal:6380/2"
    assert settings.database_url == "postgresql://flaketally@db/flaketally"
    assert settings.queue_name == "flaketally-staging"


def test_settings_are_frozen(env: dict[str, str]) -> None:
    settings = Settings.from_env(env)
    with pytest.raises(dataclasses.FrozenInstanceError):
        settings.app_id = 1  # type: ignore[misc]


def test_the_repr_shows_no_secret(env: dict[str, str], pem: str) -> None:
    env["REDIS_URL"] = "redis://user:hunter2@redis:6379/0"
    text = repr(Settings.from_env(env))
    assert "s3cret" not in text
    assert "PRIVATE KEY" not in text
    assert "hunter2" not in text
    assert "redis://user:***@redis:6379/0" in text


def test_the_key_from_a_file(env: dict[str, str], pem: str, tmp_path: Path) -> None:
    path = tmp_path / "app.pem"
    path.write_text(pem)
    del env["GITHUB_APP_PRIVATE_KEY"]
    env["GITHUB_APP_PRIVATE_KEY_PATH"] = str(path)
    assert Settings.from_env(env).private_key == pem


def test_a_key_with_escaped_line_breaks(env: dict[str, str], pem: str) -> None:
    env["GITHUB_APP_PRIVATE_KEY"] = pem.strip().replace("\n", "\\n")
    assert Settings.from_env(env).private_key == pem


@pytest.mark.parametrize(
    ("changes", "named"),
    [
        ({"GITHUB_APP_ID": ""}, "GITHUB_APP_ID"),
        ({"GITHUB_APP_ID": "twelve"}, "GITHUB_APP_ID"),
        ({"GITHUB_APP_ID": "0"}, "GITHUB_APP_ID"),
        ({"GITHUB_APP_ID": "-5"}, "GITHUB_APP_ID"),
        ({"GITHUB_APP_PRIVATE_KEY": ""}, "GITHUB_APP_PRIVATE_KEY"),
        ({"GITHUB_APP_PRIVATE_KEY": "not a key"}, "GITHUB_APP_PRIVATE_KEY"),
        (
            {"GITHUB_APP_PRIVATE_KEY": "-----BEGIN PUBLIC KEY-----\nAAAA\n-----END PUBLIC KEY-----"},
            "GITHUB_APP_PRIVATE_KEY",
        ),
        (
            {"GITHUB_APP_PRIVATE_KEY": "-----BEGIN RSA PRIVATE KEY-----\n!!!!\n-----END RSA PRIVATE KEY-----"},
            "GITHUB_APP_PRIVATE_KEY",
        ),
        ({"GITHUB_APP_PRIVATE_KEY_PATH": "/elsewhere.pem"}, "GITHUB_APP_PRIVATE_KEY_PATH"),
        ({"GITHUB_WEBHOOK_SECRET": ""}, "GITHUB_WEBHOOK_SECRET"),
        ({"GITHUB_WEBHOOK_SECRET": "  "}, "GITHUB_WEBHOOK_SECRET"),
        ({"GITHUB_API_URL": "ftp://ghe.example.com"}, "GITHUB_API_URL"),
        ({"GITHUB_API_URL": "ghe.example.com/api/v3"}, "GITHUB_API_URL"),
        ({"GITHUB_API_URL": "https://ghe.example.com:port/api/v3"}, "GITHUB_API_URL"),
        ({"GITHUB_API_URL": "https:///api/v3"}, "GITHUB_API_URL"),
        ({"REDIS_URL": "localhost:6379"}, "REDIS_URL"),
        ({"REDIS_URL": "redis://127.0.0.1:6379/zero"}, "REDIS_URL"),
        ({"REDIS_URL": "http://127.0.0.1:6379/0"}, "REDIS_URL"),
        ({"FLAKETALLY_QUEUE": "two words"}, "FLAKETALLY_QUEUE"),
    ],
)
def test_a_malformed_setting_is_named(env: dict[str, str], changes: dict[str, str], named: str) -> None:
    env.update(changes)
    assert named in refused(env)


def test_a_missing_setting_is_named(env: dict[str, str]) -> None:
    for name in ("GITHUB_APP_ID", "GITHUB_WEBHOOK_SECRET"):
        assert name in refused({k: v for k, v in env.items() if k != name})
    assert "GITHUB_APP_PRIVATE_KEY" in refused({k: v for k, v in env.items() if k != "GITHUB_APP_PRIVATE_KEY"})


def test_the_key_twice_is_refused(env: dict[str, str], tmp_path: Path) -> None:
    env["GITHUB_APP_PRIVATE_KEY_PATH"] = str(tmp_path / "app.pem")
    message = refused(env)
    assert "GITHUB_APP_PRIVATE_KEY" in message
    assert "not both" in message


def test_a_redis_password_is_not_in_the_message(env: dict[str, str]) -> None:
    env["REDIS_URL"] = "redis://:hunter2@redis:6379/db0"
    message = refused(env)
    assert "REDIS_URL" in message
    assert "hunter2" not in message


def test_the_receiver_needs_no_app_credentials() -> None:
    settings = Settings.from_env({"GITHUB_WEBHOOK_SECRET": "s3cret"}, require_app=False)
    assert (settings.app_id, settings.private_key, settings.has_app) == (0, "", False)
    assert settings.webhook_secret == "s3cret"
    assert "GITHUB_WEBHOOK_SECRET" in refused({}, require_app=False)


def test_app_credentials_given_to_the_receiver_are_still_checked(env: dict[str, str]) -> None:
    env["GITHUB_APP_ID"] = "twelve"
    assert "GITHUB_APP_ID" in refused(env, require_app=False)
    assert Settings.from_env(
        {k: v for k, v in env.items() if k != "GITHUB_APP_ID"} | {"GITHUB_APP_ID": "7"}, require_app=False
    ).has_app


def test_the_environment_is_read_only_when_asked(monkeypatch: pytest.MonkeyPatch, env: dict[str, str]) -> None:
    for name, value in env.items():
        monkeypatch.setenv(name, value)
    assert Settings.from_env().app_id == 123456
    monkeypatch.setenv("GITHUB_APP_ID", "99")
    assert Settings.from_env().app_id == 99  # nothing was cached at import or at the first call


def test_artifact_name_patterns(env: dict[str, str]) -> None:
    assert Settings.from_env(env).artifact_patterns == ()
    assert Settings.from_env({**env, "FLAKETALLY_ARTIFACTS": "junit-*, test-results"}).artifact_patterns == (
        "junit-*",
        "test-results",
    )
    with pytest.raises(SettingsError, match="FLAKETALLY_ARTIFACTS"):
        Settings.from_env({**env, "FLAKETALLY_ARTIFACTS": " , "})


class _Recording(dict[str, str]):
    """An environment that notes every variable asked for."""

    def __init__(self, values: dict[str, str]) -> None:
        super().__init__(values)
        self.asked: set[str] = set()

    def get(self, key: str, default: object = None) -> Any:
        self.asked.add(key)
        return super().get(key, default)

    def __getitem__(self, key: str) -> str:
        self.asked.add(key)
        return super().__getitem__(key)

    def __contains__(self, key: object) -> bool:
        self.asked.add(str(key))
        return super().__contains__(key)


def test_the_settings_table_names_exactly_what_from_env_reads() -> None:
    from bot.settings import VARIABLES, reference

    environ = _Recording(
        {"GITHUB_APP_ID": "1", "GITHUB_APP_PRIVATE_KEY": private_key_pem(), "GITHUB_WEBHOOK_SECRET": "s"}
    )
    Settings.from_env(environ)
    with_path = _Recording(
        {"GITHUB_APP_ID": "1", "GITHUB_APP_PRIVATE_KEY_PATH": "/nonexistent", "GITHUB_WEBHOOK_SECRET": "s"}
    )
    with pytest.raises(SettingsError):
        Settings.from_env(with_path)
    assert environ.asked | with_path.asked == {name for name, _, _ in VARIABLES}
    readme = (Path(__file__).parent.parent / "README.md").read_text(encoding="utf-8")
    assert reference() in readme, "run `flaketally config settings` and put its table in the README"

"""``flaketally doctor``: each way a deployment can be wrong gets its own line saying what and how to fix
it, and the exit code says whether anything failed. GitHub is the fake (the App's own JWT calls: the App,
its installations, its webhook deliveries); Redis, PostgreSQL and SQLite are real."""

from __future__ import annotations

from pathlib import Path

import pytest

from bot.admin.doctor import FAIL, OK, SKIP, WARN, Check, doctor
from bot.cli import main
from bot.github.permissions import FEATURES, needed
from bot.store import SCHEMA_HEAD, Store
from tests.github_fake import APP_PERMISSIONS, FakeGitHub, private_key_pem
from tests.test_web import closed_port

__all__ = ["closed_port"]  # the fixture


@pytest.fixture
def environ(github: FakeGitHub, redis_url: str, tmp_path: Path) -> dict[str, str]:
    url = f"sqlite:///{tmp_path / 'flaketally.db'}"
    Store.open(url).close()
    return {
        "GITHUB_APP_ID": str(github.app_id),
        "GITHUB_APP_PRIVATE_KEY": github.private_key,
        "GITHUB_WEBHOOK_SECRET": "s",
        "GITHUB_API_URL": github.api_url,
        "REDIS_URL": redis_url,
        "DATABASE_URL": url,
    }


def by_what(checks: list[Check]) -> dict[str, Check]:
    return {c.what: c for c in checks}


def test_a_healthy_deployment_passes_every_check(
    environ: dict[str, str], github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    github.add_delivery("workflow_run", 202, action="completed")
    checks = by_what(doctor(environ))
    assert {what: c.status for what, c in checks.items()} == {
        "settings": OK,
        "private key": OK,
        "GitHub App": OK,
        "installation 77 (acme)": OK,
        "webhook deliveries": OK,
        "Redis": OK,
        "store": OK,
    }
    assert checks["store"].said.endswith(f"at migration {SCHEMA_HEAD}")
    assert checks["GitHub App"].said == "Flaketally (https://github.com/apps/flaketally), owned by acme"
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert main(["doctor"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[-1] == "every check passed" and len(out.splitlines()) == 8


def test_a_missing_setting_is_named_and_github_is_not_asked(environ: dict[str, str], github: FakeGitHub) -> None:
    del environ["GITHUB_WEBHOOK_SECRET"]
    checks = doctor(environ)
    assert checks[0].status == FAIL and "GITHUB_WEBHOOK_SECRET is not set" in checks[0].said
    assert checks[1] == Check(SKIP, "GitHub", "not checked: the settings come first")
    assert [c.status for c in checks[2:]] == [OK, OK]  # Redis and the store still checked
    assert github.requests == []


def test_a_key_of_another_app_is_refused_by_github(environ: dict[str, str]) -> None:
    environ["GITHUB_APP_PRIVATE_KEY"] = other_key()
    app = by_what(doctor(environ))["GitHub App"]
    assert (app.status, app.said) == (FAIL, "GitHub refused the App's token (401)")
    assert "must be the same App's" in app.fix


def test_a_key_that_is_not_a_key_is_said_so(environ: dict[str, str]) -> None:
    environ["GITHUB_APP_PRIVATE_KEY"] = "-----BEGIN RSA PRIVATE KEY-----\nAAAA\n-----END RSA PRIVATE KEY-----"
    checks = by_what(doctor(environ))
    assert checks["private key"].status == FAIL and "cannot be read" in checks["private key"].said
    assert checks["GitHub"].said == "not checked: the private key comes first"


def test_github_out_of_reach_is_said_so(redis_url: str, tmp_path: Path, closed_port: int) -> None:
    environ = {  # no fake GitHub here: a port nothing listens on
        "GITHUB_APP_ID": "4242",
        "GITHUB_APP_PRIVATE_KEY": private_key_pem(),
        "GITHUB_WEBHOOK_SECRET": "s",
        "GITHUB_API_URL": f"http://127.0.0.1:{closed_port}",
        "REDIS_URL": redis_url,
        "DATABASE_URL": f"sqlite:///{tmp_path / 'flaketally.db'}",
    }
    app = by_what(doctor(environ))["GitHub App"]
    assert app.status == FAIL and app.said.startswith(f"cannot reach http://127.0.0.1:{closed_port}")
    assert app.fix == "check GITHUB_API_URL"


def test_installations_not_there_suspended_or_short_of_permissions(environ: dict[str, str], github: FakeGitHub) -> None:
    github.installed = []
    nowhere = by_what(doctor(environ))["installations"]
    assert (nowhere.status, nowhere.said) == (FAIL, "the App is not installed anywhere")
    assert nowhere.fix == "install it: https://github.com/apps/flaketally/installations/new"

    github.installed = [
        github.installation_json(77, "acme", suspended_at="2026-12-01T00:00:00Z"),
        github.installation_json(88, "globex", permissions={**APP_PERMISSIONS, "issues": "read"}),
        github.installation_json(99, "initech", permissions={"metadata": "read", "actions": "read"}),
    ]
    checks = by_what(doctor(environ))
    assert checks["installation 77 (acme)"].status == FAIL and checks["installation 77 (acme)"].said.startswith(
        "suspended"
    )
    globex = checks["installation 88 (globex)"]  # the digest is off, the rest works: a warning
    assert (globex.status, globex.said) == (WARN, "the weekly digest issue needs issues: write")
    assert (
        globex.fix
        == "accept the App's permissions there: https://github.com/organizations/globex/settings/installations/88"
    )
    initech = checks["installation 99 (initech)"]  # no check run: nothing is answered
    assert initech.status == FAIL and "the Flaketally check run (the merge gate) needs checks: write" in initech.said


def test_failed_deliveries_are_named_with_the_command_that_redelivers_them(
    environ: dict[str, str], github: FakeGitHub, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    ok = github.add_delivery("workflow_run", 202, action="completed")
    bad = github.add_delivery("workflow_run", 401, action="completed")
    checks = by_what(doctor(environ))
    summary = checks["webhook deliveries"]
    assert (summary.status, summary.said) == (FAIL, "1 of the last 2 failed")
    assert "GITHUB_WEBHOOK_SECRET" in summary.fix
    line = checks[f"delivery {bad['id']}"]
    assert line.fix == f"flaketally doctor --redeliver {bad['id']}" and f"delivery {ok['id']}" not in checks
    for name, value in environ.items():
        monkeypatch.setenv(name, value)
    assert main(["doctor"]) == 1
    assert capsys.readouterr().out.splitlines()[-1] == "2 checks failed"
    assert main(["doctor", "--redeliver", str(bad["id"])]) == 0
    assert github.redelivered == [bad["id"]]
    assert capsys.readouterr().out == f"ok    delivery {bad['id']}: GitHub is delivering it again\n"
    assert main(["doctor", "--redeliver", "424242"]) == 1
    assert "GitHub refused to redeliver it (404)" in capsys.readouterr().out


def test_no_delivery_yet_is_a_warning(environ: dict[str, str]) -> None:
    found = by_what(doctor(environ))["webhook deliveries"]
    assert (found.status, found.said) == (WARN, "none yet")


def test_redis_down_and_the_store_unreachable_or_behind(
    environ: dict[str, str], closed_port: int, postgres_url: str
) -> None:
    environ["REDIS_URL"] = f"redis://127.0.0.1:{closed_port}/0"
    environ["DATABASE_URL"] = f"postgresql://postgres@127.0.0.1:{closed_port}/test"
    checks = by_what(doctor(environ))
    assert checks["Redis"].status == FAIL and checks["Redis"].fix == "start Redis, or set REDIS_URL to it"
    assert checks["store"].status == FAIL and "cannot be reached" in checks["store"].said
    environ["DATABASE_URL"] = postgres_url
    behind = by_what(doctor(environ))["store"]
    assert behind.status == FAIL and behind.said.endswith(f"is not migrated, behind {SCHEMA_HEAD}")
    assert behind.fix == "run `flaketally migrate`"


def test_app_yml_asks_for_exactly_what_the_features_need() -> None:
    import yaml

    manifest = yaml.safe_load((Path(__file__).parent.parent / "app.yml").read_text())
    assert manifest["default_permissions"] == needed() == APP_PERMISSIONS
    assert set(FEATURES) and all(FEATURES.values())


def other_key() -> str:
    from cryptography.hazmat.primitives import serialization
    from cryptography.hazmat.primitives.asymmetric import rsa

    key = rsa.generate_private_key(public_exponent=65537, key_size=2048)
    pem = key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    assert pem.decode() != private_key_pem()
    return pem.decode()

"""The layout holds: each layer imports only the layers below it, and every GitHub call the pipeline may
make is offered by the real port, by replay's local GitHub and by the suite's fake."""

from __future__ import annotations

import ast
import inspect
from pathlib import Path

import pytest

from bot.github.port import GitHubPort
from bot.local.replay import LocalGitHub
from bot.pipeline.port import Port
from tests.github_fake import APP_ROUTES, ROUTES

ROOT = Path(__file__).resolve().parent.parent

# What each layer may import of the project. Third-party and standard-library imports are not limited
# here, except that the core takes no I/O library (the list below it).
ALLOWED: dict[str, set[str]] = {
    "bot.core": {"bot.core"},
    "bot.render": {"bot.core", "bot.render"},
    "bot.store": {"bot.core", "bot.store"},
    "bot.github": {"bot", "bot.core", "bot.render", "bot.github"},
    "bot.config": {"bot.core", "bot.config"},
    "bot.pipeline": {"bot.core", "bot.config", "bot.render", "bot.store", "bot.github", "bot.pipeline"},
    "bot.digest": {"bot.core", "bot.config", "bot.render", "bot.store", "bot.github", "bot.pipeline", "bot.digest"},
    "bot.local": {"bot.core", "bot.config", "bot.render", "bot.store", "bot.github", "bot.pipeline", "bot.local"},
    "bot.web": {"bot.settings", "bot.store", "bot.github", "bot.web"},
    "bot.admin": {"bot.core", "bot.config", "bot.github", "bot.settings", "bot.store", "bot.admin"},
    "bot.settings": {"bot.github"},
    "workers": {
        "bot.core",
        "bot.config",
        "bot.digest",
        "bot.github",
        "bot.pipeline",
        "bot.settings",
        "bot.store",
        "bot.web",
        "workers",
    },
}
CORE_FORBIDDEN = {"sqlalchemy", "alembic", "psycopg", "githubkit", "httpx", "redis", "rq", "starlette", "uvicorn"}


def module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def imports(path: Path) -> set[str]:
    """Every module an ``import`` or ``from ... import`` names, at any depth (TYPE_CHECKING blocks too)."""
    found: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            found.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and not node.level:
            found.add(node.module)
    return found


def layer_of(module: str) -> str | None:
    for layer in sorted(ALLOWED, key=len, reverse=True):
        if module == layer or module.startswith(layer + "."):
            return layer
    return None


def project_modules() -> list[Path]:
    paths = [*(ROOT / "bot").rglob("*.py"), *(ROOT / "workers").rglob("*.py")]
    return sorted(p for p in paths if "migrations" not in p.parts)


@pytest.mark.parametrize("path", project_modules(), ids=lambda p: str(p.relative_to(ROOT)))
def test_each_module_imports_only_the_layers_below_it(path: Path) -> None:
    module = module_name(path)
    layer = layer_of(module)
    if layer is None:  # bot/cli.py and bot/__init__.py sit on top and may use every layer
        assert module in ("bot", "bot.cli", "bot.cli_parser"), f"{module} belongs to no layer: add it to ALLOWED"
        return
    ours = {name for name in imports(path) if name == "bot" or name.startswith(("bot.", "workers"))}
    wrong = sorted(name for name in ours if layer_of(name) not in ALLOWED[layer] and name not in ALLOWED[layer])
    assert not wrong, f"{module} ({layer}) imports {wrong}"
    if layer == "bot.core":
        io = sorted(name for name in imports(path) if name.split(".")[0] in CORE_FORBIDDEN)
        assert not io, f"{module} is core and imports {io}"


def test_the_layering_check_catches_a_core_module_importing_the_store(tmp_path: Path) -> None:
    sneaky = tmp_path / "sneaky.py"
    sneaky.write_text("def f():\n    from bot.store import records\n    import sqlalchemy\n", encoding="utf-8")
    names = imports(sneaky)
    assert {"bot.store", "sqlalchemy"} <= names
    assert layer_of("bot.store") not in ALLOWED["bot.core"]


def port_calls() -> set[str]:
    return {name for name, _ in inspect.getmembers(Port, inspect.isfunction) if not name.startswith("_")}


def public_methods(cls: type) -> set[str]:
    return {name for name, _ in inspect.getmembers(cls, inspect.isfunction) if not name.startswith("_")}


def test_the_real_port_offers_exactly_the_pipelines_calls() -> None:
    assert public_methods(GitHubPort) - {"close"} == port_calls()


def test_replays_local_github_offers_every_call_with_the_same_signature() -> None:
    for name in sorted(port_calls()):
        ours = inspect.signature(getattr(LocalGitHub, name))
        wanted = inspect.signature(getattr(Port, name))
        assert list(ours.parameters) == list(wanted.parameters), name


# the fake's route for each call (the blob download and the token are its own plumbing)
FAKE_ROUTE: dict[str, str | tuple[str, ...]] = {
    "get_run": "get_run",
    "get_run_attempt": "get_run_attempt",
    "list_jobs": "list_jobs",
    "list_artifacts": "list_artifacts",
    "download_artifact": "download_artifact",
    "list_runs_for_sha": "list_runs",
    "pulls_for_commit": "pulls_for_commit",
    "rerun_failed_jobs": "rerun_failed_jobs",
    "get_file": "get_content",
    "find_check_run": "list_check_runs",
    "create_check_run": "create_check_run",
    "update_check_run": "update_check_run",
    "list_issue_comments": "list_comments",
    "create_issue_comment": "create_comment",
    "update_issue_comment": "update_comment",
    "permission_of": "permission",
    "branch_sha": "get_ref",
    "point_branch": ("get_ref", "create_ref", "update_ref"),
    "file_at": "get_content",
    "write_file": "put_content",
    "open_pull": "list_pulls",
    "create_pull": "create_pull",
    "update_pull": "update_pull",
    "list_issues": "list_issues",
    "create_issue": "create_issue",
    "close_issue": "update_issue",
}


def test_the_fake_answers_every_call_and_nothing_else() -> None:
    assert set(FAKE_ROUTE) == port_calls()
    routes = {r for found in FAKE_ROUTE.values() for r in ((found,) if isinstance(found, str) else found)}
    assert routes == set(ROUTES) - {"blob", "manifest_conversion", *APP_ROUTES}  # the App's own; register's


def _typed(real: GitHubPort, local: LocalGitHub) -> list[Port]:
    """Never called: mypy checks here that both implementations satisfy the protocol."""
    return [real, local]

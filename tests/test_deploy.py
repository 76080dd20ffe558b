"""The deployment files (deploy/) against the code: every command they run is a real ``flaketally``
sub-command with options the CLI accepts, every variable they set is one ``Settings.from_env`` reads and
the required ones are given, the receiver's port and probe paths agree everywhere and are its routes, the
kustomize base renders, and the image runs ``flaketally`` as a user that is not root.

Nothing here runs a container, a unit or a cluster: the files are parsed (the kustomize base is rendered
by ``kubectl kustomize``) and checked with the project's own parser, settings and app."""

from __future__ import annotations

import base64
import inspect
import json
import re
import shlex
import subprocess
import tomllib
from collections.abc import Iterator, Mapping
from dataclasses import dataclass
from functools import cache
from pathlib import Path, PurePosixPath
from typing import Any

import pytest
import redis
import yaml
from starlette.routing import Route

import bot.cli
from bot.cli_parser import parser
from bot.settings import Settings, SettingsError, database_url
from bot.web.app import create_app
from tests.github_fake import private_key_pem
from tests.support.runners import need

ROOT = Path(__file__).resolve().parent.parent
DEPLOY = ROOT / "deploy"
KUBERNETES = DEPLOY / "kubernetes"
SYSTEMD = DEPLOY / "systemd"
ENV_EXAMPLE = DEPLOY / "flaketally.env.example"
VERSION = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["version"]
IMAGE = f"ghcr.io/OWNER/flaketally:{VERSION}"
# the long-running processes and the migration: what every deployment runs
PROCESSES = {"serve", "worker", "scheduler", "migrate"}
# values a deployment holds as placeholders (filled in by whoever deploys): replaced by valid ones before
# Settings.from_env reads a deployment's environment; every other value is read as written
CREDENTIALS = {"GITHUB_APP_ID": "123456", "GITHUB_WEBHOOK_SECRET": "s3cret"}
KEY_PATH = "GITHUB_APP_PRIVATE_KEY_PATH"


# --- what the code reads ------------------------------------------------------------------------------


class RecordingEnv(Mapping[str, str]):
    """An environment that remembers every name looked up in it, set or not."""

    def __init__(self, values: Mapping[str, str]) -> None:
        self._known = dict(values)
        self.looked_up: set[str] = set()

    def __getitem__(self, name: str) -> str:  # Mapping's get and `in` come here too
        self.looked_up.add(name)
        return self._known[name]

    def __iter__(self) -> Iterator[str]:
        raise AssertionError("Settings.from_env should look variables up by name, not list the environment")

    def __len__(self) -> int:
        return len(self._known)


@pytest.fixture(scope="module")
def key_file(tmp_path_factory: pytest.TempPathFactory) -> Path:
    path = tmp_path_factory.mktemp("key") / "private-key.pem"
    path.write_text(private_key_pem(), encoding="ascii")
    return path


def minimal_env(key_file: Path) -> dict[str, str]:
    """Everything a worker needs, the key as a file: the way every deployment here gives it."""
    return {**CREDENTIALS, KEY_PATH: str(key_file)}


def read_variables(key_file: Path) -> frozenset[str]:
    """Every variable ``Settings.from_env`` (and ``database_url``, all ``migrate`` reads) looks up."""
    looked_up: set[str] = set()
    for require_app in (True, False):
        env = RecordingEnv(minimal_env(key_file))
        Settings.from_env(env, require_app=require_app)
        looked_up |= env.looked_up
    env = RecordingEnv({})
    database_url(env)
    return frozenset(looked_up | env.looked_up)


def required_variables(key_file: Path, require_app: bool | None) -> frozenset[str]:
    """The variables in every environment (of the minimal one's subsets) ``Settings.from_env`` accepts."""
    if require_app is None:  # the command reads no Settings (``migrate``: DATABASE_URL or its default)
        return frozenset()
    full = minimal_env(key_file)
    accepted: list[set[str]] = []
    for mask in range(1 << len(full)):
        subset = {name: value for bit, (name, value) in enumerate(full.items()) if mask >> bit & 1}
        try:
            Settings.from_env(subset, require_app=require_app)
        except SettingsError:
            continue
        accepted.append(set(subset))
    assert accepted, f"Settings.from_env accepts none of the subsets of {sorted(full)}"
    return frozenset(set.intersection(*accepted))


def requires_app(command: str) -> bool | None:
    """How ``bot.cli`` reads the settings for ``command``: with the App's keys (True), without (False), or
    not at all (None)."""
    source = inspect.getsource(getattr(bot.cli, f"_{command}"))
    found = re.search(r"_settings\(require_app=(True|False)\)", source)
    return None if found is None else found[1] == "True"


def accept(where: str, argv: list[str]) -> Any:
    """``argv`` parsed by the real command line, or the test fails naming where it came from."""
    try:
        return parser("deploy test").parse_args(argv)
    except SystemExit as exc:
        pytest.fail(f"{where}: `flaketally {shlex.join(argv)}` is refused by the CLI (exit {exc.code})", pytrace=False)


@cache
def routes() -> dict[str, frozenset[str]]:
    """The receiver's routes and their methods, from the app itself (nothing is connected to build it)."""
    settings = Settings(app_id=0, webhook_secret="s3cret", database_url="sqlite://", redis_url="redis://127.0.0.1:9/0")
    connection = redis.Redis.from_url(settings.redis_url)
    try:
        app = create_app(settings, redis=connection)
        return {route.path: frozenset(route.methods or ()) for route in app.routes if isinstance(route, Route)}
    finally:
        connection.close()


def check_environment(where: str, env: Mapping[str, str], command: str, key_file: Path) -> None:
    """The variables ``env`` sets are read, the ones ``command`` requires are there, and
    ``Settings.from_env`` accepts the values (the placeholders and the key's path replaced)."""
    read = read_variables(key_file)
    unknown = sorted(set(env) - read)
    assert not unknown, f"{where} sets {unknown}, which Settings.from_env never reads (it reads {sorted(read)})"
    missing = sorted(required_variables(key_file, requires_app(command)) - set(env))
    assert not missing, f"{where} runs `{command}` without {missing}, which it requires"
    assert "GITHUB_APP_PRIVATE_KEY" not in env, f"{where} puts the App's key in the environment: mount it as a file"
    filled = {name: CREDENTIALS.get(name, value) for name, value in env.items()}
    if KEY_PATH in filled:
        filled[KEY_PATH] = str(key_file)
    mode = requires_app(command)
    try:
        if mode is None:
            database_url(filled)
        else:
            Settings.from_env(filled, require_app=mode)
    except SettingsError as exc:
        pytest.fail(f"{where} (`{command}`): {exc}", pytrace=False)


def check_serve(where: str, argv: list[str]) -> int:
    """The receiver's port, after checking that it listens on every interface (it is in a container)."""
    args = accept(where, argv)
    assert args.command == "serve", f"{where} runs `{shlex.join(argv)}`, not the receiver"
    assert args.host == "0.0.0.0", f"{where}: a receiver in a container must listen on 0.0.0.0, not {args.host}"
    return int(args.port)


# --- the Dockerfile -----------------------------------------------------------------------------------


def dockerfile() -> list[tuple[str, str]]:
    """The Dockerfile's instructions, (INSTRUCTION, arguments), continuation lines joined, comments dropped."""
    instructions: list[tuple[str, str]] = []
    pending = ""
    for line in (DEPLOY / "Dockerfile").read_text().splitlines():
        if line.lstrip().startswith("#") or (not pending and not line.strip()):  # comments go, even mid-instruction
            continue
        pending += line.rstrip()
        if pending.endswith("\\"):
            pending = pending[:-1] + " "
            continue
        word, _, rest = pending.strip().partition(" ")
        instructions.append((word.upper(), rest.strip()))
        pending = ""
    assert not pending, "the Dockerfile ends inside a continued instruction"
    return instructions


def stages() -> list[list[tuple[str, str]]]:
    found: list[list[tuple[str, str]]] = []
    for instruction in dockerfile():
        if instruction[0] == "FROM":
            found.append([])
        assert found, "the Dockerfile has an instruction before its first FROM"
        found[-1].append(instruction)
    return found


def exec_form(instruction: str, rest: str) -> list[str]:
    try:
        argv = json.loads(rest)
    except json.JSONDecodeError:
        pytest.fail(f"the Dockerfile's {instruction} is not in exec form (a JSON list): {rest}", pytrace=False)
    assert isinstance(argv, list) and all(isinstance(a, str) for a in argv), f"{instruction} {rest}"
    return argv


def image_user() -> str:
    final = stages()[-1]
    users = [rest for word, rest in final if word == "USER"]
    assert users, "the Dockerfile's final stage sets no USER: the container would run as root"
    return users[-1]


def image_uid() -> int:
    user = image_user().split(":")[0]
    assert user.isdigit(), f"USER {image_user()}: give a numeric uid, so runAsNonRoot can verify it"
    return int(user)


def default_command() -> list[str]:
    entrypoint = [exec_form(word, rest) for word, rest in stages()[-1] if word == "ENTRYPOINT"]
    command = [exec_form(word, rest) for word, rest in stages()[-1] if word == "CMD"]
    assert entrypoint, "the Dockerfile's final stage has no ENTRYPOINT"
    assert entrypoint[-1] == ["flaketally"], f'the ENTRYPOINT is {entrypoint[-1]}, not ["flaketally"]'
    return command[-1] if command else []


def test_the_image_runs_flaketally_as_a_user_that_is_not_root() -> None:
    assert image_user().split(":")[0] not in ("root", "0"), f"USER {image_user()} is root"
    assert image_uid() > 0
    args = accept("Dockerfile CMD", default_command())
    assert args.command == "serve", "the image's default command is the receiver"
    exposed = [rest for word, rest in stages()[-1] if word == "EXPOSE"]
    assert exposed == [str(check_serve("Dockerfile CMD", default_command()))], f"EXPOSE {exposed} is not --port"


def test_the_image_is_built_in_stages_from_pyproject() -> None:
    built = stages()
    assert len(built) >= 2, "a builder stage and a final stage"
    bases = [rest.split()[0] for stage in built for word, rest in stage if word == "FROM"]
    assert bases == ["python:3.11-slim"] * len(built), f"every stage is python:3.11-slim, not {bases}"
    builder = built[0][0][1].split()
    assert [w.upper() for w in builder[1:2]] == ["AS"], "the first stage is named (FROM ... AS builder)"
    runs = " ".join(rest for word, rest in built[0] if word == "RUN")
    copies = " ".join(rest for word, rest in built[0] if word == "COPY")
    assert "pyproject.toml" in copies, "the builder copies pyproject.toml"
    assert re.search(r"pip install (--\S+ )*\.(\s|$)", runs), f"the builder installs the project itself: {runs}"
    assert "[" not in runs, f"the image installs no extras (the test tools stay out): {runs}"
    final = built[-1]
    copied = [rest for word, rest in final if word == "COPY"]
    assert copied and all(f"--from={builder[2]}" in rest for rest in copied), (
        f"the final stage copies only the builder's venv, not {copied}"
    )


# --- compose ------------------------------------------------------------------------------------------


def compose() -> dict[str, Any]:
    loaded = yaml.safe_load((DEPLOY / "compose.yaml").read_text())
    assert isinstance(loaded, dict)
    return loaded


def interpolate(value: str) -> str:
    """Compose's ``${VAR:-default}`` and ``${VAR-default}`` as their defaults (nothing set in the test)."""
    unset = re.findall(r"\$\{([A-Za-z_][A-Za-z0-9_]*)\}", value)
    assert not unset, f"{value}: ${{{unset[0]}}} has no default"
    return re.sub(r"\$\{[A-Za-z_][A-Za-z0-9_]*:?-([^}]*)\}", r"\1", value)


def flaketally_services() -> dict[str, dict[str, Any]]:
    """The services that run the Flaketally image (not Redis, not PostgreSQL)."""
    return {
        name: service
        for name, service in compose()["services"].items()
        if interpolate(str(service.get("image", ""))).rpartition(":")[0].endswith("flaketally")
    }


def compose_command(name: str, service: Mapping[str, Any]) -> list[str]:
    assert "entrypoint" not in service, f"compose service {name} replaces the image's entrypoint"
    command = service.get("command", default_command())
    assert isinstance(command, list), f"compose service {name}: give `command` as a list, not {command!r}"
    return [str(word) for word in command]


def env_file_values(path: Path) -> dict[str, str]:
    values: dict[str, str] = {}
    for line in path.read_text().splitlines():
        if line.strip() and not line.lstrip().startswith("#"):
            name, sep, value = line.partition("=")
            assert sep, f"{path.name}: {line!r} is not NAME=value"
            values[name.strip()] = value
    return values


def compose_environment(name: str, service: Mapping[str, Any]) -> dict[str, str]:
    """What the container sees: its env_file (the example stands for flaketally.env), then `environment`."""
    env: dict[str, str] = {}
    for file in service.get("env_file", []):
        assert file == "flaketally.env", f"compose service {name} reads {file}, not flaketally.env"
        env.update(env_file_values(ENV_EXAMPLE))
    environment = service.get("environment", {})
    assert isinstance(environment, dict), f"compose service {name}: give `environment` as a mapping"
    env.update({key: interpolate(str(value)) for key, value in environment.items()})
    return env


def test_compose_runs_real_commands() -> None:
    services = flaketally_services()
    ran = set()
    for name, service in services.items():
        args = accept(f"compose service {name}", compose_command(name, service))
        ran.add(args.command)
        assert service.get("image") is not None and interpolate(service["image"]) == f"flaketally:{VERSION}", (
            f"compose service {name}: the image is tagged with pyproject.toml's version {VERSION}"
        )
    assert ran == PROCESSES, f"compose runs {sorted(ran)}, not {sorted(PROCESSES)}"


def test_compose_services_start_in_order_and_check_health() -> None:
    services = compose()["services"]
    migrate = [n for n, s in flaketally_services().items() if compose_command(n, s)[0] == "migrate"]
    assert len(migrate) == 1, "one migration service"
    assert services[migrate[0]].get("restart") == "no", "the migration runs once"
    for name, service in flaketally_services().items():
        if name in migrate:
            continue
        depends = service.get("depends_on", {})
        assert depends.get(migrate[0], {}).get("condition") == "service_completed_successfully", (
            f"compose service {name} starts only once {migrate[0]} has succeeded"
        )
    assert services["redis"]["image"].startswith("redis:7"), services["redis"]["image"]
    assert "redis-cli" in services["redis"]["healthcheck"]["test"]
    assert services["postgres"]["image"].startswith("postgres:16"), services["postgres"]["image"]
    assert "pg_isready" in services["postgres"]["healthcheck"]["test"]
    volumes = [v.split(":")[0] for v in services["postgres"].get("volumes", [])]
    assert volumes and volumes[0] in compose().get("volumes", {}), "PostgreSQL keeps its data in a named volume"
    scheduler = [n for n, s in flaketally_services().items() if compose_command(n, s)[0] == "scheduler"]
    assert [services[n].get("deploy", {}).get("replicas", 1) for n in scheduler] == [1], "exactly one scheduler"


def test_compose_sets_only_variables_the_settings_read(key_file: Path) -> None:
    declared = compose().get("secrets", {})
    for name, service in flaketally_services().items():
        env = compose_environment(name, service)
        command = accept(f"compose service {name}", compose_command(name, service)).command
        check_environment(f"compose service {name}", env, command, key_file)
        if KEY_PATH in env:
            path = PurePosixPath(env[KEY_PATH])
            assert path.parent == PurePosixPath("/run/secrets"), f"compose service {name}: the key is a secret file"
            assert path.name in service.get("secrets", []), f"compose service {name} does not mount {path.name}"
            assert "file" in declared.get(path.name, {}), f"the compose secret {path.name} is not read from a file"


def test_the_compose_receiver_port_and_health_check_agree() -> None:
    receivers = [(n, s) for n, s in flaketally_services().items() if compose_command(n, s)[0] == "serve"]
    assert len(receivers) == 1, "one receiver service"
    name, service = receivers[0]
    port = check_serve(f"compose service {name}", compose_command(name, service))
    published = [str(p).split("/")[0].rsplit(":", 1)[-1] for p in service.get("ports", [])]
    assert published == [str(port)], f"compose service {name} publishes {published}, the receiver listens on {port}"
    test = " ".join(service["healthcheck"]["test"])
    found = re.search(r"https?://[^/:'\"]+:(\d+)(/[A-Za-z0-9_/]*)", test)
    assert found, f"compose service {name}: the health check requests no URL: {test}"
    assert int(found[1]) == port, f"the health check asks port {found[1]}, the receiver listens on {port}"
    assert found[2] == "/healthz" and "GET" in routes()[found[2]], f"the health check asks {found[2]}"
    assert "curl" not in test and "wget" not in test, "python:3.11-slim has neither curl nor wget"


# --- systemd ------------------------------------------------------------------------------------------


@dataclass(frozen=True)
class Unit:
    name: str
    sections: dict[str, dict[str, list[str]]]

    def get(self, section: str, key: str) -> list[str]:
        return self.sections.get(section, {}).get(key, [])


def units() -> list[Unit]:
    found = []
    for path in sorted(SYSTEMD.glob("*.service")):
        sections: dict[str, dict[str, list[str]]] = {}
        current: dict[str, list[str]] | None = None
        for line in path.read_text().splitlines():
            line = line.strip()
            if not line or line.startswith(("#", ";")):
                continue
            if line.startswith("[") and line.endswith("]"):
                current = sections.setdefault(line[1:-1], {})
                continue
            assert current is not None, f"{path.name}: {line!r} is outside a section"
            key, sep, value = line.partition("=")
            assert sep, f"{path.name}: {line!r} is not Key=value"
            current.setdefault(key.strip(), []).append(value.strip())
        found.append(Unit(path.name, sections))
    assert found, f"no units in {SYSTEMD}"
    return found


def unit_command(unit: Unit) -> list[str]:
    starts = unit.get("Service", "ExecStart")
    assert len(starts) == 1, f"{unit.name}: one ExecStart, not {starts}"
    argv = shlex.split(starts[0].lstrip("-@:+!"))
    assert PurePosixPath(argv[0]).name == "flaketally", f"{unit.name} runs {argv[0]}, not flaketally"
    return argv[1:]


def test_systemd_units_run_real_commands() -> None:
    ran = {}
    for unit in units():
        ran[accept(unit.name, unit_command(unit)).command] = unit
    assert set(ran) == PROCESSES, f"the units run {sorted(ran)}, not {sorted(PROCESSES)}"
    migrate = ran["migrate"]
    assert migrate.get("Service", "Type") == ["oneshot"], f"{migrate.name} is Type=oneshot"
    for command, unit in ran.items():
        if command == "migrate":
            continue
        for key in ("Requires", "After"):
            named = " ".join(unit.get("Unit", key)).split()
            assert migrate.name in named, f"{unit.name}: {key}= does not name {migrate.name}"


def test_systemd_units_read_the_env_file(key_file: Path) -> None:
    for unit in units():
        files = unit.get("Service", "EnvironmentFile")
        assert files == ["/etc/flaketally/flaketally.env"], f"{unit.name} reads {files}"
        env = env_file_values(ENV_EXAMPLE)
        for assignment in unit.get("Service", "Environment"):
            for word in shlex.split(assignment):
                name, _, value = word.partition("=")
                env[name] = value
        check_environment(unit.name, env, accept(unit.name, unit_command(unit)).command, key_file)


# --- the environment file -----------------------------------------------------------------------------


def test_the_env_example_documents_every_variable(key_file: Path) -> None:
    lines = ENV_EXAMPLE.read_text().splitlines()
    documented: dict[str, str] = {}
    for number, line in enumerate(lines):
        found = re.fullmatch(r"(?:# ?)?([A-Z][A-Z0-9_]*)=.*", line)
        if found is None:
            continue
        above = lines[number - 1] if number else ""
        assert above.startswith("# ") and not re.fullmatch(r"# ?[A-Z][A-Z0-9_]*=.*", above), (
            f"{ENV_EXAMPLE.name}: {found[1]} has no comment line above it"
        )
        documented[found[1]] = above[2:]
    read = read_variables(key_file)
    assert set(documented) == read, (
        f"{ENV_EXAMPLE.name} documents {sorted(documented)}; Settings.from_env reads {sorted(read)}"
    )
    required = required_variables(key_file, True)
    for name, comment in documented.items():
        expected = "required" if name in required else "default"
        assert comment.startswith(expected), f"{ENV_EXAMPLE.name}: the comment on {name} starts with {expected!r}"
    assert required <= set(env_file_values(ENV_EXAMPLE)), "every required variable is set in the example"
    check_environment(ENV_EXAMPLE.name, env_file_values(ENV_EXAMPLE), "worker", key_file)


# --- Kubernetes ---------------------------------------------------------------------------------------


@pytest.fixture(scope="module")
def rendered() -> list[dict[str, Any]]:
    kubectl = need("kubectl", "apt-get install kubernetes-client")
    done = subprocess.run(
        [kubectl, "kustomize", str(KUBERNETES)], capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, f"kubectl kustomize {KUBERNETES} failed:\n{done.stderr}"
    return [doc for doc in yaml.safe_load_all(done.stdout) if doc]


def objects(rendered: list[dict[str, Any]], kind: str) -> dict[str, dict[str, Any]]:
    return {obj["metadata"]["name"]: obj for obj in rendered if obj["kind"] == kind}


def workloads(rendered: list[dict[str, Any]]) -> Iterator[tuple[str, dict[str, Any], dict[str, Any]]]:
    """(where, pod spec, container) for every container of the Deployments and Jobs."""
    for obj in rendered:
        if obj["kind"] in ("Deployment", "Job"):
            pod = obj["spec"]["template"]["spec"]
            for container in pod.get("initContainers", []) + pod["containers"]:
                yield f"{obj['kind']} {obj['metadata']['name']} container {container['name']}", pod, container


def container_command(where: str, container: Mapping[str, Any]) -> list[str]:
    if "command" in container:
        assert container["command"] == ["flaketally"], f"{where} runs {container['command']}, not flaketally"
    return [str(word) for word in container.get("args", default_command())]


def secret_data(secret: Mapping[str, Any]) -> dict[str, str]:
    data = {key: base64.b64decode(value).decode() for key, value in secret.get("data", {}).items()}
    return {**data, **secret.get("stringData", {})}


def container_environment(where: str, container: Mapping[str, Any], rendered: list[dict[str, Any]]) -> dict[str, str]:
    """The container's variables, each reference resolved (a missing object or key fails the test)."""
    maps = {name: obj.get("data", {}) for name, obj in objects(rendered, "ConfigMap").items()}
    secrets = {name: secret_data(obj) for name, obj in objects(rendered, "Secret").items()}
    env: dict[str, str] = {}
    for source in container.get("envFrom", []):
        kind, found = ("configMapRef", maps) if "configMapRef" in source else ("secretRef", secrets)
        name = source[kind]["name"]
        assert name in found, f"{where}: envFrom {kind} {name} is not in the base"
        env.update({source.get("prefix", "") + key: value for key, value in found[name].items()})
    for variable in container.get("env", []):
        if "value" in variable:
            env[variable["name"]] = str(variable["value"])
            continue
        ref = variable["valueFrom"]
        kind, found = ("configMapKeyRef", maps) if "configMapKeyRef" in ref else ("secretKeyRef", secrets)
        name, key = ref[kind]["name"], ref[kind]["key"]
        assert key in found.get(name, {}), f"{where}: {variable['name']} refers to {kind} {name} key {key}: not there"
        env[variable["name"]] = found[name][key]
    return env


def mounted_key(where: str, pod: Mapping[str, Any], container: Mapping[str, Any], path: str) -> str:
    """The Secret key mounted as the file ``path`` in ``container``, or the test fails."""
    volumes = {volume["name"]: volume for volume in pod.get("volumes", [])}
    for mount in container.get("volumeMounts", []):
        try:
            under = str(PurePosixPath(path).relative_to(mount["mountPath"]))
        except ValueError:
            continue
        secret = volumes[mount["name"]].get("secret")
        assert secret is not None, f"{where}: {KEY_PATH}={path} is in volume {mount['name']}, not a Secret"
        if "subPath" in mount and under == ".":
            return str(mount["subPath"])
        items = {item["path"]: item["key"] for item in secret.get("items", [])}
        if not items:
            return under
        assert under in items, f"{where}: the Secret volume {mount['name']} holds {sorted(items)}, not {under}"
        return str(items[under])
    pytest.fail(f"{where}: nothing is mounted at {KEY_PATH}={path}", pytrace=False)


def test_the_kustomize_base_renders_every_object(rendered: list[dict[str, Any]]) -> None:
    found = {(obj["kind"], obj["metadata"]["name"]) for obj in rendered}
    expected = {
        ("Deployment", "flaketally-receiver"),
        ("Service", "flaketally-receiver"),
        ("Deployment", "flaketally-worker"),
        ("Deployment", "flaketally-scheduler"),
        ("Job", "flaketally-migrate"),
        ("ConfigMap", "flaketally-config"),
        ("Secret", "flaketally-secrets"),
    }
    assert expected <= found, f"missing from the rendered base: {sorted(expected - found)}"
    deployments = objects(rendered, "Deployment")
    scheduler = deployments["flaketally-scheduler"]["spec"]
    assert scheduler["replicas"] == 1, "exactly one scheduler"
    assert scheduler.get("strategy", {}).get("type") == "Recreate", "an update never runs two schedulers"
    assert deployments["flaketally-worker"]["spec"]["replicas"] >= 2, "more than one worker"


def test_kubernetes_runs_real_commands(rendered: list[dict[str, Any]]) -> None:
    ran = {}
    for where, _, container in workloads(rendered):
        ran[where] = accept(where, container_command(where, container)).command
        assert container["image"] == IMAGE, f"{where}: the image is the placeholder {IMAGE}"
    assert set(ran.values()) == PROCESSES, f"the base runs {sorted(set(ran.values()))}, not {sorted(PROCESSES)}"
    by_name = {where.split()[1]: command for where, command in ran.items()}
    assert by_name == {
        "flaketally-migrate": "migrate",
        "flaketally-receiver": "serve",
        "flaketally-worker": "worker",
        "flaketally-scheduler": "scheduler",
    }, by_name


def test_kubernetes_sets_only_variables_the_settings_read(rendered: list[dict[str, Any]], key_file: Path) -> None:
    for where, pod, container in workloads(rendered):
        env = container_environment(where, container, rendered)
        command = accept(where, container_command(where, container)).command
        check_environment(where, env, command, key_file)
        if command == "serve":  # it never calls GitHub: the App's id and key stay with the workers
            assert not {"GITHUB_APP_ID", KEY_PATH} & set(env), f"{where}: the receiver is given the App's key"
        if KEY_PATH in env:
            key = mounted_key(where, pod, container, env[KEY_PATH])
            secrets = {name: secret_data(obj) for name, obj in objects(rendered, "Secret").items()}
            assert any(key in data for data in secrets.values()), f"{where}: the mounted key {key!r} is in no Secret"


def test_kubernetes_pods_run_as_the_image_user_within_limits(rendered: list[dict[str, Any]]) -> None:
    for where, pod, container in workloads(rendered):
        context = {**pod.get("securityContext", {}), **container.get("securityContext", {})}
        assert context.get("runAsNonRoot") is True, f"{where}: runAsNonRoot"
        assert context.get("runAsUser", image_uid()) == image_uid(), f"{where}: runAsUser is the image's uid"
        assert context.get("allowPrivilegeEscalation") is False, f"{where}: allowPrivilegeEscalation: false"
        resources = container.get("resources", {})
        assert {"cpu", "memory"} <= set(resources.get("requests", {})), f"{where}: CPU and memory requests"
        assert "memory" in resources.get("limits", {}), f"{where}: a memory limit"


def test_the_kubernetes_receiver_port_probes_and_service_agree(rendered: list[dict[str, Any]]) -> None:
    deployment = objects(rendered, "Deployment")["flaketally-receiver"]
    pod = deployment["spec"]["template"]
    (container,) = pod["spec"]["containers"]
    port = check_serve("Deployment flaketally-receiver", container_command("receiver", container))
    named = {p.get("name"): p["containerPort"] for p in container["ports"]}
    assert list(named.values()) == [port], f"the containerPort {list(named.values())} is not --port {port}"

    def resolve(value: int | str) -> int:
        if isinstance(value, int):
            return value
        assert value in named, f"the receiver has no container port named {value!r}"
        return int(named[value])

    for probe, path in (("livenessProbe", "/healthz"), ("readinessProbe", "/readyz")):
        get = container[probe]["httpGet"]
        assert get["path"] == path, f"the receiver's {probe} asks {get['path']}, not {path}"
        assert resolve(get["port"]) == port, f"the receiver's {probe} asks port {get['port']}, not {port}"
        assert "GET" in routes().get(path, frozenset()), f"the receiver has no GET {path}"
    service = objects(rendered, "Service")["flaketally-receiver"]["spec"]
    selector = service["selector"]
    assert selector.items() <= pod["metadata"]["labels"].items(), "the Service selects the receiver's pods"
    for other in objects(rendered, "Deployment").values():
        if other is not deployment:
            labels = other["spec"]["template"]["metadata"]["labels"]
            assert not selector.items() <= labels.items(), f"the Service also selects {other['metadata']['name']}"
    targets = [resolve(p["targetPort"]) for p in service["ports"]]
    assert targets == [port], f"the Service's targetPort {targets} is not --port {port}"

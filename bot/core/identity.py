"""The one definition of a test's identity and of the context it ran in.

Every module that names a test, groups tests into families or compares outcomes calls these
functions; nothing else builds an id or a context key by hand.
"""

from __future__ import annotations

import functools
import hashlib
import json
import re
from dataclasses import dataclass, fields

# Names longer than this are cut and made unique again with a digest of the whole name, so a
# hostile report cannot make the store hold megabytes per test.
MAX_NAME = 1000

_PARAMS = re.compile(r"(\[[^\[\]]*\]|\([^()]*\))+$")
_GO_SUBTEST = re.compile(r"^(Test\w*?)/.+$")


def bounded(text: str, limit: int = MAX_NAME) -> str:
    """Text cut to ``limit`` characters; a cut text ends with a digest of the whole."""
    if len(text) <= limit:
        return text
    digest = hashlib.sha256(text.encode("utf-8", "surrogatepass")).hexdigest()[:12]
    return f"{text[: limit - 14]}…#{digest}"


def test_id(classname: str, name: str, file: str | None = None, project: str | None = None) -> str:
    """The runner-qualified name: ``[file::]classname::name[ [project]]``.

    ``file`` is left out when the runner wrote it equal to the classname (jest, vitest do); an empty
    classname is left out too.
    """
    if file and file != classname:
        ident = f"{file}::{classname}::{name}" if classname else f"{file}::{name}"
    else:
        ident = f"{classname}::{name}" if classname else name
    if project:
        ident = f"{ident} [{project}]"
    return ident if len(ident) <= MAX_NAME else bounded(ident)


def family_name(name: str) -> str:
    """A test's name with its parameters stripped: ``test_upload[s3]`` → ``test_upload``.

    Strips trailing ``[...]`` and ``(...)`` groups (pytest, JUnit parameterised runners) and Go
    subtests (``Test_param/b`` → ``Test_param``).
    """
    stripped = _PARAMS.sub("", name).rstrip()
    go = _GO_SUBTEST.match(stripped)
    if go:
        stripped = go.group(1)
    return stripped or name


def family_id(classname: str, name: str, file: str | None = None, project: str | None = None) -> str:
    return test_id(classname, family_name(name), file, project)


@dataclass(frozen=True, slots=True)
class ExecutionContext:
    """Where a test ran. Outcomes are compared only inside one context.

    ``job`` is the job name with its matrix values, or the artifact name (or the local runner's
    name) when the job is not known.
    """

    workflow: str = ""
    job: str = ""
    os: str = ""
    arch: str = ""
    runtime: str = ""

    def key(self) -> str:
        """A canonical string, stable across releases: it is stored."""
        values = {f.name: getattr(self, f.name) for f in fields(self) if getattr(self, f.name)}
        return json.dumps(values, sort_keys=True, separators=(",", ":")) if values else "default"

    def display(self) -> str:
        parts = [p for p in (self.workflow, self.job, self.os, self.arch, self.runtime) if p]
        return " · ".join(parts) or "default context"

    @classmethod
    def from_key(cls, key: str) -> ExecutionContext:
        return _context_of(key)


@functools.lru_cache(maxsize=1024)  # a repository has a few contexts, and every test of each is read back
def _context_of(key: str) -> ExecutionContext:
    """``ExecutionContext.from_key``: a frozen value, made once per key."""
    if key == "default":
        return ExecutionContext()
    values = json.loads(key)
    return ExecutionContext(**{f.name: str(values.get(f.name, "")) for f in fields(ExecutionContext)})


@dataclass(frozen=True, slots=True)
class RunIdentity:
    """Which execution a report came from: the key of what was executed, never of when it was read."""

    repo: str
    commit: str
    attempt: int
    context: ExecutionContext
    source: str
    run_id: int | None = None
    run_index: int | None = None
    started_at: str | None = None
    artifact_id: int | None = None
    installation_id: int | None = None

    def report_key(self, digest: str) -> str:
        """Two copies of one report (a redelivery, the same artifact seen twice, a copied file) share it."""
        parts = [self.repo, self.commit, self.run_id, self.attempt, self.context.key(), digest]
        return hashlib.sha256(json.dumps(parts).encode()).hexdigest()

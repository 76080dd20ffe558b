"""A test's name as its runner prints it, so a developer can paste it into a command: the one display id
used by the comment, the annotations, the check run and the CLI. The stored id (``bot.core.identity``)
stays the key; this is only how a test is shown.

Told from what the report holds (the runner is not stored):

- pytest: ``tests/x.py::TestY::test_z[param]`` (the file from ``file``, else from the dotted module path;
  the classes are the capitalised segments after it);
- Go (gotestsum): ``example.com/pkg.TestName/sub``;
- jest, vitest, Playwright with the spec file as classname: ``file › describe › name`` (vitest's ``>``
  kept where the name uses it); jest-junit and mocha without a file: the full title as written;
- JUnit (Surefire, Gradle): ``pkg.Class.method``;
- anything else (libtest, nextest): the stored id.

A Playwright project is added as ``[project]``.
"""

from __future__ import annotations

import re

from bot.core.identity import test_id

_SCRIPT = re.compile(r"\.(?:[cm]?[jt]sx?)$")
_PY_MODULE = re.compile(r"^[a-z_][a-z0-9_]*(?:\.[A-Za-z_][A-Za-z0-9_]*)*$")
_GO_PACKAGE = re.compile(r"^[A-Za-z0-9_.\-~]+(?:/[A-Za-z0-9_.\-~]+)+$")
_JAVA_CLASS = re.compile(r"^(?:[a-z_][A-Za-z0-9_]*\.)+[A-Z][A-Za-z0-9_$]*$")


def _pytest_id(classname: str, name: str, file: str | None) -> str | None:
    parts = classname.split(".") if classname else []
    if file and file.endswith(".py"):
        dotted = file[:-3].replace("/", ".").replace("\\", ".")
        inner = classname[len(dotted) + 1 :].split(".") if classname.startswith(dotted + ".") else []
        return "::".join([file, *[c for c in inner if c], name])
    if not classname or not _PY_MODULE.match(classname) or not name.startswith("test"):
        return None
    split = next((i for i, p in enumerate(parts) if p[:1].isupper()), len(parts))
    module, classes = parts[:split], parts[split:]
    if not module or not any(p.startswith("test") or p.endswith("_test") or p == "tests" for p in module):
        return None
    return "::".join(["/".join(module) + ".py", *classes, name])


def display_id(classname: str, name: str, file: str | None = None, project: str | None = None) -> str:
    """How the test's runner prints it (module docstring)."""
    shown = _pytest_id(classname, name, file)
    if shown is None:
        if classname and _GO_PACKAGE.match(classname) and name.startswith("Test"):
            shown = f"{classname}.{name}"
        elif classname and _SCRIPT.search(classname):
            separator = " > " if " > " in name and " › " not in name else " › "
            shown = f"{classname}{separator}{name}"
        elif file and _SCRIPT.search(file) and classname != file:
            separator = " > " if " > " in name and " › " not in name else " › "
            shown = f"{file}{separator}{name}"
        elif not classname or classname == name or name.startswith(classname + " ") or name.endswith(" " + classname):
            shown = name
        elif _JAVA_CLASS.match(classname):
            shown = f"{classname}.{name}"
        else:
            return test_id(classname, name, file, project)
    return f"{shown} [{project}]" if project else shown


# path:line in a failure's text: a pytest frame line, or a path inside a trace (jest's "(src/x.test.ts:10:5)")
_EXTENSIONS = r"(?:py|go|js|ts|jsx|tsx|mjs|cjs|java|kt|rb|rs|cs|php|swift|scala|ex|exs)"
_PYTEST_FRAME = re.compile(rf"^(?P<path>[^\s:<>()]+\.{_EXTENSIONS}):(?P<line>\d+): ", re.MULTILINE)
_ANY_FRAME = re.compile(rf"(?P<path>[^\s:<>()'\"]+\.{_EXTENSIONS}):(?P<line>\d+)")
_WORKSPACE = re.compile(r"^(?:/home/runner/work/[^/]+/[^/]+/|/Users/runner/work/[^/]+/[^/]+/|/__w/[^/]+/[^/]+/)")
_OUTSIDE = ("site-packages/", "node_modules/", "dist-packages/", "/usr/", "<")


def failure_frame(details: str, classname: str = "", file: str | None = None) -> tuple[str, int] | None:
    """The file and line inside the repository that a failure's text names (the test's own frame), if
    any: a pytest frame line first, else the first path in a trace; GitHub's workspace prefix is taken
    off an absolute path; a path outside the repository (installed packages, absolute) is never used.

    A bare file name is a repository path only where the test's own name says where it is: the spec file
    that jest, vitest and Playwright name the test by (``planted.test.js:13``), or a Go test's package when
    it is imported by its GitHub path (``github.com/o/r/sub/pkg`` puts ``x_test.go:81`` at
    ``sub/pkg/x_test.go``); Go's other module paths do not say where the module sits in the repository."""
    own = {f for f in (file, classname) if f and _SCRIPT.search(f)}
    package = classname.split("/")
    go_dir = "/".join(package[3:]) if classname.startswith("github.com/") and len(package) >= 3 else None
    for pattern in (_PYTEST_FRAME, _ANY_FRAME):
        for found in pattern.finditer(details):
            path = _WORKSPACE.sub("", found.group("path")).removeprefix("./")
            if path.startswith(("/", "..")) or any(part in path for part in _OUTSIDE):
                continue
            if "/" not in path:
                if path in own:
                    pass
                elif go_dir is not None and path.endswith(".go"):
                    path = f"{go_dir}/{path}" if go_dir else path
                else:
                    continue
            return path, int(found.group("line"))
    return None


def source_location(classname: str, file: str | None, line: int | None, details: str) -> tuple[str | None, int | None]:
    """Where a test's failure is: the report's file and line, else the failure text's own frame
    (``failure_frame``), else the line alone (None when nothing says)."""
    if file or not details:
        return file, line
    return failure_frame(details, classname, file) or (None, line)


def stored_display_id(stored_id: str, classname: str, name: str, file: str | None) -> str:
    """The display id of a stored test: ``display_id``, with the Playwright project the stored id carries
    (``… [chromium]``)."""
    base = test_id(classname, name, file)
    rest = stored_id[len(base) :] if stored_id.startswith(base) else ""
    project = rest[2:-1] if rest.startswith(" [") and rest.endswith("]") else None
    return display_id(classname, name, file, project)

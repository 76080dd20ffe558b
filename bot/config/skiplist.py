"""``flaketally quarantine --format …``: the quarantined tests in the form each runner takes to skip them,
for teams that skip in CI rather than let the Flaketally check carry the quarantine.

Each format is built from the display id (``bot.core.display``), which is what the runner prints:

- ``pytest``: ``--deselect=<node id>``, one argument a line (``pytest $(flaketally quarantine …)``);
- ``go``: one ``-skip`` regular expression of the top-level tests, ``^(TestA|TestB)$``; subtests of one
  test become ``^TestP$/^(a|b)$``. ``go test`` takes one ``-skip`` and matches it level by level, so subtests
  of different parents, or subtests beside whole tests, cannot share it: those are named on stderr and left
  out (a test's package is not part of the expression: a namesake in another package is skipped too);
- ``jest`` and ``vitest``: ``--testNamePattern=^(?!(?:A|B)$)``, a name pattern that every test but these
  matches (the full name: describe blocks and title, joined by spaces);
- ``playwright``: ``--grep-invert=<file title…>$`` (the title path: file, describe blocks and title);
- ``maven``: ``-Dtest=!pkg.Class#method,…`` (Surefire 2.19 or later runs every other test);
- ``yaml``: the quarantine file itself.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass

from bot.config.quarantine import render_quarantine
from bot.core.quarantine import Entry

FORMATS = ("pytest", "go", "jest", "vitest", "playwright", "maven", "yaml")
_SCRIPT = re.compile(r"\.(?:[cm]?[jt]sx?)$")
_GO = re.compile(r"^(?P<package>.+?)\.(?P<name>Test[^/]*)(?:/(?P<sub>.+))?$")
_JAVA = re.compile(r"^(?P<cls>(?:[A-Za-z_$][\w$]*\.)*[A-Z][\w$]*)\.(?P<method>[^.]+)$")


@dataclass(frozen=True, slots=True)
class SkipList:
    """What to pass to the runner, and the entries it could not express (with why)."""

    text: str
    left_out: tuple[tuple[str, str], ...] = ()


_SPECIAL = re.compile(r"([\\.+*?()|\[\]{}^$/])")


def _escape(text: str) -> str:
    """A literal in a regular expression that JavaScript, Go (RE2) and Java all read the same: only their
    metacharacters escaped (Python's ``re.escape`` also escapes spaces, which RE2 refuses)."""
    return _SPECIAL.sub(r"\\\1", text)


def _titles(display: str) -> list[str]:
    separator = " › " if " › " in display else " > "
    return display.split(separator) if separator in display else [display]


def _full_name(display: str) -> str:
    """jest/vitest's full name: the describe blocks and the title, without the file."""
    parts = _titles(display)
    if len(parts) > 1 and _SCRIPT.search(parts[0]):
        parts = parts[1:]
    return " ".join(parts)


def _pytest(tests: Sequence[str]) -> SkipList:
    ids = [t for t in tests if "::" in t]
    left = tuple((t, "not a pytest node id (path::name)") for t in tests if "::" not in t)
    return SkipList("".join(f"--deselect={t}\n" for t in ids), left)


def _go(tests: Sequence[str]) -> SkipList:
    whole: list[str] = []
    subs: dict[str, list[str]] = {}
    left: list[tuple[str, str]] = []
    for t in tests:
        found = _GO.match(t)
        if not found:
            left.append((t, "not a Go test id (package.TestName)"))
        elif found["sub"]:
            subs.setdefault(found["name"], []).append(found["sub"])
        else:
            whole.append(found["name"])
    if whole:
        left += [
            (f"{parent}/{s}", "a subtest cannot share -skip with whole tests") for parent in subs for s in subs[parent]
        ]
        pattern = "^(" + "|".join(_escape(n) for n in dict.fromkeys(whole)) + ")$"
    elif subs:
        parent, *others = subs
        left += [(f"{o}/{s}", f"-skip takes the subtests of one test ({parent})") for o in others for s in subs[o]]
        levels = [_escape(s) for s in dict.fromkeys(subs[parent])]
        pattern = f"^{_escape(parent)}$/^(" + "|".join(levels) + ")$"
    else:
        return SkipList("", tuple(left))
    return SkipList(f"-skip={pattern}\n", tuple(left))


def _name_pattern(tests: Sequence[str]) -> SkipList:
    names = "|".join(_escape(_full_name(t)) for t in dict.fromkeys(tests))
    return SkipList(f"--testNamePattern=^(?!(?:{names})$)\n" if names else "")


def _playwright(tests: Sequence[str]) -> SkipList:
    titles = "|".join(_escape(" ".join(_titles(t))) + "$" for t in dict.fromkeys(tests))
    return SkipList(f"--grep-invert={titles}\n" if titles else "")


def _maven(tests: Sequence[str]) -> SkipList:
    excluded, left = [], []
    for t in tests:
        found = _JAVA.match(t)
        if found:
            excluded.append(f"!{found['cls']}#{found['method']}")
        else:
            left.append((t, "not a JUnit test id (pkg.Class.method)"))
    return SkipList(f"-Dtest={','.join(excluded)}\n" if excluded else "", tuple(left))


def skip_list(entries: Sequence[Entry], fmt: str) -> SkipList:
    """The entries (in the order given: most costly first) as ``fmt`` takes them (module docstring)."""
    if fmt == "yaml":
        return SkipList(render_quarantine(entries))
    tests = list(dict.fromkeys(e.test for e in entries))
    builders = {
        "pytest": _pytest,
        "go": _go,
        "jest": _name_pattern,
        "vitest": _name_pattern,
        "playwright": _playwright,
        "maven": _maven,
    }
    return builders[fmt](tests)

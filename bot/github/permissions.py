"""What each feature needs the installation to grant: one table, read by ``flaketally doctor`` (each
installation's grant against it), by the check run's buttons (hidden without theirs) and by the test that
``app.yml`` asks for exactly these."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Final

LEVELS: Final = {"none": 0, "read": 1, "write": 2, "admin": 3}

RERUNS: Final = "automatic reruns and the Re-run failed jobs button"
QUARANTINE: Final = "the Quarantine button and the recovery pull requests"
FEATURES: Final[Mapping[str, Mapping[str, str]]] = {
    "reading runs, jobs and their JUnit artifacts": {"actions": "read", "metadata": "read"},
    "the Flaketally check run (the merge gate)": {"checks": "write"},
    "the pull request comment": {"pull_requests": "write"},
    "reading .github/flaketally.yml and the quarantine file": {"contents": "read"},
    RERUNS: {"actions": "write"},
    QUARANTINE: {"contents": "write", "pull_requests": "write"},
    "the weekly digest issue": {"issues": "write"},
}

# without these nothing is answered; without another, only that feature is off
CORE: Final = frozenset(("reading runs, jobs and their JUnit artifacts", "the Flaketally check run (the merge gate)"))


def needed() -> dict[str, str]:
    """Every permission a feature needs, at the highest level any needs it."""
    found: dict[str, str] = {}
    for needs in FEATURES.values():
        for permission, level in needs.items():
            if LEVELS[level] > LEVELS[found.get(permission, "none")]:
                found[permission] = level
    return found


def missing(granted: Mapping[str, str]) -> dict[str, list[str]]:
    """Feature → the permissions (``name: level``) the grant lacks for it; features it covers are absent."""
    found: dict[str, list[str]] = {}
    for feature, needs in FEATURES.items():
        short = [f"{p}: {level}" for p, level in needs.items() if LEVELS.get(granted.get(p, "none"), 0) < LEVELS[level]]
        if short:
            found[feature] = short
    return found

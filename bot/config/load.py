"""From the text of ``.github/flaketally.yml`` (the organisation's and the repository's) to the effective
configuration, with where each value came from and what was wrong.

A file never stops anything: a key that is wrong is named with why and left out, so its default (or the
organisation's value) applies, and every other key still counts. The repository's keys override the
organisation's key by key, inside sections too (``rates.currency`` alone overrides only the currency).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import yaml
from pydantic import ValidationError

from bot.config.schema import DEFAULT, MAX_FILE_BYTES, Config, describe, sections

CONFIG_PATH = ".github/flaketally.yml"
ORG_REPO = ".github"  # the organisation's defaults live in its `.github` repository, at CONFIG_PATH
DEFAULT_SOURCE = "default"

Key = tuple[str, ...]  # ("rerun",) or ("rates", "currency")


@dataclass(frozen=True, slots=True)
class Source:
    """One configuration file as read: where it is (``owner/name:path``) and its text (None: absent)."""

    where: str
    text: str | None


@dataclass(frozen=True, slots=True)
class Effective:
    """The configuration in force, where each key's value came from, and what was wrong in the files."""

    config: Config = DEFAULT
    origin: Mapping[str, str] = field(default_factory=dict)  # "rates.currency" → "acme/.github:…"
    problems: tuple[str, ...] = ()

    def lines(self, *, skip: tuple[str, ...] = ()) -> list[str]:
        """``key: value (source)`` for every key but the sections in ``skip``, in the schema's order."""
        values = [(k, v) for k, v in _leaves(self.config.model_dump(mode="python")) if k[0] not in skip]
        return [f"{'.'.join(k)}: {describe(v)} ({self.origin.get('.'.join(k), DEFAULT_SOURCE)})" for k, v in values]


def parse(source: Source) -> tuple[dict[Key, Any], list[str]]:
    """The valid keys of one file, as leaves, and a sentence for everything wrong in it."""
    if source.text is None:
        return {}, []
    if len(source.text.encode("utf-8", "surrogatepass")) > MAX_FILE_BYTES:
        return {}, [f"{source.where}: larger than {MAX_FILE_BYTES // 1024} KiB, not read; the defaults apply"]
    try:
        document = yaml.safe_load(source.text)
    except yaml.YAMLError as exc:
        where = getattr(exc, "problem_mark", None)
        at = f" at line {where.line + 1}" if where is not None else ""
        return {}, [f"{source.where}: not valid YAML{at}; the defaults apply"]
    if document is None:
        return {}, []
    if not isinstance(document, dict):
        return {}, [f"{source.where}: a mapping of keys was expected, not {type(document).__name__}"]
    leaves = dict(_leaves(document))
    problems: list[str] = []
    for _ in range(len(leaves) + 1):  # each round leaves out at least one wrong key
        try:
            Config.model_validate(_nest(leaves))
            return leaves, problems
        except ValidationError as exc:
            wrong = _wrong_keys(exc, leaves)
            for key, why in wrong.items():
                shown = ".".join(key)
                problems.append(f"{source.where}: `{shown}` {why}; it is left out")
                leaves = {k: v for k, v in leaves.items() if k[: len(key)] != key}
    return {}, [*problems, f"{source.where}: could not be read; the defaults apply"]


def resolve(sources: Sequence[Source]) -> Effective:
    """The effective configuration: the defaults, then each source in order (the organisation's, then the
    repository's), key by key."""
    merged: dict[Key, Any] = {}
    origin: dict[str, str] = {}
    problems: list[str] = []
    for source in sources:
        leaves, found = parse(source)
        problems.extend(found)
        for key, value in leaves.items():
            merged[key] = value
            origin[".".join(key)] = source.where
    try:
        config = Config.model_validate(_nest(merged))
    except ValidationError as exc:  # valid alone, but not together (history.stable_below ≥ flaky_above)
        wrong = _wrong_keys(exc, merged)
        problems += [
            f"`{'.'.join(k)}` {why} once the files are merged; the default applies" for k, why in wrong.items()
        ]
        for key in wrong:
            merged = {k: v for k, v in merged.items() if k[: len(key)] != key}
            origin = {k: v for k, v in origin.items() if not k.startswith(".".join(key))}
        config = Config.model_validate(_nest(merged))
    return Effective(config, origin, tuple(problems))


def _leaves(document: Mapping[str, Any], prefix: Key = ()) -> list[tuple[Key, Any]]:
    """A document's keys down to the schema's leaves: a section's keys are leaves of their own."""
    nested = sections()
    found: list[tuple[Key, Any]] = []
    for name, value in document.items():
        key = (*prefix, str(name))
        if not prefix and key[0] in nested and isinstance(value, dict):
            found.extend(_leaves(value, key))
        else:
            found.append((key, value))
    return found


def _nest(leaves: Mapping[Key, Any]) -> dict[str, Any]:
    document: dict[str, Any] = {}
    for key, value in leaves.items():
        if len(key) == 1:
            document[key[0]] = value
        else:
            document.setdefault(key[0], {})[key[1]] = value
    return document


def _wrong_keys(exc: ValidationError, leaves: Mapping[Key, Any]) -> dict[Key, str]:
    """The leaf each error is about, and why, in the words a person reads."""
    wrong: dict[Key, str] = {}
    for error in exc.errors(include_url=False):
        loc = tuple(str(part) for part in error["loc"] if not isinstance(part, int))
        key = next((loc[:n] for n in (2, 1) if loc[:n] in leaves), loc[:1])
        if error["type"] == "extra_forbidden":
            why = "is not a key Flaketally knows (see `flaketally config schema`)"
        else:
            message = str(error["msg"]).removeprefix("Value error, ")
            why = f"is wrong: {message[:1].lower()}{message[1:]}"
        wrong.setdefault(key, why)
    return wrong

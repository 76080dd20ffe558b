"""What code a local test run ran on, read through ``git``: a digest of the working tree (HEAD's commit, the
diff against it, the untracked files' names) and the repository's common directory, where the memory of
local runs is kept (``bot.local.recall``). ``git`` runs by argv, never through a shell, read-only, with a
bounded time and a bounded output.
"""

from __future__ import annotations

import hashlib
import subprocess
import threading
from pathlib import Path

MAX_DIFF = 4 << 20  # bytes of ``git diff HEAD``: over it, the tree has no fingerprint (nothing is stored)
TIMEOUT = 20.0  # seconds for each git command
_CHUNK = 1 << 16
# no external diff or text conversion (they run programs the repository names), no colour, no locks
_GIT = ("git", "--no-optional-locks", "-c", "core.quotePath=false")
_DIFF = ("diff", "--binary", "--no-ext-diff", "--no-textconv", "--no-color")


def _git(cwd: Path, *args: str, limit: int = 1 << 20) -> bytes | None:
    """The output of one git command, or None when it fails, times out or writes more than ``limit``
    bytes (read as it comes, so a large output is never held whole)."""
    try:
        process = subprocess.Popen(
            [*_GIT, *args],
            cwd=cwd,
            stdin=subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.DEVNULL,
        )
    except OSError:  # no git, or no such directory
        return None
    timer = threading.Timer(TIMEOUT, process.kill)
    timer.start()
    chunks: list[bytes] = []
    try:
        with process:  # closes the pipe and waits for git
            assert process.stdout is not None
            size = 0
            while chunk := process.stdout.read(_CHUNK):
                size += len(chunk)
                if size > limit:
                    process.kill()
                    return None
                chunks.append(chunk)
    finally:
        timer.cancel()
    return b"".join(chunks) if process.returncode == 0 else None


def common_dir(cwd: Path) -> Path | None:
    """The repository's git common directory (shared by its worktrees), or None outside a repository."""
    out = _git(cwd, "rev-parse", "--git-common-dir")
    if out is None or not out.strip():
        return None
    return (cwd / out.decode("utf-8", "surrogateescape").strip()).resolve()


def fingerprint(cwd: Path) -> str | None:
    """A digest of the code in the working tree: HEAD's commit, ``git diff HEAD`` (staged and unstaged
    changes, binary ones included) and the untracked files' names (not their content). None outside a git
    repository, when a git command fails, or when the diff is over ``MAX_DIFF``."""
    if _git(cwd, "rev-parse", "--git-dir") is None:
        return None
    head = _git(cwd, "rev-parse", "--verify", "--quiet", "HEAD^{commit}")
    if head is None:  # no commit yet: the diff is against the empty tree
        head = _git(cwd, "hash-object", "-t", "tree", "/dev/null")
        if head is None:
            return None
    base = head.decode("ascii", "replace").strip()
    diff = _git(cwd, *_DIFF, base, "--", limit=MAX_DIFF)
    untracked = _git(cwd, "ls-files", "-z", "--others", "--exclude-standard", limit=MAX_DIFF)
    if diff is None or untracked is None:
        return None
    digest = hashlib.sha256()
    for part in (head.strip(), diff, untracked):
        digest.update(len(part).to_bytes(8, "big"))
        digest.update(part)
    return digest.hexdigest()[:32]

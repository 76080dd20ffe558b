"""Reading artifact zips safely: the members that look like JUnit XML, as bounded streams.

No member is ever written to disk, and no member name is ever used as a path. An archive is refused
whole (:class:`ArchiveRefused`) when it is not a zip, is too large or holds too many members; a member
is skipped with an :class:`ArchiveWarning` when it is a symlink, encrypted, a nested archive, has an
absolute or ``..`` name, declares too many bytes or too high a compression ratio, or is XML but not
JUnit. Declared sizes can lie, so each yielded stream enforces the caps again while it is read and
raises :class:`MemberRefused` (a :class:`bot.core.results.ReportRefused`, so ``junit.parse`` callers already
handle it) when one is crossed.
"""

from __future__ import annotations

import fnmatch
import io
import logging
import os
import re
import stat
import zipfile
import zlib
from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from enum import StrEnum
from typing import IO, BinaryIO, NamedTuple

from bot.core.identity import bounded
from bot.core.results import ReportRefused

log = logging.getLogger(__name__)

SNIFF_BYTES = 8192
READ_CHUNK = 1 << 16
MAX_NAME_SHOWN = 300

_NESTED = (".zip", ".gz", ".tgz", ".tar", ".bz2", ".xz", ".zst", ".7z", ".rar", ".jar", ".war")
_BOM = b"\xef\xbb\xbf"
_ROOT = re.compile(rb"<testsuites?[\s/>]")
_DRIVE = re.compile(r"[A-Za-z]:")


class Refusal(StrEnum):
    NOT_A_ZIP = "not a zip archive"
    ARCHIVE_TOO_LARGE = "archive too large"
    TOO_MANY_MEMBERS = "too many members"
    MEMBER_TOO_LARGE = "member too large"
    COMPRESSION_RATIO = "compression ratio too high"
    TOTAL_TOO_LARGE = "total uncompressed size too large"
    SIZE_MISMATCH = "more data than declared"
    NESTED_ARCHIVE = "nested archive"
    SYMLINK = "symbolic link"
    UNSAFE_PATH = "absolute or parent-relative path"
    ENCRYPTED = "encrypted"
    UNSUPPORTED = "unsupported compression"
    CORRUPT = "corrupt member"
    NOT_JUNIT = "not JUnit XML"


class ArchiveWarning(NamedTuple):
    """A member (or the archive) that was skipped, and why."""

    member: str
    reason: Refusal
    detail: str = ""

    def __str__(self) -> str:
        return f"{self.member}: {self.reason}" + (f" ({self.detail})" if self.detail else "")


class ArchiveRefused(Exception):
    """The whole archive is refused; ``reason`` says why."""

    def __init__(self, reason: Refusal, detail: str = "") -> None:
        super().__init__(f"{reason}" + (f" ({detail})" if detail else ""))
        self.reason = reason
        self.detail = detail


class MemberRefused(ReportRefused):
    """A member crossed a cap while being read (its declared sizes lied) or turned out corrupt."""

    def __init__(self, member: str, reason: Refusal, detail: str = "") -> None:
        super().__init__(f"{reason}" + (f" ({detail})" if detail else ""))
        self.member = member
        self.reason = reason
        self.detail = detail


@dataclass(frozen=True, slots=True)
class ArchiveLimits:
    max_archive_bytes: int = 512 << 20
    max_members: int = 10_000
    max_total_bytes: int = 2 << 30  # uncompressed bytes of the members read, together
    max_member_bytes: int = 512 << 20  # uncompressed bytes of one member
    max_ratio: float = 200.0  # uncompressed / compressed, once a member is past ratio_floor_bytes
    ratio_floor_bytes: int = 1 << 20  # small members compress as well as they like

    def __post_init__(self) -> None:
        for name in self.__slots__:
            if getattr(self, name) <= 0:
                raise ValueError(f"ArchiveLimits.{name} must be positive")


DEFAULT_LIMITS = ArchiveLimits()


def matches_patterns(artifact_name: str, patterns: Sequence[str] | None) -> bool:
    """Whether an artifact is a candidate: every artifact when there are no patterns, otherwise
    those whose name matches one fnmatch-style pattern (case-sensitive, like artifact names)."""
    if not patterns:
        return True
    return any(fnmatch.fnmatchcase(artifact_name, pattern) for pattern in patterns)


def looks_like_junit(head: bytes) -> bool:
    """Whether a file's first bytes are: an optional BOM, whitespace, XML declaration, processing
    instructions or comments, then a ``<testsuites`` or ``<testsuite`` element."""
    data = head.removeprefix(_BOM)
    pos = 0
    while True:
        while pos < len(data) and data[pos] in b" \t\r\n":
            pos += 1
        if data.startswith(b"<?", pos):
            end = data.find(b"?>", pos + 2)
            if end < 0:
                return False
            pos = end + 2
        elif data.startswith(b"<!--", pos):
            end = data.find(b"-->", pos + 4)
            if end < 0:
                return False
            pos = end + 3
        else:
            return _ROOT.match(data, pos) is not None


class _Total:
    def __init__(self, limit: int) -> None:
        self.remaining = limit


class _BoundedMember(io.RawIOBase):
    """One member's bytes, stopped at the caps whatever the archive declared."""

    def __init__(
        self, inner: IO[bytes], info: zipfile.ZipInfo, shown: str, limits: ArchiveLimits, total: _Total
    ) -> None:
        super().__init__()
        self._inner = inner
        self._shown = shown
        self._declared = info.file_size
        self._compressed = info.compress_size
        self._limits = limits
        self._total = total
        self._count = 0
        self._replay = b""

    def readable(self) -> bool:
        return True

    def head(self, size: int) -> bytes:
        """The first ``size`` bytes (fewer at the end), given again by the next reads."""
        parts = []
        got = 0
        while got < size:
            chunk = self._pull(size - got)
            if not chunk:
                break
            parts.append(chunk)
            got += len(chunk)
        self._replay = b"".join(parts)
        return self._replay

    def readinto(self, buffer: memoryview | bytearray) -> int:  # type: ignore[override]
        if self._replay:
            n = min(len(buffer), len(self._replay))
            buffer[:n] = self._replay[:n]
            self._replay = self._replay[n:]
            return n
        data = self._pull(len(buffer))
        buffer[: len(data)] = data
        return len(data)

    def _pull(self, size: int) -> bytes:
        try:
            data = self._inner.read(min(size, READ_CHUNK))
        except (zipfile.BadZipFile, EOFError, zlib.error, OSError, ValueError) as exc:
            raise MemberRefused(self._shown, Refusal.CORRUPT, str(exc)) from None
        self._count += len(data)
        self._total.remaining -= len(data)
        limits = self._limits
        if self._count > self._declared:
            raise MemberRefused(self._shown, Refusal.SIZE_MISMATCH, f"declared {self._declared} bytes")
        if self._count > limits.max_member_bytes:
            raise MemberRefused(self._shown, Refusal.MEMBER_TOO_LARGE, f"over {limits.max_member_bytes} bytes")
        if self._total.remaining < 0:
            raise MemberRefused(self._shown, Refusal.TOTAL_TOO_LARGE, f"over {limits.max_total_bytes} bytes")
        if self._count > limits.ratio_floor_bytes and self._count > limits.max_ratio * max(self._compressed, 1):
            raise MemberRefused(self._shown, Refusal.COMPRESSION_RATIO, f"over {limits.max_ratio:g}:1")
        return data

    def close(self) -> None:
        try:
            self._inner.close()
        finally:
            super().close()


def _unsafe_path(name: str) -> bool:
    path = name.replace("\\", "/")
    return path.startswith("/") or bool(_DRIVE.match(path)) or "\x00" in path or ".." in path.split("/")


def _spans(zf: zipfile.ZipFile, members: list[zipfile.ZipInfo], archive_size: int) -> dict[int, int]:
    """For each member (by ``id``), the most compressed bytes the archive has room for: from its local
    header to the next one (or the central directory). A member that declares more lies, or overlaps
    another (the shape of the overlapping-entries zip bomb)."""
    end = int(getattr(zf, "start_dir", archive_size))
    ordered = sorted(members, key=lambda i: i.header_offset)
    spans = {}
    for i, info in enumerate(ordered):
        stop = ordered[i + 1].header_offset if i + 1 < len(ordered) else end
        spans[id(info)] = stop - info.header_offset - 30  # 30: the fixed part of a local header
    return spans


def _member_problem(
    info: zipfile.ZipInfo, span: int, limits: ArchiveLimits, total: _Total
) -> tuple[Refusal, str] | None:
    """Why a member is skipped before it is opened, if it is."""
    name = info.filename
    lower = name.lower()
    if _unsafe_path(name):
        return Refusal.UNSAFE_PATH, ""
    if stat.S_ISLNK(info.external_attr >> 16):
        return Refusal.SYMLINK, ""
    if info.flag_bits & 0x1:
        return Refusal.ENCRYPTED, ""
    if lower.endswith(_NESTED):
        return Refusal.NESTED_ARCHIVE, "archives inside artifacts are not opened"
    if not lower.endswith(".xml"):
        return None
    if info.compress_size > span:
        return Refusal.SIZE_MISMATCH, f"declares {info.compress_size} compressed bytes, the archive has room for {span}"
    if info.file_size > limits.max_member_bytes:
        return Refusal.MEMBER_TOO_LARGE, f"declares {info.file_size} bytes, over {limits.max_member_bytes}"
    if info.file_size > limits.ratio_floor_bytes and info.file_size > limits.max_ratio * max(info.compress_size, 1):
        ratio = info.file_size / max(info.compress_size, 1)
        return Refusal.COMPRESSION_RATIO, f"declares {ratio:.0f}:1, over {limits.max_ratio:g}:1"
    if info.file_size > total.remaining:
        return Refusal.TOTAL_TOO_LARGE, f"the members together would pass {limits.max_total_bytes} bytes"
    return None


def _archive_size(archive: str | os.PathLike[str] | IO[bytes]) -> int:
    if isinstance(archive, str | os.PathLike):
        return os.stat(archive).st_size
    position = archive.tell()
    size = archive.seek(0, os.SEEK_END)
    archive.seek(position)
    return size


def junit_members(
    archive: str | os.PathLike[str] | IO[bytes],
    *,
    limits: ArchiveLimits = DEFAULT_LIMITS,
    warnings: list[ArchiveWarning] | None = None,
) -> Iterator[tuple[str, BinaryIO]]:
    """The members of a zip (a path, or a seekable binary file) that look like JUnit XML, in archive
    order, each as ``(member name, stream)``. A stream is valid until the next item is asked for.

    Skipped members are appended to ``warnings`` (and logged); :class:`ArchiveRefused` is raised when
    iteration starts if the archive as a whole is refused.
    """
    found = warnings if warnings is not None else []

    def skip(member: str, reason: Refusal, detail: str = "") -> None:
        warning = ArchiveWarning(member, reason, detail)
        found.append(warning)
        log.warning("artifact member skipped", extra={"member": member, "reason": str(reason), "detail": detail})

    try:
        size = _archive_size(archive)
    except (OSError, ValueError) as exc:
        raise ArchiveRefused(Refusal.NOT_A_ZIP, f"unreadable: {exc}") from None
    if size > limits.max_archive_bytes:
        raise ArchiveRefused(Refusal.ARCHIVE_TOO_LARGE, f"{size} bytes, over {limits.max_archive_bytes}")
    try:
        zf = zipfile.ZipFile(archive)
    except (zipfile.BadZipFile, zipfile.LargeZipFile, OSError, ValueError, EOFError) as exc:
        raise ArchiveRefused(Refusal.NOT_A_ZIP, str(exc)) from None
    with zf:
        members = zf.infolist()
        if len(members) > limits.max_members:
            raise ArchiveRefused(Refusal.TOO_MANY_MEMBERS, f"{len(members)}, over {limits.max_members}")
        total = _Total(limits.max_total_bytes)
        spans = _spans(zf, members, size)
        for info in members:
            if info.is_dir():
                continue
            shown = bounded(info.filename, MAX_NAME_SHOWN)
            problem = _member_problem(info, spans[id(info)], limits, total)
            if problem is not None:
                skip(shown, *problem)
                continue
            if not info.filename.lower().endswith(".xml"):
                continue
            try:
                inner = zf.open(info)
            except NotImplementedError as exc:
                skip(shown, Refusal.UNSUPPORTED, str(exc))
                continue
            except (zipfile.BadZipFile, OSError, ValueError, RuntimeError, EOFError, zlib.error) as exc:
                skip(shown, Refusal.CORRUPT, str(exc))
                continue
            member = _BoundedMember(inner, info, shown, limits, total)
            try:
                try:
                    head = member.head(SNIFF_BYTES)
                except MemberRefused as exc:
                    skip(shown, exc.reason, exc.detail)
                    continue
                if not looks_like_junit(head):
                    skip(shown, Refusal.NOT_JUNIT, "does not start with <testsuites> or <testsuite>")
                    continue
                yield shown, io.BufferedReader(member, READ_CHUNK)
            finally:
                member.close()

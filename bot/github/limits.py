"""GitHub's facts, stated once: the default API address, the limits of what it accepts and returns, and
the shape of the names and ids that go into its URLs (GITHUB.md, openapi-subset.json)."""

from __future__ import annotations

import re
from typing import Final

DEFAULT_API_URL: Final = "https://api.github.com"


def web_url(api_url: str) -> str:
    """Where people open what the API serves: ``https://github.com`` for GitHub's API, ``https://HOST`` for a
    GitHub Enterprise Server's ``https://HOST/api/v3``."""
    url = api_url.rstrip("/")
    if url == DEFAULT_API_URL:
        return "https://github.com"
    return url.removesuffix("/api/v3")


MAX_PER_PAGE: Final = 100
MAX_OUTPUT_TEXT: Final = 65_535  # check run output.summary and output.text, characters
MAX_TITLE: Final = 255  # annotation title; also applied to the output title, for which GitHub names no limit
MAX_ANNOTATION_BYTES: Final = 65_535  # annotation message and raw_details: "64 KB"
ANNOTATIONS_PER_REQUEST: Final = 50
MAX_COMMENT: Final = 65_536  # issue and comment bodies, characters
MAX_RUNS_FOR_SHA: Final = 1_000  # GitHub returns at most 1,000 runs for a search
MAX_PAGES: Final = 100  # a bound on any listing, so a looping Link header cannot keep a job busy

# A commit: 40 hex digits (SHA-1), or 64 (a SHA-256 repository).
COMMIT_SHA: Final = re.compile(r"[0-9a-f]{40}(?:[0-9a-f]{24})?")
_OWNER = r"[A-Za-z0-9](?:[A-Za-z0-9-]{0,38})"
REPO_FULL_NAME: Final = re.compile(rf"({_OWNER})/([A-Za-z0-9._-]{{1,100}})")

# GitHub's secondary limits on content-creating requests (POST, PATCH, PUT, DELETE), per installation
WRITES_PER_MINUTE: Final = 80
WRITES_PER_HOUR: Final = 500

"""The ``github`` fixture: the suite's one fake of GitHub's HTTP (tests/github_fake.py).

Registered from tests/conftest.py with ``pytest_plugins = ["tests.conftest_github"]``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.github_fake import FakeGitHub


@pytest.fixture
def github() -> Iterator[FakeGitHub]:
    """GitHub for one test: empty state, the network blocked, every request recorded. The test fails
    if anything asked for a URL the fake has no route for."""
    with FakeGitHub() as fake:
        yield fake

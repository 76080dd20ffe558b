"""Pages opened from disk in headless Chromium, as a reader opens a CI artifact, with every request, console error
and page error recorded; and the colours Chromium computed and drew, for checking what a reader sees.

The browser is the system's Chromium (``FLAKETALLY_CHROMIUM``, else ``chromium`` on PATH), driven by Playwright;
Playwright's own browser download is never used. Without Chromium the test fails, saying what to install.
"""

from __future__ import annotations

import io
import os
import re
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Literal

import pytest
from PIL import Image
from playwright.sync_api import Browser, ConsoleMessage, Error, Page, Request, sync_playwright

INSTALL = (
    "the HTML report test needs Chromium: install it (apt-get install chromium; scripts/setup does it when run as "
    "root) or set FLAKETALLY_CHROMIUM to a Chromium binary"
)


def chromium() -> str:
    path = os.environ.get("FLAKETALLY_CHROMIUM") or shutil.which("chromium")
    if not path or not Path(path).is_file():
        pytest.fail(f"{INSTALL} (looked for {path or 'chromium on PATH'})", pytrace=False)
    return path


@contextmanager
def launched() -> Iterator[Browser]:
    """The system's Chromium, headless (a module's ``browser`` fixture)."""
    path = chromium()
    with sync_playwright() as playwright:
        browser = playwright.chromium.launch(executable_path=path, args=["--no-sandbox", "--force-color-profile=srgb"])
        yield browser
        browser.close()


@contextmanager
def new_tab(browser: Browser) -> Iterator[Page]:
    """A tab of its own context (a module's ``tab`` fixture: a tab costs Chromium most of a second here)."""
    context = browser.new_context(viewport={"width": 1400, "height": 900})
    yield context.new_page()
    context.close()


@dataclass
class Opened:
    page: Page
    url: str
    requests: list[str] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # console errors (a blocked load is one) and page errors


@contextmanager
def opened(tab: Page, file: Path, html: str, color_scheme: Literal["light", "dark"] = "light") -> Iterator[Opened]:
    """``html`` written to ``file`` and opened from there in ``tab``, every request and console error recorded."""
    file.write_text(html, encoding="utf-8")
    seen = Opened(tab, file.resolve().as_uri())

    def request(r: Request) -> None:
        seen.requests.append(r.url)

    def console(message: ConsoleMessage) -> None:
        if message.type == "error":
            seen.problems.append(message.text)

    def error(e: Error) -> None:
        seen.problems.append(str(e))

    tab.emulate_media(color_scheme=color_scheme)
    tab.on("request", request)
    tab.on("console", console)
    tab.on("pageerror", error)
    try:
        tab.goto(seen.url)
        yield seen
    finally:
        tab.remove_listener("request", request)
        tab.remove_listener("console", console)
        tab.remove_listener("pageerror", error)


def rgb(css: str) -> tuple[int, int, int]:
    """``rgb(1, 2, 3)`` as Chromium gives a computed colour."""
    found = re.fullmatch(r"rgba?\((\d+), (\d+), (\d+)(?:, [\d.]+)?\)", css)
    assert found, css
    return int(found.group(1)), int(found.group(2)), int(found.group(3))


def luminance(colour: tuple[int, int, int]) -> float:
    def linear(c: int) -> float:
        s = c / 255
        return s / 12.92 if s <= 0.04045 else ((s + 0.055) / 1.055) ** 2.4

    r, g, b = (linear(c) for c in colour)
    return 0.2126 * r + 0.7152 * g + 0.0722 * b


def colours(png: bytes) -> set[tuple[int, int, int]]:
    image = Image.open(io.BytesIO(png)).convert("RGB")
    assert image.width > 0 and image.height > 0
    counted = image.getcolors(maxcolors=image.width * image.height)
    assert counted is not None
    return {(int(c[0]), int(c[1]), int(c[2])) for _, c in counted}  # type: ignore[index]


def background(page: Page, selector: str) -> tuple[int, int, int]:
    return rgb(page.locator(selector).first.evaluate("e => getComputedStyle(e).backgroundColor"))

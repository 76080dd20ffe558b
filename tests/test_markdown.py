"""bot.render.markdown: outside text (test names, failure messages) made inert in Markdown.

Besides a few exact outputs, every function is checked against a set of hostile strings (those of
tests/fixtures/hostile/injection-names.xml and some written here) for what must hold whatever the text:
no HTML comment can be opened or closed (so our hidden marker cannot be forged), no control character
or line break survives, ``code`` is exactly one CommonMark code span showing the text, and ``plain``
escapes every character Markdown, HTML or a mention could use."""

from __future__ import annotations

import re

import defusedxml.ElementTree as DefusedET
import pytest

from bot.render.markdown import code, neutralise, plain, truncate
from tests.conftest import FIXTURES

MARKER = "<!-- flaketally:comment -->"
ZWSP = "\u200b"
DIVIDES = "\u2223"  # what a "|" becomes inside a code span
CONTROLS = [chr(c) for c in (*range(0x20), *range(0x7F, 0xA0))]  # C0, DEL and C1


def _fixture_texts() -> list[str]:
    """Every name, class name, message and failure text written in the injection fixture, as XML reads it."""
    tree = DefusedET.parse(FIXTURES / "hostile" / "injection-names.xml")
    texts: list[str] = []
    for element in tree.iter():
        if element.tag not in {"testcase", "failure"}:
            continue
        texts.extend(element.attrib[k] for k in ("classname", "name", "message") if k in element.attrib)
        if element.text and element.text.strip():
            texts.append(element.text)
    return texts


FIXTURE_TEXTS = _fixture_texts()
WRITTEN = [
    MARKER,
    "<!---->",
    "<!--<!---->-->",
    "<<!--!-->>",
    "--->",
    "<!-->",
    "a<!--b-->c",
    "<!\x00--",  # a control character cannot be where a comment opener is built
    "@octocat please look",
    "cc @org/team",
    "\\@octocat",  # a backslash of the text's own must not escape our escape away
    "[x](https://example.invalid)",
    "![img](https://example.invalid/i.png)",
    "<b>bold</b><script>alert(1)</script>",
    "</details>",
    "<https://example.invalid>",
    "&lt;b&gt; &amp; &#60;",
    "**strong** _em_ ~~gone~~ `tick`",
    "# heading",
    "1. item",
    "- item",
    "+ item",
    "> quote",
    "| a | b |",
    ":shipit: #1 GH-2",
    "{{ template }}",
    "```\nfence break\n```",
    "``double`` and ` single",
    "`",
    "``",
    "a`",
    "`a",
    "line one\nline two\r\nline three\rend",
    "tab\there",
    "\x1b[31mred\x1b[0m",
    "bell\x07 nul\x00 del\x7f nel\x85 c1\x9f",
    "",
    " ",
    "x" * 5000,
    "`" * 5000,
    "<!--" * 300,
    "@" * 1000,
]
HOSTILE = [*dict.fromkeys([*FIXTURE_TEXTS, *WRITTEN])]
IDS = [f"{i}-{text[:24]!a}" for i, text in enumerate(HOSTILE)]


def _backtick_runs(text: str) -> list[int]:
    return [len(run) for run in re.findall(r"`+", text)]


def read_code_span(span: str) -> str:
    """What CommonMark shows for ``span``, which must be exactly one inline code span (spec 0.30, 6.1):
    a run of N backticks, up to the next run of exactly N; line endings become spaces; one space is
    removed from each end when both ends are spaces and the content is not all spaces."""
    opening = len(span) - len(span.lstrip("`"))
    closing = len(span) - len(span.rstrip("`"))
    assert opening > 0, f"not a code span: {span!r}"
    assert opening == closing, f"opened with {opening} backticks, closed with {closing}: {span!r}"
    inner = span[opening:-closing]
    assert inner, f"nothing between the fences: {span!r}"
    assert all(run < opening for run in _backtick_runs(inner)), f"the span would close early: {span!r}"
    inner = inner.replace("\r\n", " ").replace("\n", " ").replace("\r", " ")
    if inner.startswith(" ") and inner.endswith(" ") and inner.strip(" "):
        inner = inner[1:-1]
    return inner


# Every character CommonMark/GFM/GitHub gives a meaning to in prose, and why: \ escapes, ` code,
# * _ emphasis, ~ strikethrough, [ ] ( ) ! links and images, { } templates, # headings and issue
# references, + - . lists and rules, | tables, < > HTML and autolinks, & entities, @ mentions, : emoji
# and URL schemes.
SPECIAL = frozenset("\\`*_~[]()!{}#+-.|<>&@:")


def read_plain(escaped: str) -> str:
    """The text Markdown shows for ``escaped``, asserting that every special character in it is escaped
    and that nothing else is (a backslash before any other character would be shown)."""
    shown: list[str] = []
    i = 0
    while i < len(escaped):
        char = escaped[i]
        if char == "\\":
            assert i + 1 < len(escaped), f"a trailing backslash in {escaped!r}"
            assert escaped[i + 1] in SPECIAL, f"a needless escape of {escaped[i + 1]!r} in {escaped!r}"
            shown.append(escaped[i + 1])
            i += 2
        else:
            assert char not in SPECIAL, f"an unescaped {char!r} at {i} in {escaped!r}"
            shown.append(char)
            i += 1
    return "".join(shown)


def _no_comment_delimiters(text: str) -> None:
    assert "<!--" not in text
    assert "-->" not in text


def _no_controls(text: str, *, newlines: bool = False) -> None:
    allowed = {"\n"} if newlines else set()
    assert not [c for c in text if c in CONTROLS and c not in allowed], repr(text)


def test_the_fixture_gives_the_hostile_texts() -> None:
    # The fixture is the realistic source of hostile names: make sure they are really in the set.
    assert "test_[click](https://example.invalid) @octocat #1 <img src=x onerror=alert(1)>" in HOSTILE
    assert "test_<!-- flaketally:comment -->_marker" in HOSTILE
    assert "| broken | table |\n</details><script>alert(1)</script> @org/team" in HOSTILE
    assert "```\nfence break\n```" in FIXTURE_TEXTS
    assert max(len(t) for t in FIXTURE_TEXTS) >= 5000


# --- truncate ---------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "limit", "expected"),
    [
        ("abcdef", 4, "abc…"),
        ("abcd", 4, "abcd"),  # exactly at the limit: kept whole, no ellipsis
        ("abcde", 4, "abc…"),
        ("abc", 10, "abc"),
        ("", 5, ""),
        ("abc", 1, "…"),
        ("héllo wörld", 6, "héllo…"),  # counted in characters, not bytes
    ],
)
def test_truncate(text: str, limit: int, expected: str) -> None:
    assert truncate(text, limit) == expected


@pytest.mark.parametrize("limit", [1, 2, 10, 200, 499, 500, 501, 6000])
@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_truncate_bounds_and_keeps_a_prefix(text: str, limit: int) -> None:
    cut = truncate(text, limit)
    assert len(cut) <= limit
    if len(text) <= limit:
        assert cut == text
    else:
        assert cut.endswith("…") and text.startswith(cut[:-1]) and len(cut) == limit


# --- neutralise -------------------------------------------------------------------------------------


def test_neutralise_breaks_the_marker() -> None:
    assert neutralise(MARKER) == f"<{ZWSP}!-- flaketally:comment -{ZWSP}->"
    assert neutralise(MARKER, keep_newlines=True) == f"<{ZWSP}!-- flaketally:comment -{ZWSP}->"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("<!---->", f"<{ZWSP}!---{ZWSP}->"),
        ("--->", f"--{ZWSP}->"),
        ("<!-->", f"<{ZWSP}!-{ZWSP}->"),
        ("a<!--b-->c", f"a<{ZWSP}!--b-{ZWSP}->c"),
        ("<!-<!--", f"<!-<{ZWSP}!--"),
    ],
)
def test_neutralise_comment_delimiters(text: str, expected: str) -> None:
    assert neutralise(text) == expected


def test_neutralise_turns_every_control_character_into_a_space() -> None:
    for char in CONTROLS:
        assert neutralise(f"a{char}b") == "a b", hex(ord(char))
    for char in CONTROLS:
        expected = "a\nb" if char == "\n" else "a b"
        assert neutralise(f"a{char}b", keep_newlines=True) == expected, hex(ord(char))


def test_neutralise_keeps_printable_text() -> None:
    printable = "".join(chr(c) for c in range(0x20, 0x7F)) + "\xa0é→✓😀\u2028"
    assert neutralise(printable) == printable
    assert neutralise("test_ok[py3.12] (ubuntu-latest)") == "test_ok[py3.12] (ubuntu-latest)"


def test_neutralise_line_breaks() -> None:
    text = "one\ntwo\r\nthree\rfour"
    assert neutralise(text) == "one two  three four"
    # Only "\n" is kept: a carriage return is a control character like any other.
    assert neutralise(text, keep_newlines=True) == "one\ntwo \nthree four"


@pytest.mark.parametrize("keep_newlines", [False, True])
@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_neutralise_never_leaves_a_comment_or_a_control(text: str, keep_newlines: bool) -> None:
    out = neutralise(text, keep_newlines=keep_newlines)
    _no_comment_delimiters(out)
    _no_controls(out, newlines=keep_newlines)
    # Nothing but the inserted zero-width spaces is added, and nothing else is removed or moved.
    assert len(out) == len(text) + out.count(ZWSP) - text.count(ZWSP)
    assert out.replace(ZWSP, "") == "".join(
        c if (c == "\n" and keep_newlines) or c not in CONTROLS else " " for c in text
    ).replace(ZWSP, "")


# --- code -------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("test_ok", "`test_ok`"),
        ("a`b", "``a`b``"),
        ("a ``` b", "````a ``` b````"),
        ("`x`", "`` `x` ``"),  # starts (and ends) with a backtick: padded
        ("`a", "`` `a ``"),
        ("a`", "`` a` ``"),
        ("", "`  `"),  # blank: padded, so the fences do not touch
        (" ", "`   `"),
        ("a|b", f"`a{DIVIDES}b`"),
        ("| broken | table |", f"`{DIVIDES} broken {DIVIDES} table {DIVIDES}`"),
        ("a\nb\tc", "`a b c`"),
        (MARKER, f"`<{ZWSP}!-- flaketally:comment -{ZWSP}->`"),
    ],
)
def test_code(text: str, expected: str) -> None:
    assert code(text) == expected


def test_code_is_bounded() -> None:
    assert code("x" * 5000) == "`" + "x" * 199 + "…`"
    assert code("abcdef", limit=4) == "`abc…`"
    # The worst case: a text of backticks needs a fence longer than the (cut) text.
    assert code("`" * 5000) == "`" * 200 + " " + "`" * 199 + "… " + "`" * 200


@pytest.mark.parametrize("limit", [1, 10, 200])
def test_code_length_follows_the_limit(limit: int) -> None:
    assert len(code("y" * 1000, limit)) == limit + 2


def _literal_in_commonmark(content: str) -> bool:
    """Whether code()'s padding lets CommonMark show ``content`` as it is. Not when it is empty (a code
    span cannot be empty), nor when it begins and ends with a space: CommonMark then strips one space at
    each end of a content that is not all spaces, and keeps the padding of a blank one."""
    return bool(content) and not (content.startswith(" ") and content.endswith(" "))


@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_code_is_one_span_showing_the_text(text: str) -> None:
    span = code(text)
    content = neutralise(truncate(text, 200)).replace("|", DIVIDES)
    shown = read_code_span(span)
    if _literal_in_commonmark(content):
        assert shown == content
    else:
        assert shown.strip(" ") == content.strip(" ")
    fence = len(span) - len(span.lstrip("`"))
    assert fence == max(_backtick_runs(content), default=0) + 1  # longer than any run inside, no longer
    assert "|" not in span  # a table cell is not split
    assert "\n" not in span and "\r" not in span
    _no_controls(span)
    _no_comment_delimiters(span)
    # Bounded: at most the limit, plus the zero-width spaces that break comment delimiters.
    assert len(content) <= 200 + content.count(ZWSP) - text.count(ZWSP)
    assert len(span) <= 3 * len(content) + 4


def test_code_holds_the_fixture_names_literally() -> None:
    name = "tests.evil::test_[click](https://example.invalid) @octocat #1 <img src=x onerror=alert(1)>"
    assert code(name) == f"`{name}`"
    assert read_code_span(code("```\nfence break\n```")) == "``` fence break ```"


# --- plain ------------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("@octocat", "\\@octocat"),
        ("cc @org/team", "cc \\@org/team"),
        ("[x](y)", "\\[x\\]\\(y\\)"),
        ("![i](y)", "\\!\\[i\\]\\(y\\)"),
        ("<b>", "\\<b\\>"),
        ("&amp;", "\\&amp;"),
        ("\\@x", "\\\\\\@x"),  # the text's backslash is escaped too, so ours still escapes the "@"
        ("*a* _b_ ~c~ `d`", "\\*a\\* \\_b\\_ \\~c\\~ \\`d\\`"),
        ("# 1. - + | {x}", "\\# 1\\. \\- \\+ \\| \\{x\\}"),
        ("https://example.invalid", "https\\://example\\.invalid"),
        ("plain words 123", "plain words 123"),
        ("a\nb", "a b"),
        (MARKER, f"\\<{ZWSP}\\!\\-\\- flaketally\\:comment \\-{ZWSP}\\-\\>"),
    ],
)
def test_plain(text: str, expected: str) -> None:
    assert plain(text) == expected


def test_plain_is_bounded_before_escaping() -> None:
    assert plain("x" * 5000) == "x" * 499 + "…"
    assert plain("@" * 1000, limit=10) == "\\@" * 9 + "…"
    assert plain("abcdef", limit=4) == "abc…"


@pytest.mark.parametrize("text", HOSTILE, ids=IDS)
def test_plain_escapes_everything(text: str) -> None:
    escaped = plain(text)
    assert read_plain(escaped) == neutralise(truncate(text, 500))
    _no_controls(escaped)
    _no_comment_delimiters(escaped)
    # No mention, link or tag can start: each of these characters is escaped by a backslash that is
    # not itself escaped (an odd run of backslashes before it).
    for match in re.finditer(r"[@\[<]", escaped):
        backslashes = len(escaped[: match.start()]) - len(escaped[: match.start()].rstrip("\\"))
        assert backslashes % 2 == 1, (match.group(), escaped)

"""Hostile and broken reports (tests/fixtures/hostile, copied from ../shared/corpus/hostile, which was made
for this project): each is refused with a clear reason or read with every text bounded; nothing crashes,
hangs, reads a local file or reaches the network.

Each file is parsed in a child process that installs an audit hook (PEP 578) before parsing. The hook
sees every ``open`` and every ``socket.*``/``urllib.*``/``http.*`` event the interpreter raises, from any
module, records it and blocks it (raising), so a leak can neither read nor connect and is still reported.
A control run through the standard library's own SAX parser, with external entities allowed, shows the
hook does see such a fetch and such a read. The child's timeout only guards against a hang; nothing is
asserted about time.
"""

from __future__ import annotations

import json
import re
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from bot.cli import main
from bot.core.identity import MAX_NAME
from bot.core.junit import parse
from bot.core.results import MAX_MESSAGE, Outcome, ReportRefused
from tests.conftest import FIXTURES, ROOT

HOSTILE = FIXTURES / "hostile"
GOOD = FIXTURES / "junit" / "pytest.xml"
GUARD_TIMEOUT = 120  # seconds: a hang guard only

_NOT_READ = "DTDs, entities and external references are not read"
REFUSED = {
    "billion-laughs.xml": f"refused: DTDForbidden ({_NOT_READ})",
    "external-dtd.xml": f"refused: DTDForbidden ({_NOT_READ})",
    "xxe-file.xml": f"refused: DTDForbidden ({_NOT_READ})",
    "deep-nesting.xml": "elements nested deeper than 64",
    "truncated.xml": "not well-formed XML at line 2: unclosed token",
    "not-xml.bin": "not well-formed XML at line 1: not well-formed (invalid token)",
}
READ = {"injection-names.xml"}

CHILD = r"""
import json, sys
mode, path, *forbidden = sys.argv[1:]
if mode == "ours":
    from bot.core.junit import parse
    from bot.core.results import ReportRefused
else:  # the control: the standard library's SAX parser, external general entities allowed
    import xml.sax, xml.sax.handler
    from xml.sax.handler import ContentHandler
    parser = xml.sax.make_parser()
    parser.setFeature(xml.sax.handler.feature_external_ges, True)

    class Text(ContentHandler):
        def __init__(self):
            super().__init__()
            self.text = []

        def characters(self, content):
            self.text.append(content)

        def startElement(self, name, attrs):
            self.text.extend(attrs.values())

leaks, opened = [], []

def hook(event, args):
    if event.startswith(("socket.", "urllib.", "http.", "ftplib.", "smtplib.", "subprocess.", "os.system")):
        leaks.append(f"{event} {args!r}"[:300])
        raise PermissionError(f"blocked by the test: {event}")
    if event == "open" and isinstance(args[0], str):
        name = args[0]
        if not name.endswith((".py", ".pyc", ".so")):
            opened.append(name)
        if any(name.endswith(f) for f in forbidden):
            leaks.append(f"open {name}")
            raise PermissionError(f"blocked by the test: open {name}")

sys.addaudithook(hook)
out = {}
try:
    if mode == "ours":
        with open(path, "rb") as stream:
            report = parse(stream)
        out["results"] = [
            {"id": r.id, "name": r.name, "message": r.message, "outcomes": [a.outcome.value for a in r.attempts]}
            for r in report.results
        ]
    else:
        handler = Text()
        parser.setContentHandler(handler)
        with open(path, "rb") as stream:
            parser.parse(stream)
        out["text"] = "".join(handler.text)
except Exception as exc:
    out["refused" if mode == "ours" and isinstance(exc, ReportRefused) else "error"] = f"{type(exc).__name__}: {exc}"
out["leaks"], out["opened"] = leaks, opened
print(json.dumps(out))
"""


def run_child(mode: str, path: Path, *forbidden: str) -> tuple[dict[str, Any], str]:
    """Parse ``path`` in a child process under the audit hook; its JSON answer and everything it wrote."""
    try:
        done = subprocess.run(
            [sys.executable, "-c", CHILD, mode, str(path), *forbidden],
            capture_output=True,
            text=True,
            timeout=GUARD_TIMEOUT,
            cwd=ROOT,
            check=False,
        )
    except subprocess.TimeoutExpired:
        pytest.fail(f"parsing {path.name} did not finish (hang guard)")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout), done.stdout + done.stderr


def passwd_lines() -> list[str]:
    try:
        return [ln for ln in Path("/etc/passwd").read_text().splitlines() if ln.strip()]
    except OSError:
        return []


def test_the_fixtures_are_all_here() -> None:
    assert {p.name for p in HOSTILE.iterdir()} == set(REFUSED) | READ


@pytest.mark.parametrize("name", sorted(REFUSED))
def test_refused_with_a_clear_reason(name: str) -> None:
    out, _ = run_child("ours", HOSTILE / name, "passwd")
    assert out == {"refused": f"ReportRefused: {REFUSED[name]}", "leaks": [], "opened": [str(HOSTILE / name)]}


@pytest.mark.parametrize("name", sorted([*REFUSED, *READ]))
def test_no_local_file_is_read_and_nothing_is_sent(name: str) -> None:
    out, everything = run_child("ours", HOSTILE / name, "passwd")
    assert out["leaks"] == [] and out["opened"] == [str(HOSTILE / name)]
    assert "error" not in out
    for line in passwd_lines():
        assert line not in everything
    assert not re.search(r"root:.*:0:0:", everything)


def test_the_audit_hook_sees_a_fetch_of_an_external_dtd() -> None:
    """Control: read naively, external-dtd.xml makes the parser fetch http://127.0.0.1:9/evil.dtd; the hook
    records that attempt (and blocks it before any socket exists). Ours showed no such event above."""
    out, _ = run_child("naive", HOSTILE / "external-dtd.xml")
    assert any(leak.startswith("urllib.Request ('http://127.0.0.1:9/evil.dtd'") for leak in out["leaks"])


def test_the_audit_hook_sees_an_external_entity_read(tmp_path: Path) -> None:
    """Control and check: an external entity in element text (xxe-file.xml puts it in an attribute, which
    expat rejects on its own) naming a canary file. Read naively the canary is opened; ours opens nothing
    but the report, refuses it, and the canary's content appears nowhere."""
    canary = tmp_path / "canary-secret.txt"
    canary.write_text("CANARY-3f9a1c\n")
    report = tmp_path / "xxe-text.xml"
    report.write_text(
        f'<?xml version="1.0"?>\n<!DOCTYPE testsuite [ <!ENTITY secret SYSTEM "{canary.as_uri()}"> ]>\n'
        '<testsuite name="s"><testcase classname="c" name="t"><failure>&secret;</failure></testcase></testsuite>\n'
    )
    naive, _ = run_child("naive", report, canary.name)
    assert any(canary.name in leak for leak in naive["leaks"]), naive

    ours, everything = run_child("ours", report, canary.name)
    assert ours == {
        "refused": f"ReportRefused: refused: DTDForbidden ({_NOT_READ})",
        "leaks": [],
        "opened": [str(report)],
    }
    assert "CANARY" not in everything


def test_external_dtd_attempts_no_connection_in_process(monkeypatch: pytest.MonkeyPatch) -> None:
    """The same, in this process: every way out through the socket module and urllib is replaced by a
    recorder that fails, and none is called."""
    import socket
    import urllib.request

    calls: list[str] = []

    def refuse(what: str) -> Any:
        def record(*args: object, **kwargs: object) -> None:
            calls.append(what)
            raise OSError(f"blocked by the test: {what}")

        return record

    monkeypatch.setattr(socket.socket, "connect", refuse("socket.connect"))
    monkeypatch.setattr(socket.socket, "connect_ex", refuse("socket.connect_ex"))
    monkeypatch.setattr(socket, "create_connection", refuse("socket.create_connection"))
    monkeypatch.setattr(socket, "getaddrinfo", refuse("socket.getaddrinfo"))
    monkeypatch.setattr(urllib.request, "urlopen", refuse("urllib.request.urlopen"))
    with (HOSTILE / "external-dtd.xml").open("rb") as stream, pytest.raises(ReportRefused, match="DTDForbidden"):
        parse(stream)
    assert calls == []


def test_injection_names_are_read_and_bounded() -> None:
    with (HOSTILE / "injection-names.xml").open("rb") as stream:
        report = parse(stream)
    assert [r.outcome for r in report.results] == [Outcome.FAILED] * 3
    link, marker, oversize = report.results
    # Read as written: escaping is the renderers' job, not the reader's.
    assert link.id == "tests.evil::test_[click](https://example.invalid) @octocat #1 <img src=x onerror=alert(1)>"
    assert link.message == "| broken | table |"
    assert marker.name == "test_<!-- flaketally:comment -->_marker" and marker.message == "marker spoof"
    # 5,000 characters of name and a long message: cut, the name keeping a digest of the whole.
    assert len(oversize.name) == MAX_NAME and re.fullmatch(r"x+…#[0-9a-f]{12}", oversize.name)
    assert len(oversize.id) <= MAX_NAME and len(oversize.family) <= MAX_NAME
    assert len(oversize.message) == MAX_MESSAGE and oversize.message.endswith("…")
    for result in report.results:
        assert all(len(a.message) <= MAX_MESSAGE for a in result.attempts)


PASSING = """<?xml version="1.0"?>
<testsuite name="clean" commit="c0ffee" attempt="1">
  <testcase classname="tests.clean" name="test_ok" time="0.5"/>
</testsuite>
"""


def analyze_json(capsys: pytest.CaptureFixture[str], db: Path, *paths: Path) -> tuple[int, dict[str, Any], str]:
    code = main(["analyze", *map(str, paths), "--db", str(db), "--format", "json"])
    captured = capsys.readouterr()
    return code, json.loads(captured.out), captured.err


def hostile_folder(tmp_path: Path, names: set[str]) -> Path:
    folder = tmp_path / "reports"
    folder.mkdir()
    for name in names:
        shutil.copy(HOSTILE / name, folder / name)
    return folder


def refused_warnings(doc: dict[str, Any], folder: Path) -> dict[str, str]:
    by_file = {Path(w["path"]).name: w["message"] for w in doc["warnings"] if Path(w["path"]).parent == folder}
    return {name: message for name, message in by_file.items() if name in REFUSED}


def test_analyze_warns_for_each_refused_file_and_still_judges_the_rest(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = hostile_folder(tmp_path, set(REFUSED) | READ)
    shutil.copy(GOOD, folder / "good.xml")
    # A directory is searched for *.xml; the binary file is named on the command line.
    code, doc, _ = analyze_json(capsys, tmp_path / "s.db", folder, folder / "not-xml.bin")
    assert refused_warnings(doc, folder) == REFUSED
    assert doc["reports"] == {"read": 2, "refused": len(REFUSED)}
    commits = {t["id"]: [c["verdict"] for c in t["commits"]] for t in doc["tests"]}
    good = [i for i in commits if i.startswith("tests.test_planted::")]
    assert len(good) == 9
    assert commits["tests.test_planted::test_stable_pass"] == []  # passing commits are counted, not listed
    assert {t["id"]: t["passing_commits"] for t in doc["tests"]}["tests.test_planted::test_stable_pass"] == 1
    assert commits["tests.test_planted::test_always_fail"] == ["undetermined"]  # one failure, no rerun yet
    assert sum(1 for i in commits if i.startswith("tests.evil::")) == 3
    assert code == 1  # failures were read (test_always_fail, the injection tests)


def test_analyze_exits_clean_when_the_only_usable_report_passes(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    folder = hostile_folder(tmp_path, set(REFUSED))
    (folder / "clean.xml").write_text(PASSING)
    code, doc, _ = analyze_json(capsys, tmp_path / "s.db", folder, folder / "not-xml.bin")
    assert refused_warnings(doc, folder) == REFUSED
    assert doc["reports"] == {"read": 1, "refused": len(REFUSED)}
    assert [t["id"] for t in doc["tests"]] == ["tests.clean::test_ok"]
    assert code == 0


def test_analyze_exits_2_when_every_report_is_refused(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    """No usable report: nothing on stdout, each refusal said on stderr with its reason, exit 2."""
    folder = hostile_folder(tmp_path, set(REFUSED))
    paths = [str(folder), str(folder / "not-xml.bin")]
    code = main(["analyze", *paths, "--db", str(tmp_path / "s.db"), "--format", "json"])
    captured = capsys.readouterr()
    assert (code, captured.out) == (2, "")
    lines = captured.err.splitlines()
    for name, reason in REFUSED.items():
        assert f"flaketally: {folder / name}: {reason}" in lines, name
    assert "no usable report" in captured.err


@pytest.mark.parametrize("name", sorted([*REFUSED, *READ]))
def test_the_parser_refuses_what_defusedxmls_own_parser_refuses(name: str) -> None:
    """The reader drives expat with defusedxml's refusing handlers itself (bot/core/junit.py): file by
    file it must refuse with the same defusedxml exception as defusedxml's own parser, or read what it
    reads."""
    import xml.sax

    from defusedxml.common import DefusedXmlException
    from defusedxml.sax import parse as defused_parse

    try:
        defused_parse(str(HOSTILE / name), xml.sax.ContentHandler(), forbid_dtd=True)
        theirs = None
    except DefusedXmlException as exc:
        theirs = type(exc).__name__
    except xml.sax.SAXParseException:
        theirs = "not well-formed"
    try:
        with (HOSTILE / name).open("rb") as stream:
            parse(stream)
        ours = ""
    except ReportRefused as exc:
        ours = str(exc)
    defused = ("DTDForbidden", "EntitiesForbidden", "ExternalReferenceForbidden")
    if theirs in defused:
        assert ours.startswith(f"refused: {theirs} "), (theirs, ours)
    else:  # defusedxml reads it or finds it malformed: ours claims no defusedxml refusal (it may have its own)
        assert not any(kind in ours for kind in defused), (theirs, ours)

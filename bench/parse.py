"""Parse throughput and memory of ``bot.core.junit.parse`` on one big report.

Throughput (in this process, from bytes in memory, best of ``--repeat``), on the big report and on the
200 small dense reports of the end-to-end history (where the cost per testcase, not per byte, rules):

- ``bot.core.junit.parse``: the real reader (defusedxml's SAX reader, our handler, SHA-256 of the bytes);
- ``defusedxml SAX, no-op handler``: the same reader with an empty ContentHandler, to split the
  cost between the SAX layer and our handler;
- ``bare expat``: pyexpat with only a StartElementHandler counting ``<testcase>``, fed 1 MiB chunks.

Memory: a child process per report (each a fresh interpreter) parses one file and reports
its peak RSS (``VmHWM``) before and after, for reports of ``--sizes`` MB holding the same number of tests
(bigger text per test), to show whether memory is flat in report size.

    python -m bench.parse                      # 100 MB throughput, memory at 25/50/100 MB
    python -m bench.parse --mb 20 --sizes 5,10,20 --tests 20000
"""

from __future__ import annotations

import argparse
import io
import json
import subprocess
import sys
import time
import xml.sax.handler
from pathlib import Path

from bench._common import MIB, REPO, mb, peak_rss, ratio, table
from bench.generate import BigSpec, HistorySpec, ensure_big_report, ensure_history


def parse_ours(data: bytes) -> int:
    from bot.core.junit import parse

    return len(parse(io.BytesIO(data)).results)


def parse_sax_noop(data: bytes) -> int:
    from defusedxml.expatreader import create_parser

    class Count(xml.sax.handler.ContentHandler):
        n = 0

        def startElement(self, name: str, attrs: object) -> None:
            if name == "testcase":
                self.n += 1

    handler = Count()
    reader = create_parser(forbid_dtd=True, forbid_entities=True, forbid_external=True)
    reader.setContentHandler(handler)
    view = memoryview(data)
    for start in range(0, len(data), MIB):
        reader.feed(bytes(view[start : start + MIB]))
    reader.close()
    return handler.n


def parse_expat(data: bytes) -> int:
    import pyexpat

    count = 0

    def start(name: str, _attrs: object) -> None:
        nonlocal count
        if name == "testcase":
            count += 1

    parser = pyexpat.ParserCreate()
    parser.StartElementHandler = start
    view = memoryview(data)
    for begin in range(0, len(data), MIB):
        parser.Parse(bytes(view[begin : begin + MIB]), False)
    parser.Parse(b"", True)
    return count


READERS = {
    "bot.core.junit.parse": parse_ours,
    "defusedxml SAX, no-op handler": parse_sax_noop,
    "bare expat (count <testcase>)": parse_expat,
}


def throughput(title: str, blobs: list[bytes], repeat: int) -> None:
    """Each reader over every blob, ``repeat`` times; the best total counts."""
    size = sum(len(b) for b in blobs)
    print(f"\n## Parse throughput: {title}, {mb(size):.1f} MB, best of {repeat}\n")
    rows, best = [], {}
    for label, reader in READERS.items():
        times = []
        for _ in range(repeat):
            start = time.perf_counter()
            n = sum(reader(blob) for blob in blobs)
            times.append(time.perf_counter() - start)
        best[label] = min(times)
        rows.append([label, n, best[label], mb(size) / best[label], n / best[label]])
    ours = best["bot.core.junit.parse"]
    rows = [[*r, ratio(ours, best[r[0]])] for r in rows]
    print(table(["reader", "testcases", "seconds", "MB/s", "testcases/s", "ours/this time"], rows))
    print(f"\nbot.core.junit.parse runs at {best['bare expat (count <testcase>)'] / ours:.1%} of bare expat's speed")


def child(path: str) -> None:
    """Parse one file in this fresh process; print the peak RSS before and after, in bytes."""
    from bot.core.junit import parse

    before = peak_rss()
    start = time.perf_counter()
    with open(path, "rb") as stream:
        report = parse(stream)
    seconds = time.perf_counter() - start
    after = peak_rss()
    print(json.dumps({"before": before, "after": after, "results": len(report.results), "seconds": seconds}))


def memory(paths: list[Path]) -> None:
    print("\n## Peak memory of bot.core.junit.parse, one fresh process per report\n")
    rows = []
    base_delta = None
    for path in paths:
        out = subprocess.run(
            [sys.executable, "-m", "bench.parse", "--child", str(path)],
            check=True,
            capture_output=True,
            text=True,
            timeout=600,
            cwd=REPO,
        )
        got = json.loads(out.stdout)
        delta = got["after"] - got["before"]
        base_delta = base_delta or delta
        size = path.stat().st_size
        rows.append(
            [
                f"{mb(size):.1f} MB",
                got["results"],
                mb(got["before"]),
                mb(got["after"]),
                mb(delta),
                delta / size,
                ratio(delta, base_delta),
                got["seconds"],
            ]
        )
    print(
        table(
            [
                "report",
                "testcases",
                "RSS before MB",
                "peak RSS MB",
                "growth MB",
                "growth/report byte",
                "growth vs first",
                "seconds",
            ],
            rows,
        )
    )
    print("\n(flat means 'growth vs first' stays near 1.00x while the report size doubles)")


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m bench.parse", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    parser.add_argument("--tests", type=int, default=100_000, help="testcases in every big report")
    parser.add_argument("--mb", type=float, default=100, help="size of the throughput report")
    parser.add_argument("--sizes", default="25,50,100", help="report sizes (MB) for the memory run")
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument(
        "--history-tests",
        type=int,
        default=2000,
        help="also time the reports of this history (the end-to-end one); 0: no",
    )
    parser.add_argument("--history-runs", type=int, default=200)
    parser.add_argument("--child", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        child(args.child)
        return 0
    sizes = [float(s) for s in args.sizes.split(",") if s]
    start = time.perf_counter()
    paths = {s: ensure_big_report(BigSpec(tests=args.tests, mb=s)) for s in sorted({*sizes, args.mb})}
    print(
        f"reports ready in {time.perf_counter() - start:.1f} s: "
        + ", ".join(f"{p} ({mb(p.stat().st_size):.1f} MB)" for p in paths.values())
    )
    big = paths[args.mb]
    throughput(f"one big report {big.name}", [big.read_bytes()], args.repeat)
    if args.history_tests:
        spec = HistorySpec(tests=args.history_tests, runs=args.history_runs)
        root = ensure_history(spec)
        files = sorted(root.rglob("*.xml"))
        throughput(
            f"small dense reports: {len(files)} files of {spec.tests:,} tests ({root.name})",
            [f.read_bytes() for f in files],
            args.repeat,
        )
    memory([paths[s] for s in sizes])
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

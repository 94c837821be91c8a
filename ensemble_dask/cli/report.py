"""``ensemble-dask report``: the report's files and summary; ``verify``: each stage's output against its
record."""

from __future__ import annotations

import json
import sys

from ._options import print_summary, progress, stage_store, store_args


def add_parser(sub, common):
    p = sub.add_parser(
        "report", parents=[common], help="write report/metrics.json and report/index.html, print the summary"
    )
    store_args(p)
    p.add_argument(
        "--format",
        choices=["table", "json", "html"],
        default="table",
        help="print the summary table and the page's path (table), metrics.json's document with the "
        "page's path (json), or only the page's path (html)",
    )
    p.set_defaults(run=run)

    p = sub.add_parser(
        "verify", parents=[common], help="check that each complete stage's output is what its record says"
    )
    store_args(p)
    p.add_argument(
        "--repair",
        action="store_true",
        help="unmark the stages whose output disagrees with their record (and the stages that read it), so "
        "that the next run recomputes them",
    )
    p.add_argument(
        "--quick",
        action="store_true",
        help="check shapes, dtypes, stored chunk counts and stamps only (metadata and a listing), as a "
        "re-run does, instead of reading every chunk against the digest its stage recorded",
    )
    p.set_defaults(run=run_verify)


def run(args):
    from .. import pipeline

    with stage_store(args, writes_report=True) as store:
        report = pipeline.write_report(store, progress(args))
    return show(report, args.format)


def show(report, fmt):
    """Print ``report`` as ``fmt``; status 0 only when the page was written."""
    html = report.get("html")
    if fmt == "json":
        print(json.dumps(report, indent=2, default=float))
    elif fmt == "table":
        print_summary(report)
    if not html:
        print("ensemble-dask: error: report/index.html was not written", file=sys.stderr)
        return 1
    if fmt != "json":
        print(f"report: {html}" if fmt == "table" else html)
    return 0


def run_verify(args):
    """Print each complete stage's verdict; status 1 when some disagree and were not repaired."""
    from ..stages import generate  # noqa: F401 (registers its content check)

    with stage_store(args, lease=args.repair) as store:
        records = {name: rec for name, rec in store.records().items() if rec.get("complete")}
        content = not args.quick
        found = (
            store.repair(content=content)
            if args.repair
            else {name: p for name in records if (p := store.verify(name, content=content))}
        )
    for name in records:
        problems = found.get(name)
        print(f"{name}: {'ok' if not problems else '; '.join(problems)}")
    if found and args.repair:
        print(
            f"verify: unmarked {', '.join(found)} (and the stages that read them): run the same command again"
        )
    return 1 if found and not args.repair else 0

"""``ensemble-dask run WORKFLOW``: every stage of a workflow YAML file."""

from __future__ import annotations

from ._options import cluster_args, print_summary, progress, set_args, storage_options, store_args


def add_parser(sub, common):
    p = sub.add_parser("run", parents=[common], help="run every stage of a workflow YAML file")
    p.add_argument("workflow", help="the workflow YAML file (its data, store, stages and their parameters)")
    p.add_argument("--data", help="input URL, replacing the workflow's data.url")
    store_args(p, required=False)
    cluster_args(p)
    set_args(p)
    p.set_defaults(run=run)


def run(args):
    from .. import pipeline
    from ..io.store import workflow_store_url

    spec = pipeline.load_workflow(args.workflow)
    spec = pipeline.apply_overrides(
        spec, args.set, data=args.data, store=args.store, scheduler=args.scheduler
    )
    if args.storage_options is not None:
        spec["storage_options"] = storage_options(args.storage_options)
    if args.n_workers:
        spec.setdefault("dask", {})["n_workers"] = args.n_workers
    with pipeline.removed_if_left_empty(workflow_store_url(spec), spec.get("storage_options")):
        report = pipeline.run_workflow(spec, progress=progress(args), take_over=args.take_over)
    print_summary(report)
    if report.get("html"):
        print(f"report: {report['html']}")
    return 0

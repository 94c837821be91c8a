"""``ensemble-dask federated WORKFLOW``: row-distributed BCE or KCC over the sites of a workflow;
``split-sites``: a store's labels cut into per-site arrays, to try it."""

from __future__ import annotations

import sys

from .._validation import EnsembleDaskError
from ._options import csv_list, progress, set_args, stage_store, storage_options, store_args


def add_parser(sub, common):
    p = sub.add_parser(
        "federated", parents=[common], help="row-distributed BCE or KCC over the sites of a workflow"
    )
    p.add_argument(
        "workflow", help="the coordinator's workflow YAML file (its store, and each site's name and address)"
    )
    store_args(p, required=False)
    set_args(p)
    p.add_argument("--no-progress", action="store_true", help="no progress bar")
    p.add_argument(
        "--restart", action="store_true", help="discard the checkpoint instead of resuming from it"
    )
    p.set_defaults(run=run)

    p = sub.add_parser(
        "split-sites",
        parents=[common],
        help="cut a store's labels into per-site arrays (to try federated runs)",
    )
    store_args(p)
    p.add_argument(
        "--out", required=True, help="directory or URL under which each site gets NAME/labels.zarr"
    )
    p.add_argument("--names", type=csv_list, required=True, help="site names, comma-separated")
    p.set_defaults(run=run_split)


def run(args):
    from .. import pipeline
    from ..federated import SiteLostError, SiteRefusedError
    from ..io.store import workflow_store_url
    from ..stages.federated import StoreCheckpoint

    spec = pipeline.load_workflow(args.workflow)
    spec = pipeline.apply_overrides(spec, args.set, store=args.store)
    if "federated" not in spec:
        raise EnsembleDaskError(f"workflow {args.workflow!r} has no 'federated' section")
    if args.storage_options is not None:
        spec["storage_options"] = storage_options(args.storage_options)
    pipeline.check_workflow(spec)
    if args.restart:
        from ..io.store import RunStore

        StoreCheckpoint(RunStore(workflow_store_url(spec), spec.get("storage_options"))).clear()
    try:
        # the federated run, then its report page
        result = pipeline.run_workflow(spec, progress=progress(args), take_over=args.take_over)
        summary = result["federated"]
    except SiteRefusedError as exc:
        print(f"ensemble-dask: error: {exc}", file=sys.stderr)
        print("ensemble-dask: (the site's own policy refused; its audit log says why)", file=sys.stderr)
        return 3
    except SiteLostError as exc:
        print(f"ensemble-dask: error: {exc}", file=sys.stderr)
        if (spec.get("federated") or {}).get("method") == "kcc":
            print(
                "ensemble-dask: (KCC runs are not checkpointed) bring the site back and run again",
                file=sys.stderr,
            )
            return 3
        print(
            "ensemble-dask: (alpha, beta) of the last complete iteration are checkpointed; bring the site "
            "back and run the same command to resume",
            file=sys.stderr,
        )
        return 3
    tls = "mutual TLS"
    if summary.get("method") == "kcc":
        print(
            f"federated KCC ({summary['mode']}, {tls}) over {len(summary['sites'])} sites "
            f"({summary['n_rows']} rows): {summary['iterations']} Lloyd iterations, objective "
            f"{summary['objective']:.6f}, {summary['seconds']:.1f} s"
            + (f", without {summary['dropped']} (dropped out)" if summary.get("dropped") else "")
        )
    else:
        print(
            f"federated BCE ({summary['mode']}, {tls}) over {len(summary['sites'])} sites "
            f"({summary['n_rows']} rows): {summary['iterations']} EM iterations, lower bound "
            f"{summary['lower_bound']:.4f}, {summary['seconds']:.1f} s"
            + (f", without {summary['dropped']} (dropped out)" if summary.get("dropped") else "")
            + (
                f", resumed at iteration {summary['resumed_from_iteration']}"
                if summary["resumed_from_iteration"]
                else ""
            )
        )
    if "H" in summary:
        print(
            f"whole federation vs reference: H={summary['H']:.4f} ARI={summary['ARI']:.4f} "
            f"NMI={summary['NMI']:.4f}"
        )
    print(f"report: {result['html']}")
    return 0


def run_split(args):
    import yaml

    from ..stages.sites import split_sites

    with stage_store(args, lease=False) as store:  # it only reads the store
        sites = split_sites(store, args.out, args.names)
    print("# each site's data section, for its own site.yaml (ensemble-dask site serve)")
    print(yaml.safe_dump({s["name"]: {"data": s["data"]} for s in sites}, sort_keys=False), end="")
    return 0

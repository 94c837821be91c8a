"""``ensemble-dask consensus NAME``: one consensus method on the store; its help lists the registry. The
report page is drawn when asked (``--report``, or ``ensemble-dask report``), not after every fit."""

from __future__ import annotations

import argparse

from .._validation import InputError
from ._options import print_summary, progress, seed, set_args, stage_store, store_args


def add_parser(sub, common):
    p = sub.add_parser(
        "consensus",
        parents=[common],
        help="run a consensus method on the store",
        epilog=methods_help(),
        formatter_class=argparse.RawDescriptionHelpFormatter,
    )
    p.add_argument(
        "name",
        help="result name: a method (below), pcc-kl or pcc-l2 (PCC with that divergence), a method and a "
        "suffix (bce-k4 runs bce), or any plain name with --set method=METHOD",
    )
    store_args(p)
    p.add_argument(
        "--n-clusters",
        type=n_clusters,
        default=None,
        metavar="K",
        help="the number of consensus clusters K (the same as --set n_clusters=K, as generate and coassoc "
        "take it), or K chosen (method graph): auto, or a range K_MIN:K_MAX such as 2:20 (the ensemble's k "
        "must reach past K_MAX: generate --n-clusters K_MAX)",
    )
    set_args(p, help="a method parameter")
    p.add_argument("--seed", type=seed, default=0, help="the seed of the method's starts")
    p.add_argument("--no-progress", action="store_true", help="no line counting the fit's time")
    p.add_argument(
        "--report",
        action="store_true",
        help="draw the report page after the fit (else `ensemble-dask report` draws it; `run` at its end)",
    )
    p.set_defaults(run=run)


def n_clusters(text):
    """``--n-clusters``: an integer K, ``auto`` or ``K_MIN:K_MAX`` (as a list, as a workflow gives it)."""
    if text == "auto":
        return text
    lo, sep, hi = text.partition(":")
    try:
        return [int(lo), int(hi)] if sep else int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(
            f"takes an integer K, auto or a range K_MIN:K_MAX such as 2:20; got {text!r}"
        ) from None


def methods_help():
    """The consensus methods of the registry, a line each, for ``consensus --help``."""
    from ..consensus import registry

    lines = ["methods (fitted on):"]
    for name in registry.names():
        m = registry.get(name)
        lines.append(f"  {name:8s} {m.summary} ({m.fits_on})")
    return "\n".join(lines)


def run(args):
    from .. import pipeline
    from ..stages.consensus import consensus_stage

    params = dict(map(pipeline.parse_assignment, args.set))
    if args.n_clusters is not None:
        if params.setdefault("n_clusters", args.n_clusters) != args.n_clusters:
            raise InputError(
                f"--n-clusters {args.n_clusters} and --set n_clusters={params['n_clusters']} disagree"
            )
    with stage_store(args, writes_report=args.report) as store:
        before = store.record(f"consensus/{args.name}") or {}
        metrics = consensus_stage(store, args.name, seed=args.seed, progress=progress(args), **params)
        after = store.record(f"consensus/{args.name}") or {}
        if args.report:
            dataset = pipeline.write_report(store, progress(args))["dataset"]
        else:  # the page is drawn when asked, not after every fit (seconds of figures on small data)
            from ..stages.report import dataset_facts

            dataset = dataset_facts(store)
    if before.get("complete") and before.get("started") == after.get("started"):
        print(f"consensus {args.name}: up to date (fitted {after.get('finished')}), not fitted again")
    print_summary({"dataset": dataset, "methods": {args.name: metrics}})
    if not args.report:
        print(f"report: not redrawn; ensemble-dask report --store {args.store} draws it")
    return 0

"""``ensemble-dask generate``: base clusterings as a Dask graph; ``import-labels``: precomputed ones."""

from __future__ import annotations

import argparse

from ._options import (
    cluster_args,
    csv_list,
    dask_options,
    progress,
    seed,
    sep_arg,
    stage_store,
    storage_options,
    store_args,
)


def add_parser(sub, common):
    p = sub.add_parser("generate", parents=[common], help="generate base clusterings as a Dask graph")
    store_args(p)
    cluster_args(p)
    p.add_argument("-N", "--n-clusterings", type=int, default=100, help="base clusterings in the ensemble")
    p.add_argument("--ensemble", default="type1", help="type1 (k-means) or type2 (mixed algorithms)")
    p.add_argument("--k-min", type=int, help="fewest clusters of a base clustering (default 2, or K // 2)")
    p.add_argument(
        "--k-max",
        type=k_max_arg,
        help="most clusters of a base clustering (default 10, or 2K); 'sqrt': floor(sqrt(rows)), "
        "rows counted up to 20,000",
    )
    p.add_argument(
        "--n-clusters",
        type=int,
        help="the largest K you will ask of the consensus (sets the k range's default)",
    )
    p.add_argument("--rate", type=float, default=1.0, help="share of the rows each base clustering sees")
    p.add_argument(
        "--algorithms", type=csv_list, help="type2: comma-separated algorithms to draw from (default: all)"
    )
    p.add_argument("--seed", type=seed, default=0, help="the seed of every base clustering's draws")
    p.add_argument(
        "--extend",
        action="store_true",
        help="label every row outside a clustering's subsample by its nearest cluster centre (else -1)",
    )
    p.add_argument(
        "--max-rows",
        type=int,
        help="most rows of a base clustering's subsample (a larger rate's share is cut to it); with "
        "--extend the others get their nearest centre (default: none, or 20,000 for graph's ensemble)",
    )
    p.add_argument(
        "--replace-imported",
        action="store_true",
        help="replace base clusterings brought with import-labels (else refused)",
    )
    p.set_defaults(run=run)

    p = sub.add_parser(
        "import-labels", parents=[common], help="bring precomputed partitions (n x N table, -1 = absent)"
    )
    p.add_argument("labels", help="URL of the labels table")
    store_args(p)
    p.add_argument(
        "--header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the CSV's first line names the columns (default: guessed from its first two lines)",
    )
    sep_arg(p)
    p.add_argument(
        "--reference",
        metavar="FILE",
        help="reference labels to score the results against (y_true): one per row of the table, in its "
        "order (.npy, or a CSV or Parquet file of one column); for a store without data (ingest's come "
        "with its data)",
    )
    p.add_argument("--data-storage-options", help="fsspec options of the labels table, as JSON")
    p.set_defaults(run=run_import)


def k_max_arg(text):
    """``--k-max``: an integer or ``sqrt``."""
    if text == "sqrt":
        return text
    try:
        return int(text)
    except ValueError:
        raise argparse.ArgumentTypeError(f"an integer or 'sqrt'; got {text!r}") from None


def run(args):
    from .. import pipeline
    from ..stages.generate import generate

    # (the cluster starts when generate has work: a refusal of imported labels starts none)
    with stage_store(args, writes_report=True) as store:
        with (
            pipeline.client_for_store(store, args.scheduler, dask_options(args)) as client,
            client.running("generate"),
        ):
            info = generate(
                store,
                client,
                progress=progress(args),
                replace_imported=args.replace_imported,
                n_clusterings=args.n_clusterings,
                ensemble=args.ensemble,
                k_min=args.k_min,
                k_max=args.k_max,
                n_clusters=args.n_clusters,
                rate=args.rate,
                algorithms=args.algorithms,
                seed=args.seed,
                extend=args.extend,
                max_rows=args.max_rows,
            )
    print(
        f"generate: {info['n_clusterings']} clusterings (k in [{info['k_min']}, {info['k_max']}]), "
        f"{info['computed']} computed"
    )
    if info["outdated"]:
        names = ", ".join(info["outdated"])
        print(
            f"generate: new base clusterings: the consensus results {names} were fitted on the old ones and "
            "are out of date; run their consensus again (ensemble-dask consensus NAME, or the workflow)"
        )
    if args.n_clusters is None and args.k_min is None and args.k_max is None:
        print(
            "generate: a range for consensus of up to 5 clusters; for K clusters, "
            "generate --n-clusters K draws k in [K/2, 2K] "
            "(a consensus splits only what base partitions split)"
        )
    return 0


def run_import(args):
    from ..stages.generate import import_labels, read_labels_table

    # checked before a store is opened (or created)
    options = storage_options(args.data_storage_options)
    labels = read_labels_table(args.labels, storage_options=options, header=args.header, sep=args.sep)
    reference = None
    if args.reference is not None:
        from ..stages.reference import check_reference_store, import_reference, read_reference

        what = f"labels table {args.labels!r}"
        reference = read_reference(args.reference, labels.shape[0], what, options)
    with stage_store(args, mode="a") as store:
        if reference is not None:
            check_reference_store(store)  # before the labels are imported
        info = import_labels(store, args.labels, storage_options=options, labels=labels)
        if reference is not None:
            ref = import_reference(store, args.reference, labels=reference)
    state = " (up to date)" if info["skipped"] else ""
    print(f"import-labels: {info['n_clusterings']} clusterings{state}")
    if reference is not None:
        state = " (up to date)" if ref["skipped"] else ""
        print(f"import-labels: reference labels of {ref['classes']} classes{state}")
    return 0

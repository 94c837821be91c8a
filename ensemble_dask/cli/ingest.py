"""``ensemble-dask ingest DATA --store URL``: a table into the store's ``X`` (and ``y_true``)."""

from __future__ import annotations

import argparse

from ._options import csv_list, seed, sep_arg, stage_store, storage_options, store_args


def add_parser(sub, common):
    p = sub.add_parser("ingest", parents=[common], help="read a table into the store's X (and y_true)")
    p.add_argument("data", help="input URL (CSV[.gz], Parquet, zarr, npy, synthetic:kdd99?n=...)")
    store_args(p)
    p.add_argument("--data-storage-options", help="fsspec options of the input, as JSON")
    p.add_argument(
        "--format",
        choices=["csv", "parquet", "zarr", "npy"],
        help="the input's format (default: from its name)",
    )
    p.add_argument("--schema", choices=["kdd99"], help="a known table's column names and types (KDD Cup 99)")
    p.add_argument(
        "--label-column",
        help="the column of reference labels, kept apart from the features (a name, or a position in a "
        "table without header)",
    )
    p.add_argument(
        "--labels",
        metavar="FILE",
        help="a file of the reference labels instead of a column: one per row of the data, in its order "
        "(.npy, or a CSV or Parquet file of one column; a CSV of one line more starts with its name)",
    )
    p.add_argument(
        "--categorical", type=csv_list, default=[], help="comma-separated columns to one-hot encode"
    )
    p.add_argument("--drop", type=csv_list, default=[], help="comma-separated columns to leave out")
    p.add_argument(
        "--header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the CSV's first line holds column names (default: guessed from its first two lines)",
    )
    sep_arg(p)
    p.add_argument("--classes", type=csv_list, help="keep only the rows of these comma-separated labels")
    p.add_argument("--subset", type=int, help="keep a seeded random sample of this many rows")
    p.add_argument(
        "--standardize",
        action=argparse.BooleanOptionalAction,
        default=None,
        help=(
            "z-score each feature column over the kept rows (the default); --no-standardize keeps the values"
        ),
    )
    p.add_argument(
        "--impute", choices=["mean"], help="fill missing numbers with their column's mean (default: refused)"
    )
    p.add_argument("--seed", type=seed, default=0, help="the seed of --subset's sample")
    p.add_argument(
        "--overwrite", action="store_true", help="replace the store's data (its results computed from it go)"
    )
    p.set_defaults(run=run)


def run(args):
    from ..stages.ingest import ingest

    with stage_store(args, mode="a", new=True) as store:
        info = ingest(
            store,
            args.data,
            seed=args.seed,
            storage_options=storage_options(args.data_storage_options),
            overwrite=args.overwrite,
            format=args.format,
            schema=args.schema,
            label_column=args.label_column,
            labels=args.labels,
            categorical=args.categorical,
            drop=args.drop,
            header=args.header,
            sep=args.sep,
            classes=args.classes,
            subset=args.subset,
            standardize=args.standardize,
            impute=args.impute,
        )
    const = [str(c) for c in info.get("constant_columns") or []]
    note = f" (constant over the rows kept: {', '.join(const[:5])}{', ...' if len(const) > 5 else ''})"
    print(
        f"ingest: n={info['n']} d={info['d']}"
        + (note if const else "")
        + (" (up to date)" if info["skipped"] else "")
    )
    return 0

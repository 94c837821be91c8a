"""``ensemble-dask predict NEW --store URL --method NAME --out OUT``: label new rows with a result."""

from __future__ import annotations

import argparse

from .._validation import EnsembleDaskError
from ._options import cluster_args, dask_options, progress, stage_store, storage_options, store_args


def add_parser(sub, common):
    p = sub.add_parser(
        "predict",
        parents=[common],
        help="label new rows with a consensus result of the store (labels, memberships, uncertainty)",
    )
    p.add_argument("data", help="URL of the new rows (a table of the store's data set's columns)")
    store_args(p)
    p.add_argument("--method", required=True, help="the consensus result that labels them (bce, kcc, ...)")
    p.add_argument("--out", required=True, help="where the predictions go: NAME.parquet or NAME.zarr")
    p.add_argument("--data-storage-options", help="fsspec options of the new rows, as JSON")
    p.add_argument(
        "--header",
        action=argparse.BooleanOptionalAction,
        default=None,
        help="the CSV's first line holds column names (default: as ingest read the store's data if that was "
        "a CSV, else guessed)",
    )
    p.add_argument(
        "--sep",
        help="the CSV's field separator: one character, 'tab' or 'whitespace' (default: as ingest read the "
        "store's data if that was a CSV, else guessed)",
    )
    p.add_argument(
        "--unseen",
        choices=["error", "mean"],
        default="error",
        help="a value of a categorical column the store's data set never held: an error naming it (default), "
        "or placed at the column's mean, counted in a warning",
    )
    p.add_argument("--out-storage-options", help="fsspec options of --out, as JSON")
    p.add_argument("--overwrite", action="store_true", help="replace an --out that exists")
    cluster_args(p)
    p.set_defaults(run=run)


def _check_out(args):
    """``--out``: a .parquet file or a .zarr folder, neither the store nor inside it, new unless
    ``--overwrite``."""
    import fsspec

    out = args.out.rstrip("/")
    if not out.endswith((".parquet", ".zarr")):
        raise EnsembleDaskError(f"--out must name a .parquet file or a .zarr folder; got {args.out!r}")
    store = args.store.rstrip("/")
    if out == store or out.startswith(store + "/"):
        raise EnsembleDaskError(f"--out {args.out!r} is the run store or inside it: name another place")
    fs, path = fsspec.core.url_to_fs(out, **(storage_options(args.out_storage_options) or {}))
    if fs.exists(path) and not args.overwrite:
        raise EnsembleDaskError(f"--out {args.out!r} exists: remove it, or give --overwrite")


def run(args):
    import functools

    import numpy as np

    from .. import pipeline
    from ..runtime.clients import LazyClient, dask_client
    from ..stages.predict import base_centers, predict_rows, write_predictions

    _check_out(args)
    with stage_store(
        args
    ) as store:  # the base clusterings' centres are kept in the store: its lease, briefly
        base_centers(store)
    store = pipeline.open_store(args.store, storage_options(args.storage_options), mode="r")
    # the cluster starts when the first block is ready: a refused result or table starts none
    with LazyClient(functools.partial(dask_client, args.scheduler, **(dask_options(args) or {}))) as client:
        labels, memberships, uncertainty = predict_rows(
            store,
            args.method,
            args.data,
            client=client,
            storage_options=storage_options(args.data_storage_options),
            progress=progress(args),
            header=args.header,
            sep=args.sep,
            unseen=args.unseen,
        )
    write_predictions(args.out, labels, memberships, uncertainty, storage_options(args.out_storage_options))
    counts = np.bincount(labels, minlength=memberships.shape[1]).tolist()
    print(f"predict: {labels.size} rows by {args.method}, clusters {counts}, written to {args.out}")
    return 0

"""``ensemble-dask predict NEW --store URL --method NAME --out OUT``: label new rows with a result."""

from __future__ import annotations

from .._validation import EnsembleDaskError
from ._options import stage_store, storage_options, store_args


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
    p.add_argument("--out-storage-options", help="fsspec options of --out, as JSON")
    p.set_defaults(run=run)


def run(args):
    import numpy as np

    from ..stages.predict import predict_rows, write_predictions

    if not args.out.rstrip("/").endswith((".parquet", ".zarr")):
        raise EnsembleDaskError(f"--out must name a .parquet file or a .zarr folder; got {args.out!r}")
    with stage_store(args) as store:  # the base clusterings' centres are kept in the store
        parts = list(
            predict_rows(
                store, args.method, args.data, storage_options=storage_options(args.data_storage_options)
            )
        )
    labels = np.concatenate([p[1] for p in parts])
    memberships = np.concatenate([p[2] for p in parts])
    uncertainty = np.concatenate([p[3] for p in parts])
    write_predictions(args.out, labels, memberships, uncertainty, storage_options(args.out_storage_options))
    counts = np.bincount(labels, minlength=memberships.shape[1]).tolist()
    print(f"predict: {labels.size} rows by {args.method}, clusters {counts}, written to {args.out}")
    return 0

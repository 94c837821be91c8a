"""``ensemble-dask predict NEW --store URL --method NAME --out OUT``: label new rows with a result."""

from __future__ import annotations

import argparse
import logging

from .._validation import EnsembleDaskError
from ._options import cluster_args, dask_options, progress, stage_store, storage_options, store_args

logger = logging.getLogger(__name__)


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
    """``--out``: a .parquet file or a .zarr folder, new unless ``--overwrite``, and neither the store nor
    the new rows, inside them or holding them (however each is spelt: an --overwrite there deleted them)."""
    import fsspec

    from ..io.urls import is_object_store, location, nested

    out = args.out.rstrip("/")
    if not out.endswith((".parquet", ".zarr")):
        raise EnsembleDaskError(f"--out must name a .parquet file or a .zarr folder; got {args.out!r}")
    options = storage_options(args.out_storage_options)
    try:
        where = location(out, options)
        fs, path = fsspec.core.url_to_fs(out, **(options or {}))
        if is_object_store(fs):  # writing would create a bucket that does not exist (in the user's account)
            bucket = path.split("/", 1)[0]
            try:
                fs.info(bucket)  # (exists() says False for an endpoint that cannot be reached too)
            except FileNotFoundError:
                raise EnsembleDaskError(f"--out {args.out!r}: bucket {bucket!r} does not exist") from None
        exists = fs.exists(path)
    except EnsembleDaskError:
        raise
    except Exception as exc:  # an unknown protocol, an endpoint that cannot be reached, no credentials
        reason = f"{type(exc).__name__}: {exc}"
        raise EnsembleDaskError(f"--out {args.out!r} cannot be reached: {reason}") from None
    for name, url, opts in (
        ("the run store", args.store, storage_options(args.storage_options)),
        ("the new rows", args.data, storage_options(args.data_storage_options)),
    ):
        try:
            other = location(url.rstrip("/"), opts)
        except Exception:  # noqa: BLE001 - not resolved here: its own reader names what is wrong with it
            continue
        if nested(where, other):
            raise EnsembleDaskError(
                f"--out {args.out!r} is {name} ({url!r}), inside it or holds it: name another place"
            )
    if exists and not args.overwrite:
        raise EnsembleDaskError(f"--out {args.out!r} exists: remove it, or give --overwrite")


def run(args):
    import functools

    import numpy as np

    from .. import pipeline
    from ..io.lease import StoreBusyError
    from ..runtime.clients import LazyClient, dask_client
    from ..stages.predict import base_centers, centers_kept, predict_rows, write_predictions

    _check_out(args)
    store = pipeline.open_store(args.store, storage_options(args.storage_options), mode="r")
    if not centers_kept(store):  # the base clusterings' centres are kept in the store: its lease, briefly
        try:
            with stage_store(args) as held:
                base_centers(held)
        except StoreBusyError as exc:  # a workflow writes the store: the centres are computed, not kept
            logger.info("predict: %s; the base centres are computed here, not kept", exc)
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

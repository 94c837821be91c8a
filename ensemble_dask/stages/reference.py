"""Reference labels from a file of their own: ``ingest --labels`` (beside the data's table) and
``import-labels --reference`` (beside base labels brought without data, stage ``reference``).

Either way the file holds one label per row of the data, in its order: a ``.npy`` (1-d, or one column), a
CSV of one column (a line more than the data's rows: its first line is a header, the column's name, and is
left out) or a Parquet file of one column. The labels are kept as ``ingest`` keeps a label column: ``y_true``
(int32 codes), the class names (as text) in its ``classes`` attribute; they are never used to fit, only to
score the results.
"""

from __future__ import annotations

import hashlib
import json
import logging

import numpy as np

from .._validation import InputError
from ..io.readers import iter_table_chunks, load_npy
from ..io.store import RECORDS_DIR
from ..io.urls import _check_exists, infer_format

__all__ = ["REFERENCE", "check_reference_store", "drop_reference", "import_reference", "read_reference"]

logger = logging.getLogger(__name__)

#: the stage that writes a store's ``y_true`` from a file when the store holds no data set (import-labels)
REFERENCE = "reference"
#: the scores of a result against ``y_true`` (:func:`~ensemble_dask.metrics.partition_scores`)
_SCORES = ("H", "ARI", "NMI")


def read_reference(url, n, data, storage_options=None):
    """The labels of the file at ``url`` as text (a pandas Series, stripped, a trailing ``.`` left out as
    ``ingest`` reads a label column), checked to be one for each of the ``n`` rows of ``data`` (what the
    messages call the data: ``"data 'X.npy'"``)."""
    import pandas as pd

    fmt = infer_format(str(url))
    if fmt == "npy":
        fs, path = _check_exists(url, storage_options)
        try:
            with fs.open(path, "rb") as fh:
                values = load_npy(fh, allow_pickle=False)
        except ValueError as exc:
            raise InputError(f"{url}: cannot read it as a NumPy .npy file of labels ({exc})") from None
        if values.ndim == 2 and values.shape[1] == 1:
            values = values[:, 0]
        if values.ndim != 1:
            raise InputError(
                f"labels file {url!r} holds an array of shape {values.shape}; reference labels are one per "
                "row of the data: a 1-d array, or one column"
            )
        labels = pd.Series(values)
    elif fmt in ("csv", "parquet"):
        frames = [
            f
            for _, f in iter_table_chunks(url, format=fmt, storage_options=storage_options, text_columns=[0])
        ]
        frame = pd.concat(frames, ignore_index=True) if frames else pd.DataFrame()
        if frame.shape[1] != 1:
            raise InputError(
                f"labels file {url!r} has {frame.shape[1]} columns; a file of reference labels holds one"
            )
        labels = frame.iloc[:, 0]
        if fmt == "csv" and len(labels) == n + 1:  # a line more than the data's rows: the column's name
            labels = labels.iloc[1:].reset_index(drop=True)
    else:
        raise InputError(f"labels file {url!r}: reference labels are read from a .npy, CSV or Parquet file")
    if len(labels) != n:
        raise InputError(
            f"labels file {url!r} has {len(labels)} rows, but {data} has {n}: a file of reference labels "
            "holds one label per row of the data, in its order"
        )
    missing = labels.isna().to_numpy()
    if missing.any():
        i = int(np.flatnonzero(missing)[0])
        raise InputError(f"labels file {url!r}: no label at row {i} (a missing value)")
    return labels.astype(str).str.strip().str.removesuffix(".")


def check_reference_store(store):
    """Refuse a store that holds a data set: its reference labels are the data's (ingest's)."""
    if "X" in store or store.record("ingest") is not None:
        raise InputError(
            f"run store {store.url!r} holds a data set: its reference labels come with it (ingest "
            "--label-column NAME, or --labels FILE); import-labels --reference is for base labels brought "
            "without data"
        )


def import_reference(store, url, *, labels=None, storage_options=None):
    """Write ``y_true`` of ``store`` (base labels imported without data) from the file at ``url`` (stage
    :data:`REFERENCE`; ``labels``: the file read already by :func:`read_reference`). Results fitted before
    are scored against it when the report or their consensus command next reads them.

    Returns ``{"n", "classes", "skipped"}``.
    """
    check_reference_store(store)
    n = store.n
    if n is None:
        raise InputError(f"run store {store.url!r} holds no base labels: import them first (import-labels)")
    if labels is None:
        labels = read_reference(url, n, f"run store {store.url!r}", storage_options)
    store.check_n(len(labels), f"labels file {url!r}")
    classes, y = np.unique(labels.to_numpy(dtype=object).astype(str), return_inverse=True)
    classes = classes.tolist()
    digest = hashlib.sha256(json.dumps(classes).encode() + y.astype(np.int32).tobytes()).hexdigest()[:32]
    params = {"reference": digest, "n": n}
    if store.is_complete(REFERENCE, params, []):
        logger.info("import-labels: reference labels up to date, skipped")
        return {"n": n, "classes": len(classes), "skipped": True}
    with store.stage(REFERENCE, params, [], meta={"url": str(url)}, writes=("y_true",)) as record:
        if "y_true" in store:
            del store.group["y_true"]
        rows = max(1, min(n, 2**22))
        arr = store.group.create_array("y_true", shape=(n,), chunks=(rows,), dtype="int32")
        arr[:] = y.astype(np.int32)
        arr.attrs["classes"] = classes
        record["output"] = digest
    unscore_results(store)
    return {"n": n, "classes": len(classes), "skipped": False}


def unscore_results(store):
    """Leave out the scores the consensus results hold (against a ``y_true`` replaced since): they are
    scored again against the store's ``y_true`` when next read
    (:func:`~ensemble_dask.stages.consensus.current_results`)."""
    if "consensus" not in store:
        return
    for name in store["consensus"].group_keys():
        group = store[f"consensus/{name}"]
        metrics = group.attrs.get("metrics")
        if isinstance(metrics, dict) and any(k in metrics for k in _SCORES):
            group.attrs["metrics"] = {k: v for k, v in metrics.items() if k not in _SCORES}


def drop_reference(store):
    """Forget the reference labels brought with import-labels, which ``ingest``'s own replace (its
    ``y_true``); the results are scored against those."""
    if store.record(REFERENCE) is not None:
        store.remove(f"{RECORDS_DIR}/{REFERENCE}.json")
        unscore_results(store)

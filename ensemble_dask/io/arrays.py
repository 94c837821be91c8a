"""A user's ``X`` (an array, a data frame, a Dask one, or a URL) as a URL that ``ingest`` reads: what
:class:`~ensemble_dask.ConsensusClustering` writes once before a fit or a prediction, with scikit-learn's
checks and messages."""

from __future__ import annotations

import numpy as np

from .._validation import InputError, shown

__all__ = ["data_url", "feature_names"]


def feature_names(X):
    """A data frame's column names when they are all strings (scikit-learn's ``feature_names_in_``), else
    None."""
    columns = getattr(X, "columns", None)
    if columns is None or not all(isinstance(c, str) for c in columns):
        return None
    return np.asarray(list(columns), dtype=object)


_WANTED = "X must be a 2-d numeric array, a data frame or a URL"
_NAME = "ConsensusClustering"


def data_url(X, folder, min_samples=2, names=None):
    """``(url, shape)``: a URL that ``ingest`` reads ``X`` from, and its shape (None for a URL): ``X`` itself
    when it is a URL or path; an array or a numeric data frame, written once under ``folder`` (``.npy``, its
    columns by position, or zarr block by block for Dask; with ``names``, Parquet with those column names).
    """
    if isinstance(X, str):
        return X, None
    if hasattr(X, "to_dask_array") and names is not None and set(names) <= set(X.columns):  # by name: Parquet
        return _dask_frame_parquet(X, f"{folder}/X.parquet", names)
    if hasattr(X, "to_dask_array"):  # a Dask DataFrame: its numeric values, block by block
        X = X.to_dask_array(lengths=True)
    if hasattr(X, "dask") and hasattr(X, "to_zarr"):  # a Dask array
        if X.ndim != 2:
            raise InputError(f"{_WANTED}; got {shown(X)}")
        url = f"{folder}/X.zarr"
        if len(set(X.chunks[0][:-1])) > 1 or X.chunks[0][-1:] > X.chunks[0][:1]:  # zarr wants even row blocks
            X = X.rechunk({0: max(X.chunks[0]), 1: -1})
        # on this process's threads: under a user's distributed Client the workers would write into their
        # own memory (an empty zarr here, read back as zeros)
        X.to_zarr(url, compute=False).compute(scheduler="threads")
        return url, tuple(int(d) for d in X.shape)
    import fsspec

    arr = _numeric(X, min_samples)  # a pandas DataFrame too: its values
    if names is not None and len(names) == arr.shape[1]:
        import pandas as pd

        url = f"{folder}/X.parquet"
        with fsspec.open(url, "wb") as fh:
            pd.DataFrame(arr, columns=[str(c) for c in names]).to_parquet(fh, index=False)
        return url, arr.shape
    url = f"{folder}/X.npy"
    with fsspec.open(url, "wb") as fh:
        np.save(fh, np.ascontiguousarray(arr))
    return url, arr.shape


def _first_missing(X):
    """`` (first at row i, column j)`` of a NaN or infinity in ``X``, or ``""``."""
    try:
        bad = np.argwhere(~np.isfinite(np.asarray(X, dtype=np.float64)))
    except (TypeError, ValueError):
        return ""
    if bad.ndim != 2 or bad.shape[1] != 2 or not len(bad):
        return ""
    i, j = (int(v) for v in bad[0])
    column = getattr(X, "columns", None)
    return f" (first at row {i}, column {j if column is None else repr(column[j])})"


def _numeric(X, min_samples):
    """``X``'s numeric values as scikit-learn checks them, with its messages (sparse, complex, few rows)."""
    from sklearn.utils.validation import check_array

    try:
        arr = check_array(X, dtype="numeric", ensure_min_samples=min_samples, estimator=_NAME)
    except ValueError as exc:  # a TypeError (an object that is no number) stays one, as scikit-learn's
        raise InputError(f"{_WANTED}: {exc}{_first_missing(X)}") from exc
    if arr.dtype.kind not in "biuf":  # scikit-learn keeps a categorical column's values as objects
        kinds = getattr(X, "dtypes", None)
        named = [] if kinds is None else [str(c) for c, t in kinds.items() if t.kind not in "biuf"][:5]
        raise InputError(
            f"{_WANTED}: columns {named} are not numbers (categorical); give their codes, or give X by its "
            "URL and name them in data_params={'categorical': [...]}"
            if named
            else f"{_WANTED}: its values are not numbers (dtype {arr.dtype})"
        )
    return arr


def _dask_frame_parquet(X, url, names):
    """``(url, shape)``: the Dask DataFrame ``X``'s columns ``names`` written to one Parquet file at ``url``,
    a row group per partition (computed one at a time on this process's threads, as a Dask array is
    written; numeric as :func:`_numeric` checks them)."""
    import fsspec
    import pandas as pd
    import pyarrow as pa
    import pyarrow.parquet as pq

    rows, writer = 0, None
    with fsspec.open(url, "wb") as fh:
        try:
            for part in X[list(names)].to_delayed():
                frame = part.compute(scheduler="threads")
                if len(frame):
                    frame = pd.DataFrame(_numeric(frame, 1).astype(np.float64), columns=list(names))
                    table = pa.Table.from_pandas(frame, preserve_index=False)  # (one schema: float64)
                    writer = writer or pq.ParquetWriter(fh, table.schema)
                    writer.write_table(table)
                    rows += len(frame)
        finally:
            if writer is not None:
                writer.close()
    if writer is None:
        raise InputError(f"{_WANTED}: the Dask DataFrame has no rows")
    return url, (rows, len(names))

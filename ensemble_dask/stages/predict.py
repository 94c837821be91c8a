"""Label new rows with a run store's fitted ensemble (``ensemble-dask predict``).

A new row goes through the steps ``ingest`` applied to the store's data (the same columns, categorical codes,
centring and scaling: :func:`new_rows`), then every base clustering labels it by its nearest cluster centre
(:mod:`ensemble_dask.partitions.models`; the centres are computed once from ``X`` and ``labels`` and kept in
the store, :func:`base_centers`), and the consensus result labels its base labels: BCE by its E-step with the
fitted ``alpha`` and ``beta`` (GBCE with its Gaussians, on the row's features), MM by its mixture, KCC by the
nearest consensus centroid, ``graph`` by its base clusters' votes, PCC and PPC by the new row's own problem
against partners among the fitted rows, their memberships fixed (:mod:`ensemble_dask.consensus.pcc._predict`),
and GKCC and the baselines, whose results are partitions, by KCC's rule on their partition
(:meth:`~ensemble_dask.consensus.KCC.from_partition`).
A new row has a label in every base clustering (the base clusterings of subsamples left about half the fitted
rows out of each).
"""

from __future__ import annotations

import logging

import numpy as np

from .._validation import InputError
from ..io.store import stage_hash
from ..io.urls import is_object_store
from ..partitions.models import ClusterCenters, nearest_centers

__all__ = ["MODELS", "base_centers", "new_rows", "predict_rows", "write_predictions"]

logger = logging.getLogger(__name__)

#: where the base clusterings' centres are kept (``_cache/base_centers/<key of X and labels>``)
CENTERS_CACHE = "_cache/base_centers"
#: the consensus methods that label new rows by a model of their own; the others (GKCC and the baselines,
#: whose results are partitions) by the nearest of their clusters' centroids in the base labels' space
MODELS = {
    "bce": ("alpha", "beta"),
    "gbce": ("alpha", "beta", "means", "variances"),
    "mm": ("weights", "beta"),
    "kcc": ("centers",),
    "graph": ("tables",),
    "pcc": ("Y",),
    "ppc": ("Y",),
}  # each with the arrays of its result that it reads


def _centers_path(store):
    try:
        key = stage_hash({"version": 1}, [store.stage_hash("ingest"), store.stage_hash("generate")])
    except InputError as exc:
        raise InputError(
            f"predict needs a store with X and base labels (ingest, then generate): {exc}"
        ) from None
    return f"{CENTERS_CACHE}/{key}"


def centers_kept(store):
    """Whether ``store`` keeps the centres of its base clusterings (:func:`base_centers` reads them)."""
    path = _centers_path(store)
    return path in store and bool(store[path].attrs.get("complete"))


def base_centers(store, block_rows=65536):
    """``(N, k_max, d)`` centres of every base clustering's clusters (NaN: no such cluster), from the store's
    ``X`` and ``labels``; computed once and kept in the store (unless it is open read-only), keyed on
    both."""
    path = _centers_path(store)
    if path in store and store[path].attrs.get("complete"):
        return np.asarray(store[path][:])
    X, labels = store["X"], store["labels"]
    n, N = labels.shape
    acc = ClusterCenters(N, X.shape[1])
    for start in range(0, n, block_rows):
        acc.add(X[start : start + block_rows], labels[start : start + block_rows])
    centers = acc.centers
    if store.mode != "r":
        arr = store.group.create_array(path, data=centers, overwrite=True)
        arr.attrs["complete"] = True  # set last: a half-written array is never read back
    return centers


def new_rows(store, url, *, storage_options=None, chunk_rows=50_000, header=None, sep=None, unseen="error"):
    """The rows of the table at ``url`` in the store's ``X`` space, block by block (float64 arrays): the
    ingest's columns by name (only those are read), its categorical codes, its imputation, centring and
    scaling.

    A CSV is read with the ``header`` and ``sep`` given (as :func:`~ensemble_dask.stages.ingest.ingest_params`
    takes them); not given, with those ``ingest`` read the store's data with, when that was a CSV (so a first
    line of column numbers is read as it was: a header, or a row); else guessed as ``ingest`` guesses them.

    A value of a categorical column that the store's data set never held is an error naming it
    (``unseen="error"``), or placed at that column's mean over the data set, as ``impute: mean`` places a
    missing number (``unseen="mean"``; a warning counts them by column). ``"mean"`` needs the data set's
    column means, so it is refused for a store ingested without standardising."""
    from ..io.readers import csv_has_header, detect_separator, iter_table_chunks
    from .ingest import _Reader, ingest_params, positional_csv, positional_width

    rec = store.record("ingest") or {}
    if not rec.get("complete"):
        raise InputError(f"run store {store.url!r} holds no ingested data set to label new rows like")
    fitted = rec["params"]
    if unseen not in ("error", "mean"):
        raise InputError(f"The 'unseen' parameter must be 'error' or 'mean'; got {unseen!r}")
    if unseen == "mean" and not fitted.get("standardize", True):
        raise InputError(
            f"unseen='mean' needs the column means of the store's data set, which was ingested without being "
            f"standardised (run store {store.url!r}): they were not kept"
        )
    attrs = store["X"].attrs.asdict()
    names = list(attrs["feature_names"])
    center, scale = np.asarray(attrs["center"]), np.asarray(attrs["scale"])
    opts = {k: fitted.get(k) for k in ("columns", "categorical", "drop", "impute")}
    p = ingest_params(url, **opts, header=header, sep=sep, chunk_rows=chunk_rows)
    if p["format"] == "csv":
        if fitted.get("format") == "csv":  # as ingest read the store's data, unless said otherwise
            p["sep"] = p["sep"] or fitted.get("sep")
            if p["header"] is None and fitted.get("header") is not None:
                p["header"] = bool(fitted["header"])
        if p["sep"] is None:
            p["sep"] = detect_separator(p["url"], storage_options)
        if p["header"] is None:
            p["header"] = p["columns"] is None and csv_has_header(p["url"], storage_options, p["sep"])
    positional = positional_csv(p)
    width = (attrs.get("summary") or {}).get("positional_width")
    # the store's columns are places: new rows of more columns would be shifted (only a table whose columns
    # are places is read for its width: a Parquet file's first block is a whole row group)
    if width is not None and (p["format"] in ("npy", "zarr") or positional):
        first = next(
            iter_table_chunks(
                p["url"], format=p["format"], storage_options=storage_options, chunk_rows=1,
                columns=p["columns"], header=p["header"], sep=p["sep"] or ",", check_fields=False,
            ),
            None,
        )  # fmt: skip
        got = None if first is None else positional_width(p, first[1])
        if got is not None and got > width:  # (fewer may lack the label or dropped columns at the end)
            raise InputError(
                f"{url}: {got} columns, but the store's data set was read by their places from a table of "
                f"{width}: new rows need its columns in the same places, and no more"
            )

    def column(name):  # a headerless CSV's columns are 0, 1, ...: the store keeps their names as text
        return int(name) if positional and str(name).isdigit() else name

    reader = _Reader(p, storage_options)
    reader.nan_remedy = (
        "the store's data was ingested without impute: mean, so new rows are read without it too: clean "
        "them, or ingest the data with --impute mean and fit again"
    )
    reader.keep = None
    reader.vocab = {column(c): list(v) for c, v in (attrs.get("vocabularies") or {}).items()}
    for offset, frame in reader.chunks(usecols=[column(nm) for nm in names]):
        missing = [nm for nm in names if column(nm) not in frame.columns]
        if missing:
            raise InputError(
                f"{url}: no column(s) {missing[:5]} of the store's data set; its columns: "
                f"{list(frame.columns)[:20]}"
            )
        frame = frame[[column(nm) for nm in names]]
        block = reader.features(offset, frame, unseen=unseen)
        # NaN only where ingest's imputation (a missing number) or unseen="mean" (a category the data set
        # never held) puts the column's mean: anything else non-finite was refused in reader.features
        if np.isnan(block).any():
            if fitted.get("impute") == "mean" and not fitted.get("standardize", True):
                raise InputError(
                    f"{url}: missing values, and the store's data was imputed without being standardised: "
                    "its column means were not kept"
                )
            block = np.where(np.isnan(block), center, block)
        if len(block):  # (a CSV of a header alone reads as one empty block: no rows to label)
            yield offset, (block - center) / scale
    if reader.unseen_counts:
        logger.warning(
            "predict: values of categorical columns that the store's data set never held, placed at the "
            "column's mean: %s",
            ", ".join(f"{c!r} {k} row(s)" for c, k in reader.unseen_counts.items()),
        )


def _consensus_model(store, name, labels):
    """The fitted consensus of result ``name``, rebuilt from what the store keeps: a function of a block's
    base labels and its rows in ``X`` space that returns their memberships."""
    from ..consensus import BCE, GBCE, KCC, MM
    from ..consensus._common.encoding import column_categories
    from .consensus import current_results

    path = f"consensus/{name}"
    if path not in store:
        raise InputError(f"run store {store.url!r} holds no consensus result {name!r}")
    if name not in current_results(store):
        raise InputError(
            f"consensus result {name!r} is not up to date with the store's base clusterings (or is not "
            f"complete): run its consensus again (ensemble-dask consensus {name} --store {store.url})"
        )
    method = store[path].attrs.get("method")
    params = store[path].attrs.get("params") or {}
    if method == "auto":  # the candidate it kept labels the new rows
        from .consensus import resolve_method

        method, params = resolve_method(store[path].attrs["chosen"], params)
    if method not in MODELS:  # the others label a new row by the nearest centroid of their partition
        return _LabelModel(KCC.from_partition(labels, np.asarray(store[f"{path}/labels"][:])))
    absent = [key for key in MODELS[method] if f"{path}/{key}" not in store]
    if absent:
        raise InputError(
            f"consensus result {name!r} was computed before its model ({', '.join(absent)}) was kept: run "
            f"its consensus again (ensemble-dask consensus {name} --store {store.url}, or the workflow)"
        )
    if method in ("pcc", "ppc"):
        return _PairModel(store, path, method, labels, params)
    cats = column_categories(labels)

    def read(key):
        return np.asarray(store[f"{path}/{key}"][:])

    def blocks(key):
        offsets = store[f"{path}/{key}"].attrs["offsets"]
        whole = read(key)
        return [whole[:, a:b] for a, b in zip(offsets[:-1], offsets[1:], strict=True)]

    if method == "bce":
        return _LabelModel(BCE.from_parameters(read("alpha"), blocks("beta"), cats))
    if method == "gbce":
        weights = {k: params[k] for k in ("label_weight", "feature_weight") if params.get(k) is not None}
        model = GBCE.from_parameters(
            read("alpha"), blocks("beta"), cats, means=read("means"), variances=read("variances"), **weights
        )
        return _LabelModel(model, features=True)
    if method == "mm":
        return _LabelModel(MM.from_parameters(read("weights"), blocks("beta"), cats))
    if method == "graph":
        from ..consensus import GraphConsensus

        offsets = store[f"{path}/tables"].attrs["offsets"]
        return _LabelModel(GraphConsensus.from_parameters(read("tables"), offsets))
    return _LabelModel(KCC.from_parameters(blocks("centers"), cats))


class _LabelModel:
    """A fitted estimator's ``transform`` of a block's base labels (and its rows, for GBCE)."""

    def __init__(self, estimator, features=False):
        self.estimator, self.features = estimator, features

    def __call__(self, base, X):
        return self.estimator.transform(base, X) if self.features else self.estimator.transform(base)


class _PairModel:
    """PCC or PPC on new rows: each row's own problem against fitted partners, their memberships fixed."""

    def __init__(self, store, path, method, labels, params):
        from ..consensus.pcc import DIVERGENCES
        from ..consensus.pcc import _kernels as kern

        if method == "ppc":
            self.code, self.closed_form, self.diag = kern.L2, True, 1.0  # PPC's (pcc._pcc)
        else:
            (self.code, self.closed_form), self.diag = DIVERGENCES[params.get("divergence", "kl")], 0.0
        self.Y = np.asarray(store[f"{path}/Y"][:], dtype=np.float64)
        self.labels = labels
        self.order = np.argsort(labels, axis=0, kind="stable").astype(np.int32)  # rows by cluster, per column
        self.seed = int(params.get("random_state") or 0)

    def __call__(self, base, X):
        from ..consensus.pcc._predict import new_row_memberships

        return new_row_memberships(
            self.Y, self.labels, base, code=self.code, closed_form=self.closed_form, diag=self.diag,
            seed=self.seed, order=self.order,
        )  # fmt: skip  # a row's partners are drawn from the seed and its base labels: any block, any order


def label_block(model, centers, block):
    """``(labels, memberships, uncertainty)`` of a block of new rows (in ``X`` space): each base clustering's
    nearest centre, then the consensus ``model``."""
    from ..consensus._common.base import normalized_entropy

    Y = model(nearest_centers(block, centers), block)
    return (
        np.argmax(Y, axis=1).astype(np.int32),
        Y.astype(np.float32),
        normalized_entropy(Y).astype(np.float32),
    )


def predict_rows(
    store,
    name,
    url,
    *,
    client=None,
    storage_options=None,
    chunk_rows=50_000,
    progress=False,
    header=None,
    sep=None,
    unseen="error",
):
    """``(labels, memberships, uncertainty)`` of the rows of the table at ``url`` by the store's consensus
    result ``name`` (a CSV's ``header`` and ``sep``, and a category the data set never held (``unseen``): as
    :func:`new_rows` reads them).

    This process reads the table block by block (``chunk_rows`` rows) as ``ingest`` read the store's data, and
    labels each block (:func:`label_block`) in this process, or, with a ``client``, as a task of its Dask
    cluster: the model and the base clusterings' centres are sent to every worker once, then a few blocks at a
    time (the workers never read the table or the store). The result does not depend on where the blocks run.
    """
    # predict reads the store without its lease (a command may write it meanwhile): what it read is checked
    # to be one state of the store, the stage records the same before and after
    records = store.records()
    labels = np.asarray(store["labels"][:])
    model = _consensus_model(store, name, labels)
    centers = base_centers(store)  # kept in the store when it may be written
    del labels
    blocks = new_rows(
        store,
        url,
        storage_options=storage_options,
        chunk_rows=chunk_rows,
        header=header,
        sep=sep,
        unseen=unseen,
    )
    if client is None:
        parts = [label_block(model, centers, block) for block in _counted(blocks, progress)]
    else:
        parts = _on_cluster(client, model, centers, _counted(blocks, progress))
    if not parts:
        raise InputError(f"{url}: no rows to label")
    if store.records() != records:
        raise InputError(
            f"run store {store.url!r} changed while predict read it (another command wrote a stage): run "
            "predict again"
        )
    return tuple(np.concatenate(arrays) for arrays in zip(*parts, strict=True))


def _counted(blocks, progress):
    """The blocks, with a bar of the rows read (on stderr; none unless ``progress``)."""
    from tqdm.auto import tqdm

    with tqdm(desc="predict", unit=" rows", disable=not progress, unit_scale=True) as bar:
        for _, block in blocks:
            yield block
            bar.update(block.shape[0])


def _on_cluster(client, model, centers, blocks):
    """:func:`label_block` of each block as a task of ``client``'s cluster, at most two per worker waiting."""
    from collections import deque

    from ..runtime.clients import INTERRUPTED

    workers = max(1, len(client.scheduler_info(n_workers=-1).get("workers", {})))
    model_f, centers_f = client.scatter([model, centers], broadcast=True, hash=False)
    pending, parts = deque(), []
    try:
        for block in blocks:
            # sent to a worker directly, not inside the task through the scheduler
            [block_f] = client.scatter([block], hash=False)
            pending.append(client.submit(label_block, model_f, centers_f, block_f, pure=False))
            while len(pending) > 2 * workers:
                parts.append(pending.popleft().result())
        while pending:
            parts.append(pending.popleft().result())
    except BaseException:
        if not INTERRUPTED.is_set():
            client.cancel(list(pending))
        raise
    return parts


def write_predictions(url, labels, memberships, uncertainty, storage_options=None):
    """Write predictions to ``url``: a Parquet file (columns ``label``, ``uncertainty``, ``m0`` ...
    ``m{K-1}``) or a zarr group (arrays ``labels``, ``memberships``, ``uncertainty``)."""
    import fsspec

    try:
        _write(url, labels, memberships, uncertainty, storage_options, fsspec)
    except InputError:
        raise
    except Exception as exc:  # noqa: BLE001 - a store's client errors are no OSError: one line naming --out
        raise InputError(f"cannot write the predictions to {url!r}: {exc}") from exc


def _write(url, labels, memberships, uncertainty, storage_options, fsspec):
    if url.rstrip("/").endswith(".zarr"):
        import zarr

        group = zarr.open_group(url, mode="w", storage_options=storage_options)
        group.create_array("labels", data=np.asarray(labels, dtype=np.int32))
        group.create_array("memberships", data=np.asarray(memberships, dtype=np.float32))
        group.create_array("uncertainty", data=np.asarray(uncertainty, dtype=np.float32))
        return
    import pandas as pd

    frame = pd.DataFrame({"label": np.asarray(labels, dtype=np.int32), "uncertainty": uncertainty})
    for k in range(memberships.shape[1]):
        frame[f"m{k}"] = memberships[:, k]
    fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
    if not is_object_store(fs):  # a new folder is made; never a bucket (a mistyped one is an error)
        fs.makedirs(fs._parent(path), exist_ok=True)
    with fs.open(path, "wb") as fh:
        frame.to_parquet(fh, index=False)

"""The ``generate`` stage: N base clusterings as a Dask graph, written to ``labels``.

One task per column chunk of ``labels`` (a few clusterings). A task receives only small arguments
(the store URL, its specs); it reads each clustering's subsample rows of ``X`` from the store,
clusters them with the in-memory function of :mod:`ensemble_dask.partitions.clusterers`, and writes its
columns of ``labels`` itself. ``labels`` is chunked ``(rows, columns)`` along the task's columns
(:func:`label_chunks`), so no two tasks ever write the same chunk, and readers by rows read a
handful of chunks per row block. Only the per-clustering metadata (with each column's hash)
travels back to the client."""

from __future__ import annotations

import hashlib
import json
import logging
import time

import numpy as np

from .._validation import InputError, check_int, check_labels_matrix
from ..io.readers import check_sep, csv_has_header, detect_separator, iter_table_chunks
from ..io.store import CONTENT_CHECKS, RunStore
from ..io.urls import infer_format, strip_file_scheme
from ..partitions.clusterers import SQRT_ROWS, plan_ensemble, resolve_k_max, run_clustering, subsample_of

__all__ = [
    "generate",
    "generate_params",
    "default_k_range",
    "import_labels",
    "read_labels_table",
    "base_partition_scores",
    "label_chunks",
    "LABEL_ROW_CHUNK",
]

logger = logging.getLogger(__name__)

# The labels layout, chosen for its readers: coassoc and BCE read row blocks of every column,
# reports and updates read columns. Chunks of 131072 rows x up to 16 columns (at most 8 MiB
# of int32) serve both; each generate task computes the clusterings of one column chunk, so no
# two tasks ever write the same chunk.
LABEL_ROW_CHUNK = 1 << 17
LABEL_COL_CHUNK = 16


def label_chunks(n, n_clusterings):
    """Chunk shape of an ``n x n_clusterings`` labels array: whole row blocks, a few columns each.

    About 8 column chunks (of at most :data:`LABEL_COL_CHUNK` columns), so that the generate stage
    has that many tasks to spread over the workers.
    """
    cols = max(1, min(LABEL_COL_CHUNK, n_clusterings // 8))
    return (max(1, min(n, LABEL_ROW_CHUNK)), cols)


def column_hash(col):
    """SHA-256 (hex) of one labels column as int32: the unit of the labels' content identity."""
    return hashlib.sha256(np.ascontiguousarray(col, dtype=np.int32).tobytes()).hexdigest()


def column_hashes(labels, upto=None):
    """:func:`column_hash` of the first ``upto`` (None: all) columns of the zarr array ``labels``, read a
    chunk of columns at a time."""
    upto = labels.shape[1] if upto is None else upto
    step = max(1, int(labels.chunks[1]))
    hashes = []
    for c0 in range(0, upto, step):
        block = np.asarray(labels[:, c0 : min(c0 + step, upto)])
        hashes += [column_hash(block[:, j]) for j in range(block.shape[1])]
    return hashes


def labels_identity(n, hashes):
    """The content identity of a labels matrix from its columns' hashes (generated or imported)."""
    blob = json.dumps([int(n), list(hashes)])
    return hashlib.sha256(blob.encode()).hexdigest()[:32]


def _labels_content(store, record):
    """``verify``'s check of ``labels`` by their content: their columns' hashes against the identity the
    generate (or import-labels) record holds (a writer that lost its lease may have overwritten chunks)."""
    if "labels" not in store or not record.get("output"):
        return []
    labels = store["labels"]
    if labels_identity(labels.shape[0], column_hashes(labels)) != record["output"]:
        return ["labels hold other columns than the record's (written by another run since?)"]
    return []


CONTENT_CHECKS["generate"] = _labels_content


# Each worker process keeps the last X it read (keyed by store URL and the ingest stage's hash, so
# a changed X is never served stale) when it is small enough: the clusterings a worker runs then
# share one read and decompression of X instead of one each. Larger X is read per task.
_X_CACHE: dict = {}
_X_CACHE_MAX_BYTES = 1 << 30


def _rows_of_x(store, ingest_hash, idx):
    x_arr = store["X"]
    full = len(idx) == x_arr.shape[0]
    if x_arr.nbytes > _X_CACHE_MAX_BYTES:
        return x_arr[:] if full else x_arr.oindex[idx, :]
    key = (store.url, ingest_hash)
    x = _X_CACHE.get(key)
    if x is None:
        x = x_arr[:]
        _X_CACHE.clear()
        _X_CACHE[key] = x
    return x if full else x[idx]


def _drop_x_cache():
    _X_CACHE.clear()


def default_k_range(n_clusters=None):
    """The default ``(k_min, k_max)`` of the base clusterings for a consensus of ``n_clusters``.

    ``[2, 10]`` (the PCC paper's KDD ensemble) when no K is known or K <= 5; for larger K,
    ``[K // 2, 2 K]``: consensus by co-association can split only what some base partitions split,
    and pair methods merge clusters that an ensemble of coarser partitions keeps together
    (the benchmarks page, "The range of k and the pair methods").
    """
    if n_clusters is None:
        return 2, 10
    k = check_int(n_clusters, "n_clusters", min_value=2)
    return max(2, k // 2), max(10, 2 * k)


def generate_params(
    n_clusterings=100,
    *,
    ensemble="type1",
    k_min=None,
    k_max=None,
    rate=1.0,
    algorithms=None,
    seed=0,
    n_clusters=None,
    fine=False,
    extend=None,
    max_rows=None,
):
    """The ``generate`` stage's parameters, validated (see
    :func:`~ensemble_dask.partitions.clusterers.plan_ensemble`).

    ``n_clusters`` (the largest K the consensus will be asked for) and ``fine`` only set the defaults of
    ``k_min``, ``k_max`` and ``extend``; they are not themselves parameters of the stage. ``fine``: the
    ensemble of a consensus on many small clusters (the ``graph`` method): k in
    ``[K, floor(sqrt(min(n, 20000)))]``, every row labelled (``extend``) and subsamples of at most 20,000 rows
    (``max_rows``); else :func:`default_k_range`, ``extend`` false and no ``max_rows``. ``extend`` is in the
    record only when true, ``max_rows`` only when set (a record of before them stays up to date).
    """
    if not isinstance(fine, bool | np.bool_):
        raise InputError(f"The 'fine' parameter takes true or false; got {fine!r}")
    if fine and n_clusters is not None:
        lo, hi = check_int(n_clusters, "n_clusters", min_value=2), "sqrt"
    else:
        lo, hi = default_k_range(n_clusters)
    extend = bool(fine) if extend is None else extend
    if not isinstance(extend, bool | np.bool_):
        raise InputError(f"The 'extend' parameter takes true or false; got {extend!r}")
    if max_rows is None and fine:
        max_rows = SQRT_ROWS
    if max_rows is not None:
        max_rows = check_int(max_rows, "max_rows", min_value=2)
    return dict(
        n_clusterings=check_int(n_clusterings, "n_clusterings", min_value=1),
        ensemble=ensemble,
        k_min=lo if k_min is None else k_min,
        k_max=hi if k_max is None else k_max,
        rate=rate,
        algorithms=None if algorithms is None else list(algorithms),
        seed=int(seed),
        **({"extend": True} if extend else {}),
        **({"max_rows": max_rows} if max_rows is not None else {}),
    )


def _cluster_task(store_url, storage_options, ingest_hash, specs):
    """Worker side: run the clusterings ``specs`` (one chunk of columns), write their columns.

    Each clustering reads its subsample rows of X; the columns are written together, so this task
    is the only writer of their chunks.
    """
    store = RunStore(store_url, storage_options, mode="r+")
    labels = store["labels"]
    n = labels.shape[0]
    # int16 while the clusters' ids fit (half the memory of the task's n x columns block)
    narrow = max(int(spec["k"]) for spec in specs) < np.iinfo(np.int16).max
    block = np.full((n, len(specs)), -1, dtype=np.int16 if narrow else np.int32)
    meta = []
    for j, spec in enumerate(specs):
        idx = subsample_of(spec, n)
        t0 = time.perf_counter()
        # a subsample's rows are a fresh copy, which k-means may centre in place; all of X is the cache
        x_sub = _rows_of_x(store, ingest_hash, idx)
        lab = run_clustering(x_sub, spec, overwrite_x=len(idx) < n)
        if spec.get("extend") and len(idx) < n:
            _label_by_nearest_centre(store, ingest_hash, x_sub, lab, block[:, j])
        block[idx, j] = lab
        meta.append(
            {
                **spec,
                "n_clusters_found": int(lab.max()) + 1,
                "seconds": round(time.perf_counter() - t0, 4),
                "sha256": column_hash(block[:, j]),
            }
        )
    first = specs[0]["index"]
    step = int(labels.chunks[0])
    for r0 in range(0, n, step):  # whole row chunks, widened to int32 one chunk at a time
        labels[r0 : r0 + step, first : first + len(specs)] = block[r0 : r0 + step].astype(np.int32)
    return meta


#: rows of X labelled at a time by their nearest centre (``extend``)
_EXTEND_ROWS = 1 << 16


def _label_by_nearest_centre(store, ingest_hash, x_sub, lab, out):
    """``out[i]``: the cluster (of the subsample's ``lab``) whose mean over ``x_sub`` is nearest to row ``i``
    of X, for every row; the subsample's rows are overwritten by the caller with their own labels."""
    from ..partitions.models import ClusterCenters, nearest_centers

    acc = ClusterCenters(1, x_sub.shape[1])
    acc.add(x_sub, lab[:, None])
    centers = acc.centers
    x_arr = store["X"]
    n = x_arr.shape[0]
    cached = x_arr.nbytes <= _X_CACHE_MAX_BYTES
    for r0 in range(0, n, _EXTEND_ROWS):
        rows = slice(r0, min(n, r0 + _EXTEND_ROWS))
        x = _rows_of_x(store, ingest_hash, np.arange(n))[rows] if cached else x_arr[rows]
        out[rows] = nearest_centers(x, centers)[:, 0]


def _column_groups(specs, col_chunk):
    """``specs`` (consecutive columns) cut at the labels' column-chunk boundaries."""
    groups = {}
    for spec in specs:
        groups.setdefault(spec["index"] // col_chunk, []).append(spec)
    return list(groups.values())


class ImportedLabelsError(InputError):
    """The store holds base clusterings brought with ``import-labels``, which ``generate`` would replace (its
    message names the CLI's and a workflow's way to allow it; :class:`~ensemble_dask.ConsensusClustering`
    says its own)."""


def check_not_imported(store, replace_imported=False):
    """Stop unless ``replace_imported`` when ``store`` holds base clusterings brought with ``import-labels``
    (the guide says they are never generated over)."""
    prev = store.record("generate") or {}
    if prev.get("complete") and "imported" in (prev.get("params") or {}) and not replace_imported:
        raise ImportedLabelsError(
            f"run store {store.url!r} holds {prev['params']['n_clusterings']} base clusterings brought with "
            "import-labels, which generate would replace: use another store, or say so (generate "
            "--replace-imported, or 'replace_imported: true' under 'generate' in a workflow)"
        )


def generate(store, client, *, progress=False, replace_imported=False, **params):
    """Run the ``generate`` stage on ``client`` (a ``distributed.Client``).

    One task per column chunk of ``labels`` (see :func:`label_chunks`), each running that
    chunk's clusterings. If ``labels`` already holds the first clusterings of the same ensemble
    (same parameters but a smaller ``n_clusterings``), only the new columns are computed and
    appended. The stage's output identity is the hash of its columns' contents, so the stages
    after it are keyed on the labels, not on how they were obtained.

    Returns
    -------
    dict
        ``{"n_clusterings", "k_min", "k_max", "computed", "skipped"}``.
    """
    p = generate_params(**params)
    inputs = [store.stage_hash("ingest")]
    if store.is_complete("generate", p, inputs):
        logger.info("generate: up to date, skipped")
        return {**_summary(p, store["X"].shape[0]), "computed": 0, "skipped": True, "outdated": []}
    check_not_imported(store, replace_imported)
    n = store["X"].shape[0]
    try:
        plans = plan_ensemble(
            n, **{k: v for k, v in p.items() if k != "n_clusterings"}, n_clusterings=p["n_clusterings"]
        )
    except InputError as exc:  # a k range the user did not give is the one n_clusters sets
        unset = [k for k in ("k_min", "k_max") if params.get(k) is None and f"{k}=" in str(exc)]
        K = params.get("n_clusters")
        if K is None or not unset or default_k_range(K) == default_k_range():
            raise
        sets = " and ".join(f"{k}={p[k]}" for k in unset)
        hint = f"give a smaller n_clusters, or {' and '.join(unset)}"
        raise InputError(f"{exc}; n_clusters={K} sets {sets}: {hint}") from None

    start = _kept_columns(store, p, inputs)
    outdated = _results_made_of(store) if start == 0 else []
    with store.stage("generate", p, inputs, writes=("labels",)) as record:
        if start == 0:
            if "labels" in store:
                del store.group["labels"]
            labels = store.group.create_array(
                "labels",
                shape=(n, p["n_clusterings"]),
                chunks=label_chunks(n, p["n_clusterings"]),
                dtype="int32",
                fill_value=-1,
            )
            meta = []
        else:
            labels = store["labels"]
            labels.resize((n, p["n_clusterings"]))
            meta = list(labels.attrs.get("partitions", []))[:start]
        todo = plans[start:]
        futures = [
            client.submit(_cluster_task, store.url, store.storage_options, inputs[0], group, pure=False)
            for group in _column_groups(todo, int(labels.chunks[1]))
        ]
        from ..runtime.progress import gather_with_progress

        for part in gather_with_progress(client, futures, desc="generate", progress=progress):
            meta += part
        # the workers drop their copy of X: the stages after this one never read it there. Only after a
        # success: after a failure the cluster may be gone, and a cached X is keyed on its content, never
        # served stale.
        client.run(_drop_x_cache)
        labels.attrs["partitions"] = meta
        record["output"] = labels_identity(n, [m["sha256"] for m in meta])
    if outdated:
        logger.warning(
            "generate: new base clusterings; the consensus results %s were fitted on the old ones and are "
            "out of date (run their consensus again)",
            ", ".join(outdated),
        )
    return {**_summary(p, n), "computed": len(todo), "skipped": False, "outdated": outdated}


def _results_made_of(store):
    """The consensus results of ``store`` that are up to date with its labels (new labels outdate them)."""
    if store.record("generate") is None or "consensus" not in store:
        return []
    from .consensus import current_results

    try:
        return sorted(current_results(store))
    except InputError:  # a store whose results cannot be read: nothing to name
        return []


def _kept_columns(store, p, inputs):
    """How many leading columns of ``labels`` a run of ``p`` on ``inputs`` keeps: those of a completed smaller
    ensemble of the same parameters and data set. Its record says so; or, after a growth that did not finish
    (whose start unmarked the record), the stamp that ``labels`` still bears from that ensemble's completion,
    and each of its columns' hashes (a column the growth may have touched is read again)."""
    if "labels" not in store:
        return 0
    prev = store.record("generate")
    labels = store["labels"]
    have = labels.attrs.get("partitions", [])
    if not all("sha256" in m for m in have):
        return 0
    if prev is not None:
        if not (prev.get("complete") and prev["inputs"] == inputs):
            return 0
        old = dict(prev["params"])
        m = old["n_clusterings"]
        return m if {**old, "n_clusterings": p["n_clusterings"]} == p and m < p["n_clusterings"] else 0
    m = len(have)
    if not 0 < m < p["n_clusterings"] or labels.shape[1] < m:
        return 0
    if not store.stamped("labels", "generate", {**p, "n_clusterings": m}, inputs):
        return 0
    if column_hashes(labels, m) != [have[j]["sha256"] for j in range(m)]:
        return 0
    logger.info("generate: the first %d clusterings of an unfinished growth are kept", m)
    return m


def _summary(p, n):
    k_max = p["k_max"]
    if k_max == "sqrt":  # the k range drawn in, on these rows
        k_max = resolve_k_max(n, p["k_min"], k_max, p["rate"], p.get("max_rows"))
    return {"n_clusterings": p["n_clusterings"], "k_min": p["k_min"], "k_max": k_max}


def read_labels_table(url, *, storage_options=None, fmt=None, header=None, sep=None):
    """Read and check an ``n x N`` labels table (CSV, Parquet, zarr, npy): an int32 array.

    One column per clustering with integer cluster ids, ``-1`` (or an empty CSV field) for a point
    absent from that clustering. A CSV's fields are split at ``sep`` (one character, ``"tab"`` or
    ``"whitespace"``; None: guessed as ``ingest`` guesses, :func:`~ensemble_dask.io.readers.detect_separator`)
    and its first line names the columns if ``header`` (None: guessed as ``ingest`` guesses,
    :func:`~ensemble_dask.io.readers.csv_has_header`). Raises :class:`InputError` naming ``url`` for an
    empty table, text or NaN where a cluster id belongs (NaN is absent only as an empty CSV field),
    non-integer ids, a table that labels nothing or a column that labels no point.
    """
    fmt = fmt or infer_format(str(url))
    csv = fmt == "csv"
    sep = check_sep(sep)
    if csv and sep is None:
        sep = detect_separator(strip_file_scheme(str(url)), storage_options)
    if csv and header is None:
        header = csv_has_header(strip_file_scheme(str(url)), storage_options, sep)
    blocks = []
    for offset, frame in iter_table_chunks(
        url, format=fmt, storage_options=storage_options, header=bool(header), sep=sep or ","
    ):
        if csv:
            blocks.append(_csv_ids(url, offset, frame, 2 if header else 1))
            continue
        missing = frame.isna().to_numpy()
        if missing.any():
            i, j = np.argwhere(missing)[0]
            raise InputError(
                f"labels in {url!r} must hold integer cluster ids; got nan at row {offset + i}, column {j} "
                "(-1 marks a point absent from a clustering)"
            )
        blocks.append(frame.to_numpy())
    if not blocks:
        raise InputError(f"{url}: the labels table is empty")
    lab = check_labels_matrix(np.concatenate(blocks), name=f"labels in {url!r}")
    lab = np.asarray(lab, dtype=np.int64)
    dense = _dense(lab)
    _check_imported_labels(dense, url)
    return dense


def _csv_ids(url, offset, frame, first_line):
    """A block of a labels CSV as numbers, an empty field as -1 (absent); text is an error naming its line."""
    import pandas as pd

    for j, col in enumerate(frame.columns):
        if pd.api.types.is_numeric_dtype(frame[col].dtype):
            continue
        ids = pd.to_numeric(frame[col], errors="coerce")
        text = (ids.isna() & frame[col].notna()).to_numpy()
        if text.any():
            i = int(np.flatnonzero(text)[0])
            line = offset + i + first_line
            hint = " (if the first line names the columns, say --header / header=True)" if line == 1 else ""
            if any(ch in str(frame[col].iloc[i]) for ch in ",;|\t "):  # fields left joined: another separator
                hint += " (are its fields split at another separator? say it with --sep / sep=)"
            raise InputError(
                f"{url}, line {line}: {frame[col].iloc[i]!r} in column {j} is no cluster id{hint}"
            )
        frame[col] = ids
    return frame.fillna(-1).to_numpy()


def _dense(lab):
    """Each column's cluster ids renumbered 0 .. k-1 in order (-1 kept): ids up to 10**9 would size every
    count by the largest id."""
    out = np.full(lab.shape, -1, dtype=np.int32)
    for u in range(lab.shape[1]):
        col = lab[:, u]
        keep = col >= 0
        out[keep, u] = np.unique(col[keep], return_inverse=True)[1]
    return out


def import_labels(store, url, *, storage_options=None, fmt=None, header=None, sep=None, labels=None):
    """Bring precomputed partitions: read an ``n x N`` labels table into ``labels``.

    The table (CSV, Parquet, zarr, npy) holds one column per clustering with integer cluster
    ids, ``-1`` (or an empty CSV field) for a point absent from that clustering. Its number of
    rows must match the store's data set, if it has one; a store without data takes its ``n``
    from the labels. The stage is identified by the labels' content (not the table's URL): the
    same labels imported again, from any path, are skipped. ``labels``, when given, is the table
    already read by :func:`read_labels_table` from ``url`` (else read with ``fmt``, ``header`` and ``sep``).
    """
    lab = (
        labels
        if labels is not None
        else read_labels_table(url, storage_options=storage_options, fmt=fmt, header=header, sep=sep)
    )
    n, n_clust = lab.shape
    store.check_n(n, f"labels table {url!r}")
    hashes = [column_hash(lab[:, u]) for u in range(n_clust)]
    params = {"imported": labels_identity(n, hashes), "n": n, "n_clusterings": n_clust}
    inputs = [store.stage_hash("ingest")] if store.record("ingest") else []
    if store.is_complete("generate", params, inputs):
        logger.info("import-labels: up to date, skipped")
        return {"n_clusterings": n_clust, "computed": 0, "skipped": True}
    with store.stage("generate", params, inputs, meta={"url": str(url)}, writes=("labels",)) as record:
        if "labels" in store:
            del store.group["labels"]
        arr = store.group.create_array(
            "labels", shape=lab.shape, chunks=label_chunks(n, n_clust), dtype="int32", fill_value=-1
        )
        arr[:] = lab
        arr.attrs["partitions"] = [
            {
                "index": u,
                "algorithm": "imported",
                "k": int(lab[:, u].max()) + 1,
                "rate": float((lab[:, u] >= 0).mean()),
                "sha256": hashes[u],
            }
            for u in range(n_clust)
        ]
        record["output"] = labels_identity(n, hashes)
    return {"n_clusterings": n_clust, "computed": n_clust, "skipped": False}


def _check_imported_labels(lab, url):
    """Refuse a table that labels nothing, a clustering (column) that labels no point, and one that says
    nothing about any pair (``lab``: each column's ids 0 .. k-1, :func:`_dense`)."""
    present = (lab >= 0).any(axis=0)
    if not present.any():
        raise InputError(
            f"labels table {url!r} labels no point: every entry is -1 (absent); "
            "a partition gives each point its cluster id (>= 0)"
        )
    if not present.all():
        empty = np.flatnonzero(~present)
        raise InputError(
            f"labels table {url!r}: column {int(empty[0])} labels no point (every entry is -1); "
            f"drop it ({empty.size} such column(s): {empty[:10].tolist()})"
        )
    for u in range(lab.shape[1]):  # a partition that says nothing about any pair
        col = lab[:, u][lab[:, u] >= 0]
        if col.size < 2:
            what = "labels one point"
        elif col.min() == col.max():
            what = "puts every labelled point in one cluster"
        elif col.max() + 1 == col.size:  # ids 0 .. k-1 with k the points: each apart
            what = (
                f"puts each of its {col.size} points in a cluster of its own (a row number or an id, such as "
                "the index pandas' to_csv writes?)"
            )
        else:
            continue
        raise InputError(
            f"labels table {url!r}: column {u} {what}: it carries no evidence of which points go together; "
            "drop it"
        )


def base_partition_scores(store):
    """Mean/min/max of H, ARI and NMI of the base partitions against ``y_true`` (own subsample each)."""
    if "y_true" not in store or "labels" not in store:
        return None
    from ..metrics import contingency_counts, table_scores  # scikit-learn: imported only when needed

    y = store["y_true"][:]
    labels = store["labels"]
    scores = {"H": [], "ARI": [], "NMI": []}
    step = int(labels.chunks[1])
    for c0 in range(0, labels.shape[1], step):  # whole column chunks: each chunk is read once
        block = labels[:, c0 : c0 + step]
        for u in range(block.shape[1]):
            # the values of partition_scores, by bincount: seconds instead of minutes at 5M rows
            s = table_scores(contingency_counts(block[:, u], y))
            for key in scores:
                scores[key].append(s[key])
    return {
        key: {"mean": float(np.mean(v)), "min": float(np.min(v)), "max": float(np.max(v))}
        for key, v in scores.items()
    }

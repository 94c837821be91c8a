"""The ``generate`` stage: N base clusterings as a Dask graph, written to ``labels``.

One task per clustering. A task receives only small arguments (the store URL, its spec); it
reads its own subsample rows of ``X`` from the store, clusters them with the in-memory
function of :mod:`ensemble_dask.clusterers`, and writes its column of ``labels`` itself.
``labels`` is chunked ``(rows, 1)``, so no two tasks ever write the same chunk. Only the
per-clustering metadata travels back to the client.
"""

from __future__ import annotations

import hashlib
import logging
import time

import numpy as np

from .._validation import InputError, check_int, check_labels_matrix
from ..clusterers import plan_ensemble, run_clustering, subsample_of
from ..io.readers import iter_table_chunks
from ..io.store import RunStore
from ..metrics import partition_scores

__all__ = ["generate", "generate_params", "import_labels", "base_partition_scores", "LABEL_ROW_CHUNK"]

logger = logging.getLogger(__name__)

LABEL_ROW_CHUNK = 1 << 20

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


def generate_params(
    n_clusterings=100, *, ensemble="type1", k_min=2, k_max=10, rate=1.0, algorithms=None, seed=0
):
    """The ``generate`` stage's parameters, validated (see :func:`~ensemble_dask.clusterers.plan_ensemble`)."""
    return dict(
        n_clusterings=check_int(n_clusterings, "n_clusterings", min_value=1),
        ensemble=ensemble,
        k_min=k_min,
        k_max=k_max,
        rate=rate,
        algorithms=None if algorithms is None else list(algorithms),
        seed=int(seed),
    )


def _cluster_task(store_url, storage_options, ingest_hash, spec):
    """Worker side: read this clustering's rows of X, cluster them, write its labels column."""
    store = RunStore(store_url, storage_options, mode="r+")
    labels = store["labels"]
    n = labels.shape[0]
    idx = subsample_of(spec, n)
    t0 = time.perf_counter()
    lab = run_clustering(_rows_of_x(store, ingest_hash, idx), spec)
    col = np.full(n, -1, dtype=np.int32)
    col[idx] = lab
    labels[:, spec["index"]] = col
    return {
        **spec,
        "n_clusters_found": int(lab.max()) + 1,
        "seconds": round(time.perf_counter() - t0, 4),
    }


def generate(store, client, *, progress=False, **params):
    """Run the ``generate`` stage on ``client`` (a ``distributed.Client``).

    If ``labels`` already holds the first clusterings of the same ensemble (same parameters but
    a smaller ``n_clusterings``), only the new columns are computed and appended.

    Returns
    -------
    dict
        ``{"n_clusterings", "computed", "skipped"}``.
    """
    p = generate_params(**params)
    inputs = [store.stage_hash("ingest")]
    if store.is_complete("generate", p, inputs):
        logger.info("generate: up to date, skipped")
        return {"n_clusterings": p["n_clusterings"], "computed": 0, "skipped": True}
    n = store["X"].shape[0]
    plans = plan_ensemble(
        n, **{k: v for k, v in p.items() if k != "n_clusterings"}, n_clusterings=p["n_clusterings"]
    )

    start = 0
    prev = store.record("generate")
    if prev and prev.get("complete") and prev["inputs"] == inputs and "labels" in store:
        old = dict(prev["params"])
        if {**old, "n_clusterings": p["n_clusterings"]} == p and old["n_clusterings"] < p["n_clusterings"]:
            start = old["n_clusterings"]

    with store.stage("generate", p, inputs):
        if start == 0:
            if "labels" in store:
                del store.group["labels"]
            labels = store.group.create_array(
                "labels",
                shape=(n, p["n_clusterings"]),
                chunks=(min(n, LABEL_ROW_CHUNK), 1),
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
            client.submit(_cluster_task, store.url, store.storage_options, inputs[0], spec, pure=False)
            for spec in todo
        ]
        from ..parallel import gather_with_progress

        meta += gather_with_progress(client, futures, desc="generate", progress=progress)
        labels.attrs["partitions"] = meta
    return {"n_clusterings": p["n_clusterings"], "computed": len(todo), "skipped": False}


def import_labels(store, url, *, storage_options=None, fmt=None):
    """Bring precomputed partitions: read an ``n x N`` labels table into ``labels``.

    The table (CSV, Parquet, zarr, npy) holds one column per clustering with integer cluster
    ids, ``-1`` (or an empty CSV field) for a point absent from that clustering. Its number of
    rows must match the store's data set, if it has one.
    """
    blocks = []
    for _, frame in iter_table_chunks(url, format=fmt, storage_options=storage_options):
        blocks.append(frame.fillna(-1).to_numpy())
    if not blocks:
        raise InputError(f"{url}: the labels table is empty")
    lab = check_labels_matrix(np.concatenate(blocks), name=f"labels in {url!r}")
    n, n_clust = lab.shape
    _check_imported_labels(lab, url)
    store.check_n(n, f"labels table {url!r}")
    params = {
        "imported": url,
        "n": n,
        "n_clusterings": n_clust,
        "sha256": hashlib.sha256(lab.tobytes()).hexdigest(),
    }
    inputs = [store.stage_hash("ingest")] if store.record("ingest") else []
    with store.stage("generate", params, inputs):
        if "labels" in store:
            del store.group["labels"]
        arr = store.group.create_array(
            "labels", shape=lab.shape, chunks=(min(n, LABEL_ROW_CHUNK), 1), dtype="int32", fill_value=-1
        )
        arr[:] = lab
        arr.attrs["partitions"] = [
            {
                "index": u,
                "algorithm": "imported",
                "k": int(lab[:, u].max()) + 1,
                "rate": float((lab[:, u] >= 0).mean()),
            }
            for u in range(n_clust)
        ]
    return {"n_clusterings": n_clust, "computed": n_clust, "skipped": False}


def _check_imported_labels(lab, url):
    """Refuse a table that labels nothing, or a clustering (column) that labels no point."""
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


def base_partition_scores(store):
    """Mean/min/max of H, ARI and NMI of the base partitions against ``y_true`` (own subsample each)."""
    if "y_true" not in store or "labels" not in store:
        return None
    y = store["y_true"][:]
    labels = store["labels"]
    scores = {"H": [], "ARI": [], "NMI": []}
    for u in range(labels.shape[1]):
        s = partition_scores(labels[:, u], y)
        for key in scores:
            scores[key].append(s[key])
    return {
        key: {"mean": float(np.mean(v)), "min": float(np.min(v)), "max": float(np.max(v))}
        for key, v in scores.items()
    }

"""The ``coassoc`` stage: the co-association store of the run store's labels, built or updated on Dask."""

from __future__ import annotations

import logging

from .._validation import InputError, stage_seed
from ..coassoc import build_coassociation, update_coassociation
from ..coassoc.csr import DEFAULT_NNZ_CHUNK
from ..coassoc.sampling import DEFAULT_BLOCK_SIZE, _make_sampler
from ..runtime.clients import LazyClient

# A build this small runs on threads in this process when no cluster is up yet: starting one
# (and loading the numba kernels in each worker) costs more than the build itself.
IN_PROCESS_LABEL_BYTES = 256 << 20
IN_PROCESS_PAIRS = 1 << 24

__all__ = ["coassoc_stage", "resolve_strategy", "default_pairs_per_point"]

#: pairs per point of ``per-point`` (uniform) draws: enough at K <= 15 (ARI flat from l = 20 on at K = 3 and
#: 8), and 2K above, where fewer partners per point hold too few from a point's own cluster
MIN_PAIRS_PER_POINT = 30
#: pairs per point of ``cocluster`` draws, whatever K: half of them are partners from the point's own base
#: clusters, so the own-cluster evidence does not thin out as K grows. Started from the label starts, PCC-KL,
#: PCC-L2 and PPC reach the same ARI from l = 10 as from l = 60 at K = 3, 8 and 30 (n = 20,000) and from
#: l = 50 at K = 100 (n = 100,000), in a fraction of the time (benchmarks/pcc_pairs_curve.py); at K = 100 the
#: old 2 K = 200 would take over a minute.
COCLUSTER_PAIRS_PER_POINT = 10

logger = logging.getLogger(__name__)


def default_pairs_per_point(n_clusters=None, strategy="per-point"):
    """Partners drawn per point when a workflow does not say: for ``cocluster``, 10 whatever K; else
    ``max(30, 2 K)``, K the largest ``n_clusters`` the pair methods of the run ask for (30 when unknown)."""
    if strategy == "cocluster":
        return COCLUSTER_PAIRS_PER_POINT
    return max(MIN_PAIRS_PER_POINT, 2 * int(n_clusters or 0))


def resolve_strategy(strategy, labels_shape, params, n_clusters=None):
    """``(strategy, params)`` with ``"auto"`` and a missing ``l`` resolved for these labels and this K."""
    params = dict(params)
    if strategy == "auto":
        # cocluster: part of each point's budget among points that share a base cluster, the intra-cluster
        # evidence that uniform draws miss at many clusters; its tasks read one row partition of the labels
        # each, so it fits any n (benchmarks/bench_coassoc.py)
        strategy = "cocluster"
        logger.info("coassoc: strategy auto -> cocluster (labels %d x %d)", *labels_shape)
    if strategy in ("per-point", "cocluster") and "l" not in params:
        params["l"] = min(default_pairs_per_point(n_clusters, strategy), max(1, labels_shape[0] - 1))
    return strategy, params


def coassoc_stage(
    store,
    client=None,
    *,
    strategy="auto",
    n_clusters=None,
    seed=0,
    block_size=DEFAULT_BLOCK_SIZE,
    row_block=None,
    count_mode="auto",
    nnz_chunk=DEFAULT_NNZ_CHUNK,
    spill="auto",
    **params,
):
    """Run the ``coassoc`` stage on a :class:`~ensemble_dask.io.store.RunStore`.

    Skipped when its record matches (same parameters, same ``generate`` output). When the only
    change since the last run is that ``generate`` appended clusterings to the same ensemble,
    the stored pairs are updated with the new columns (:func:`update_coassociation`) instead
    of being rebuilt.

    Parameters
    ----------
    store : RunStore
    client : distributed.Client, default=None
        Where the graph runs (``None``: Dask's default scheduler).
    strategy : {"auto", "full", "uniform", "per-point", "cocluster"}, default="auto"
        ``"auto"``: ``cocluster`` (see :func:`resolve_strategy`).
    n_clusters : int, default=None
        The largest K the pair methods will ask for: sets the default ``l`` of ``per-point`` to
        ``max(30, 2 K)`` (``cocluster``: 10 whatever K, see :func:`default_pairs_per_point`).
    seed, block_size, row_block, count_mode, nnz_chunk, spill, **params
        As in :func:`build_coassociation` (``l`` per point, ``p``, ``fraction``, ``max_n``). ``row_block``,
        ``count_mode``, ``nnz_chunk`` and ``spill`` do not change the result and are not part of the
        stage's identity.

    Returns
    -------
    dict
        ``{"n_pairs", "nnz", "n_clusterings", "skipped", "updated"}``.
    """
    # the stage's own branch of the run seed (no stream shared with ingest or generate)
    seed = int(stage_seed(seed, "coassoc").generate_state(1)[0])
    strategy, params = resolve_strategy(strategy, store["labels"].shape, params, n_clusters)
    sampler = _make_sampler(strategy, store["labels"].shape[0], seed, block_size, params)
    p = sampler.attrs()
    inputs = [store.stage_hash("generate")]
    gen_params = {k: v for k, v in (store.record("generate") or {}).get("params", {}).items()}
    if store.is_complete("coassoc", p, inputs):
        attrs = dict(store["pairs"].attrs)
        logger.info("coassoc: up to date, skipped")
        return {**_stage_result(attrs), "skipped": True, "updated": False}
    prev = store.record("coassoc")
    appendable = False
    # an update keeps the stored pairs: only right when the pairs do not depend on the labels
    # (cocluster draws them from the labels, so more clusterings mean other pairs: rebuild)
    if (
        not sampler.needs_labels
        and prev
        and (prev.get("complete") or prev.get("stale"))  # stale: its labels were appended to since
        and prev.get("params") == _json_round_trip(p)
        and "pairs" in store
    ):
        old_gen = dict(store["pairs"].attrs.get("generate_params") or {})
        if old_gen and gen_params and "n_clusterings" in gen_params:
            same = {**old_gen, "n_clusterings": gen_params["n_clusterings"]} == gen_params
            appendable = same and old_gen["n_clusterings"] < gen_params["n_clusterings"]
    labels = store["labels"]
    client = _where(client, labels.shape[0] * labels.shape[1] * 4, sampler)
    with store.stage("coassoc", p, inputs, writes=("pairs",)):
        if appendable:
            attrs = update_coassociation(store, client_or_scheduler=client)
        else:
            attrs = build_coassociation(
                store,
                strategy=strategy,
                seed=sampler.seed,
                client_or_scheduler=client,
                block_size=block_size,
                row_block=row_block,
                count_mode=count_mode,
                nnz_chunk=nnz_chunk,
                spill=spill,
                **params,
            )
        store["pairs"].attrs["generate_params"] = gen_params
        _check_evidence(store)
    return {**_stage_result(attrs), "skipped": False, "updated": appendable}


def _check_evidence(store):
    """Refuse (leaving the stage unmarked) a pairs store in which no pair was ever co-present: every
    consensus method would fit on nothing."""
    both = store["pairs/both"]
    step = max(int(both.chunks[0]), 1 << 20)
    for a in range(0, both.shape[0], step):
        if (both[a : a + step] > 0).any():
            return
    raise InputError(
        f"run store {store.url!r}: no pair of points was ever in the same base clustering's subsample "
        f"({both.shape[0]} stored pairs, none co-present): use larger subsamples (generate's rate) or more "
        "clusterings"
    )


def _where(client, label_bytes, sampler):
    """``"threads"`` for a small build while the cluster is not started, else ``client``."""
    from ..coassoc.build import _expected_pairs

    small = label_bytes <= IN_PROCESS_LABEL_BYTES and _expected_pairs(sampler) <= IN_PROCESS_PAIRS
    if small and (client is None or (isinstance(client, LazyClient) and not client.started)):
        logger.info("coassoc: a small build, run on threads in this process")
        return "threads"
    return client


def _json_round_trip(obj):
    import json

    return json.loads(json.dumps(obj, sort_keys=True, default=str))


def _stage_result(attrs):
    return {k: attrs[k] for k in ("n_pairs", "nnz", "n_clusterings")}

"""The ``consensus`` stage: run a consensus method on the run store and write its results.

For each configured method ``name`` it writes ``consensus/<name>/Y`` (n x K float32 soft
memberships), ``labels`` (n int32, argmax), ``uncertainty`` (n float32, normalised entropy), and
attributes with the parameters, objective (trace), iterations, wall time and metrics. Pairwise
methods (``pcc``, ``ppc``) read the co-association store ``pairs/``; the Bayesian ones (``bce``,
``mm``, ``gbce``) read ``labels`` (and ``X`` for ``gbce``).

Method names: ``pcc-kl`` and ``pcc-l2`` are PCC with that divergence; otherwise a name is a
method (``ppc``, ``bce``, ...) or carries ``method:`` in its section, e.g.
``{pcc-k8: {method: pcc, n_clusters: 8}}``.
"""

from __future__ import annotations

import inspect
import logging
import re
import time
import warnings

import numpy as np

from .._validation import InputError, stage_seed
from ..consensus import registry
from ..consensus._common.krange import is_k_range, largest_k
from ..io.store import RunStore, StageContentError
from ..runtime.progress import elapsed_line
from ._choose_k import checked_k, k_metrics
from ._starts import STARTS_CACHE, is_kept, keep_starts, kept_starts, starts_key
from .kept_models import write_model

__all__ = [
    "resolve_method",
    "check_consensus_params",
    "consensus_stage",
    "current_results",
    "uses_cluster",
    "pending_label_starts",
]

logger = logging.getLogger(__name__)

#: labels (as int32) larger than this are never read whole in this process: BCE's E-step and KCC's Lloyd
#: assignment run on the cluster's workers, on row blocks each worker reads from the store; smaller labels
#: fit in this process, which is faster
DASK_LABELS_BYTES = 1 << 30
#: pairs that would take more than this in memory (:data:`PAIR_BYTES` per stored entry) are never read whole:
#: PCC and PPC read them a block of rows at a time (``coassoc.csr.StoredPairs``); smaller pairs are read
#: whole, which saves reading them again on every sweep
PAIRS_IN_MEMORY_BYTES = 1 << 30
PAIR_BYTES = 20  # a stored entry as the pair methods hold it: int32 index, float64 c/N and N
#: labels (as int32) of at most this size have their pair methods' start computed while the pairs are built
#: (``pipeline.label_starts_alongside``); above it the start (a few times the labels' memory) waits
#: for the pairs, so that it never adds to the pair build's memory on a large run
AHEAD_LABELS_BYTES = 256 << 20

_TRACE_MAX = 2000  # objective trace points kept in the attributes


def resolve_method(name, params):
    """``(method, params)`` for the workflow entry ``name: params``: a method's name, an alias (``pcc-kl``),
    either with a suffix after a hyphen (``pcc-l2-k4``), or any name with ``method:``."""
    params = dict(params or {})
    method = params.pop("method", None)
    known = sorted([*registry.names(), *registry.ALIASES], key=len, reverse=True)
    base = name if name in known else next((m for m in known if name.startswith(f"{m}-")), None)
    named = registry.ALIASES.get(base, (base,))[0]
    if method is not None and named is not None and method != named:  # a result named after another method
        raise InputError(
            f"consensus result {name!r} is named after the method {named!r}; got method={method!r} (give the "
            "result another name, e.g. 'consensus my-result --set method=...')"
        )
    given, method = method is not None, named if method is None else method
    for key, value in registry.ALIASES.get(base, (None, {}))[1].items():
        if params.setdefault(key, value) != value:  # pcc-kl with divergence=l2 would be named a lie
            raise InputError(
                f"consensus method {name!r} is {method} with {key}={value!r}; got {key}={params[key]!r} (to "
                f"set {key}, name it {method!r}, or give another name 'method: {method}')"
            )
    if method not in registry.names():
        hint = "" if given else "; a result of a name of its own says its method (method: M, --set method=M)"
        raise InputError(
            f"consensus method {name!r}: unknown method {(method or name)!r}; known: "
            f"{registry.names()} and pcc-kl, pcc-l2 (PCC with that divergence){hint}"
        )
    return method, params


def _estimator_class(method):
    return registry.get(method).estimator_class()


def _estimator(method, params, name=None):
    cls = _estimator_class(method)
    known = [
        k
        for k, prm in inspect.signature(cls.__init__).parameters.items()
        if k != "self" and prm.kind in (prm.POSITIONAL_OR_KEYWORD, prm.KEYWORD_ONLY)
    ]
    unknown = sorted(set(params) - set(known))
    if unknown:
        where = (
            f"consensus method {name!r} ({method})"
            if name and name != method
            else f"consensus method {method!r}"
        )
        raise InputError(
            f"{where}: unknown parameter(s) {unknown}; {cls.__name__} takes {known}"
            + (" (and 'method')" if name else "")
        )
    return cls(**params)


def check_consensus_params(name, params, *, seed=0):
    """Validate the workflow entry ``name: params`` without fitting; return ``(method, kwargs)``.

    Unknown methods and parameters are errors naming the entry and listing the known ones;
    parameter values are checked as far as they do not depend on the data, so that a workflow
    fails before its first stage runs rather than after the stages the consensus needs.
    """
    if not isinstance(name, str):
        raise InputError(f"consensus method names must be strings; got {name!r}")
    if params is not None and not isinstance(params, dict):
        raise InputError(f"consensus method {name!r}: its parameters must be a mapping; got {params!r}")
    method, kwargs = resolve_method(name, params)
    k = kwargs.get("n_clusters")
    if is_k_range(k):  # checked first: a method that does not choose K says so (not its estimator)
        kwargs["n_clusters"] = checked_k(name, method, k)
    if "random_state" in inspect.signature(_estimator_class(method).__init__).parameters:
        kwargs.setdefault("random_state", int(stage_seed(seed, "consensus").generate_state(1)[0]))
    starts = registry.get(method).starts
    if starts:
        kwargs.setdefault("init", starts[0])
        if kwargs["init"] not in starts:
            raise InputError(
                f"consensus method {name!r}: init must be one of {list(starts)} in a workflow; "
                f"got {kwargs['init']!r}"
            )
    est = _estimator(method, _estimator_params(method, kwargs), name)
    # K = 1: no consensus to fit, a refusal that says where that partition is given
    one = " (one cluster holds every row; ConsensusClustering(n_clusters=1) gives it)"
    one = one if kwargs.get("n_clusters") == 1 else ""
    try:  # the estimator's own checks, those that need no data
        est._validate_params()
    except InputError as exc:
        raise InputError(f"consensus method {name!r}: {exc}{one}") from None
    if k is None:  # each estimator has a default K of its own (2 or 8): a consensus states the one it wants
        raise InputError(
            f"consensus method {name!r} needs n_clusters, the number of consensus clusters K (on the command "
            f"line --n-clusters K; in a workflow {name}: {{n_clusters: K}})"
        )
    try:
        kwargs["n_clusters"] = checked_k(name, method, kwargs["n_clusters"])
    except InputError as exc:
        raise InputError(f"{exc}{one}") from None
    return method, kwargs


#: the tag the record of a method whose default start is HBGF's partition carries (``hbgf_start`` in the
#: registry): a store finished before, with the start of lower objective or k-means++ seedings, is then not
#: up to date. A method's ``init: auto`` (``starts`` in the registry) is HBGF's partition of the store's
#: labels (spectral, on the bipartite graph of points and clusters;
#: :func:`~ensemble_dask.consensus.starts.label_starts`)
STARTS_TAG = "hbgf-3"  # 3: HBGF's eigenproblem by Lanczos above 1,000 base clusters


def _estimator_params(method, kwargs):
    """The estimator's own parameters: a stage-level ``init: auto`` is resolved when fitting."""
    if "auto" in registry.get(method).starts and kwargs.get("init") == "auto":
        return {k: v for k, v in kwargs.items() if k != "init"}
    return kwargs


#: the methods whose result keeps what labels new rows (``ensemble-dask predict``), and since which version
#: of it: BCE its ``alpha`` and ``beta`` (already), KCC its centroids (``centers``), MM its mixing ``weights``
#: (and ``beta``), GBCE its Gaussians (``means``, ``variances``, and ``alpha``, ``beta``); the others label
#: new rows from their labels alone (``stages.predict``)
MODEL_KEPT = {"kcc": 1, "mm": 1, "gbce": 1, "auto": 1}


def computed_starts(store, n_clusters, random_state, client=None):
    """The start of the pair methods from the store's labels, computed (see :func:`_label_starts`)."""
    from ..consensus.starts import label_starts

    t0 = time.perf_counter()
    if client is not None and _labels_bytes(store) > DASK_LABELS_BYTES:
        kcc = _fit_on_cluster(
            store,
            "kcc",
            {"n_clusters": n_clusters, "init": "spectral", "random_state": random_state},
            client,
        )
        starts = [np.asarray(kcc.labels_, dtype=np.int64)]
    else:
        starts = label_starts(store["labels"][:], n_clusters, random_state=random_state)
    logger.info("label starts for K=%d computed in %.1f s", n_clusters, time.perf_counter() - t0)
    return starts


def _label_starts(store, n_clusters, random_state, client=None):
    """The start of the pair methods from the store's labels (HBGF's partition, :func:`label_starts`), or
    None.

    It depends only on the labels' content, K and the seed, so it is kept in the store under
    that key (``_cache/starts/<key>``, :mod:`._starts`): PCC-KL and PCC-L2 of one run, and any later run on
    the same labels, compute it once. With a ``client`` and labels larger than :data:`DASK_LABELS_BYTES`,
    it is KCC's partition fitted on the cluster's row blocks from HBGF's partition of a sample of rows
    (``init="spectral"``; the labels never read whole here).
    """
    if "labels" not in store:
        logger.warning("no labels in the store: the pair method starts from a random point")
        return None
    key = starts_key(store, n_clusters, random_state)
    starts = kept_starts(store, key)
    if starts is not None:
        logger.info("label starts for K=%d: from the store (%s/%s)", n_clusters, STARTS_CACHE, key)
        return starts
    starts = computed_starts(store, n_clusters, random_state, client)
    keep_starts(store, key, starts)
    return starts


def pending_label_starts(store, consensus, seed=0):
    """``{key: (K, seed)}``: the label starts that the entries of ``consensus`` will take (``init: auto``) and
    that the store does not keep yet, for labels of at most :data:`AHEAD_LABELS_BYTES` (else none)."""
    if "labels" not in store or _labels_bytes(store) > AHEAD_LABELS_BYTES:
        return {}
    pending = {}
    for name, params in (consensus or {}).items():
        method, kwargs = check_consensus_params(name, params, seed=seed)
        if method == "auto" or _estimator_params(method, kwargs) is kwargs:  # no init: auto of its own
            continue
        k, rs = kwargs["n_clusters"], kwargs.get("random_state")
        key = starts_key(store, k, rs)
        if key is not None and not is_kept(store, key):
            pending[key] = (k, rs)
    return pending


class TooFewPairsWarning(UserWarning):
    """The co-association store holds too few partners per point for the number of clusters asked."""


def _check_pairs_per_point(pairs, n_clusters, strategy=None):
    """Warn when the stored partners per point are below ``2 K`` (uniform draws: below that a point holds too
    few partners from its own cluster for the pair methods to separate K clusters), or, for ``cocluster``
    draws (half of them from the point's own base clusters, whatever K), below the ``l`` of its default
    (benchmarks/pcc_pairs_curve.py)."""
    from .coassoc import COCLUSTER_PAIRS_PER_POINT

    n = pairs.n
    per_point = pairs.nnz / max(n, 1)  # both (i, j) and (j, i) are stored: partners per point
    if strategy == "cocluster":
        need, why = COCLUSTER_PAIRS_PER_POINT, "the cocluster strategy's default l"
    else:
        need, why = 2 * int(n_clusters or 0), f"2 K that n_clusters={n_clusters} needs"
    if n_clusters and per_point < need:
        warnings.warn(
            f"the co-association store holds {per_point:.1f} partners per point, fewer than the "
            f"{need} ({why}); rebuild it with a larger l "
            "(coassoc: {l: ...}, or give the pair methods' K to the coassoc stage)",
            TooFewPairsWarning,
            stacklevel=3,
        )


class CoarseEnsembleWarning(UserWarning):
    """Most base partitions have fewer clusters than the consensus is asked for."""


def _check_ensemble_range(store, n_clusters):
    """Warn when fewer than a quarter of the base partitions have ``n_clusters`` clusters or more.

    A consensus can split only what some partitions split, and on an ensemble coarser than K the pair
    methods merge clusters (the benchmarks page, "The range of k and the pair methods"). From ``generate``'s
    range for a K known in advance, ``[K // 2, 2 K]``, about two partitions in three reach K (it warns by
    chance on a small ensemble only: 8 partitions, K = 12, at most one of them at 12 or more, about 1 time
    in 500).
    """
    meta = store["labels"].attrs.get("partitions") or []
    ks = [m.get("n_clusters_found", m.get("k")) for m in meta]
    ks = np.array([int(k) for k in ks if k is not None])
    if not n_clusters or not ks.size:
        return
    enough = int((ks >= n_clusters).sum())
    if 4 * enough < ks.size:
        warnings.warn(
            f"{enough} of the {ks.size} base partitions have n_clusters={n_clusters} clusters or more "
            f"(at most {ks.max()}, median {np.median(ks):g}): a consensus splits only what base partitions "
            f"split; generate an ensemble with k up to 2K (generate: {{n_clusters: {n_clusters}}}, or "
            f"--n-clusters {n_clusters}, draws k in [{max(2, n_clusters // 2)}, {max(10, 2 * n_clusters)}])",
            CoarseEnsembleWarning,
            stacklevel=3,
        )


class FewerClustersWarning(UserWarning):
    """The consensus labels use fewer clusters than were asked for."""


def _check_clusters_used(est):
    """Warn when the hard labels use fewer clusters than the estimator's ``n_clusters`` (e.g. PCC on an
    ensemble coarser than K: 6 of 20 on 20 blobs from k in [2, 10]): the result exists, but not at the K
    asked."""
    used = getattr(est, "effective_k_", None)
    n_clusters = getattr(est, "n_clusters_", getattr(est, "n_clusters", None))  # the K chosen, of a range
    if n_clusters and used is not None and used < n_clusters:
        warnings.warn(
            f"the labels use {used} of the n_clusters={n_clusters} clusters asked "
            "(no point has its largest membership in the others)",
            FewerClustersWarning,
            stacklevel=3,
        )


class UnlabelledRowsWarning(UserWarning):
    """Some rows are in no base clustering: the consensus knows nothing of them (their memberships are the
    clusters' shares of the other rows)."""


#: methods that give the rows no base clustering labels the prior's memberships and warn themselves
#: (:class:`~ensemble_dask.consensus.bce.EmptyRowsWarning`), or that read the features too (GBCE)
_OWN_EMPTY_ROWS = ("bce", "gbce", "mm")


def _unlabelled_rows(store):
    """A boolean per row: no base clustering labels it (read a block of rows at a time)."""
    labels = store["labels"]
    n = labels.shape[0]
    step = max(1, int(labels.chunks[0]))
    empty = np.zeros(n, dtype=bool)
    for r0 in range(0, n, step):
        empty[r0 : r0 + step] = (np.asarray(labels[r0 : r0 + step]) < 0).all(axis=1)
    return empty


def _place_unlabelled(est, empty):
    """Give the rows in no base clustering the clusters' shares of the other rows (the guess that knows
    nothing of a row: the largest cluster, with the uncertainty of the shares), and warn. A pair method left
    them at its start, a label method at an arbitrary cluster, each with uncertainty 0."""
    from ..consensus._common.base import normalized_entropy

    m, n = int(empty.sum()), empty.shape[0]
    if m == 0 or m == n:
        return
    Y = np.array(est.memberships_, dtype=np.float64)
    share = Y[~empty].mean(axis=0)
    share /= share.sum()
    Y[empty] = share
    k, u = int(np.argmax(share)), float(normalized_entropy(share[None, :])[0])
    labels = np.array(est.labels_, dtype=np.int64)
    labels[empty] = k
    uncertainty = np.array(est.uncertainty_, dtype=np.float64)
    uncertainty[empty] = u  # (the other rows' are the method's)
    est.memberships_, est.labels_, est.uncertainty_ = Y, labels, uncertainty
    est.effective_k_ = int(np.unique(labels).size)
    warnings.warn(
        f"{m} of {n} rows are in no base clustering: they get the clusters' shares of the other rows "
        f"(cluster {k}, uncertainty {u:.2f}). More base clusterings or a higher rate "
        "cover them; predict labels them from their features",
        UnlabelledRowsWarning,
        stacklevel=3,
    )


def _inputs(store, method, params=None):
    fits_on = registry.get(method).fits_on
    if method == "auto":  # it reads the pairs when a candidate fits on them
        from ..consensus.selection import CANDIDATES, resolve

        names = (params or {}).get("candidates", CANDIDATES)
        names = [names] if isinstance(names, str) else names  # one name, as AutoConsensus takes it
        on_pairs = any(registry.get(resolve(nm)[0]).fits_on == "pairs" for nm in names)
        fits_on = "labels+pairs" if on_pairs else "labels"
    if fits_on == "pairs":
        return [store.stage_hash("coassoc")]
    hashes = [store.stage_hash("generate")]
    if fits_on == "labels+X":
        hashes.append(store.stage_hash("ingest"))
    if fits_on == "labels+pairs":
        hashes.append(store.stage_hash("coassoc"))
    return hashes


def _labels_bytes(store):
    return 4 * int(np.prod(store["labels"].shape))


def uses_cluster(store, name, params):
    """Whether the workflow entry ``name: params`` would fit on the cluster's workers (BCE and KCC on
    labels larger than :data:`DASK_LABELS_BYTES` do, and PCC and PPC take their ``init: auto`` start there;
    every other method fits in this process)."""
    method, params = resolve_method(name, params)
    entry = registry.get(method)
    if "labels" not in store or not (
        entry.row_blocks or params.get("init", "auto") == "auto" and entry.starts
    ):
        return False
    return _labels_bytes(store) > DASK_LABELS_BYTES


def _fit_on_cluster(store, method, kwargs, client):
    """BCE or KCC with the row-level work on the workers, each reading its own row blocks of labels from the
    store: nothing of ``n x N`` size comes to this process (only the ``n``-row results)."""
    url, options = f"{store.url}/labels", store.storage_options or None
    if method == "kcc":
        from ..rowblocks.kcc import fit_kcc_dask

        logger.info(
            "kcc: labels of %d bytes, Lloyd assignment on the cluster's row blocks", _labels_bytes(store)
        )
        return fit_kcc_dask(url, client=client, storage_options=options, **kwargs)
    from ..rowblocks.bce import fit_bce_dask

    kw = dict(kwargs)
    if kw.setdefault("init", "spectral") == "random":  # random starts are a lottery: at least 5 of them
        kw["n_init"] = max(int(kw.get("n_init", 1)), 5)
    logger.info(
        "bce: labels of %d bytes, E-step on the cluster's row blocks, %d %s start(s)",
        _labels_bytes(store),
        kw.get("n_init", 1),
        "random" if kw["init"] == "random" else f"{kw['init']} seeded (KCC on the blocks)",
    )
    return fit_bce_dask(url, client=client, storage_options=options, **kw)


def _fit(store, method, kwargs, client):
    """The fitted estimator of ``method`` with parameters ``kwargs`` on the store's data."""
    if method == "auto":  # each candidate fitted as the stage fits it alone

        def fit_candidate(name, cand, params):
            logger.info("auto: fitting %s", name)
            return _fit(store, cand, check_consensus_params(name, params)[1], client)

        return _estimator(method, kwargs).fit(store["labels"], fit_candidate=fit_candidate)
    params = _estimator_params(method, kwargs)
    if params is not kwargs:  # init: auto
        starts = _label_starts(store, kwargs["n_clusters"], kwargs.get("random_state"), client)
        params = {**params, "init": "random" if starts is None else starts}
    est = _estimator(method, params)
    entry = registry.get(method)
    _check_ensemble_range(store, largest_k(kwargs.get("n_clusters"), store.n))
    if entry.fits_on == "pairs":
        from ..coassoc.csr import StoredPairs, read_pair_fractions
        from ..consensus._common.base import pair_data_from_fractions

        nnz = int(store.group["pairs/indices"].shape[0]) if "pairs/indices" in store.group else 0
        if entry.starts and PAIR_BYTES * nnz > PAIRS_IN_MEMORY_BYTES:
            logger.info("%s: %d stored pair entries, read a block of rows at a time", method, nnz)
            pairs = StoredPairs(store.group)
        else:
            # c/N and N read chunk by chunk (the counts are never all in memory next to them); pairs never
            # co-present in a clustering (possible with subsamples) carry no evidence and are left out
            pairs = pair_data_from_fractions(*read_pair_fractions(store.group))
        strategy = store.group["pairs"].attrs.get("strategy") if "pairs" in store.group else None
        _check_pairs_per_point(pairs, kwargs.get("n_clusters"), strategy)
        try:
            return est.fit(pairs)
        finally:
            if isinstance(pairs, StoredPairs):
                pairs.close()  # its local copy of remote pairs, if any
    if entry.row_blocks and client is not None and _labels_bytes(store) > DASK_LABELS_BYTES:
        return _fit_on_cluster(store, method, kwargs, client)
    labels = store["labels"][:]
    if entry.fits_on == "labels+X":
        return est.fit(labels, store["X"][:])
    return est.fit(labels)


def consensus_stage(store: RunStore, name, *, seed=0, client=None, progress=False, **params):
    """Run consensus method ``name`` on ``store`` unless its record is up to date.

    With a ``client`` and labels larger than :data:`DASK_LABELS_BYTES`, BCE's E-step
    (:func:`~ensemble_dask.rowblocks.bce.fit_bce_dask`: the seeded start is a KCC partition computed
    on the blocks; ``init: random`` takes at least 5 random starts) and KCC's Lloyd assignment
    (:func:`~ensemble_dask.rowblocks.kcc.fit_kcc_dask`, the in-memory fit's starts) run on the cluster's
    workers on row blocks of ``labels``; everything else runs in this process. ``progress``: a line on a
    terminal counts the fit's time (:func:`~ensemble_dask.runtime.progress.elapsed_line`).

    Returns
    -------
    dict
        The method's entry of ``report/metrics.json``: ``H``, ``ARI``, ``NMI`` (when the store
        has ``y_true``), ``effective_k``, ``seconds``, ``objective``.
    """
    if not isinstance(name, str) or not re.fullmatch(r"[A-Za-z0-9][A-Za-z0-9._-]*", name):
        raise InputError(
            f"a consensus result's name is a plain name (letters, digits, '.', '_', '-'; no '/' or '..'); "
            f"got {name!r}"
        )
    method, kwargs = check_consensus_params(name, params, seed=seed)
    stage = f"consensus/{name}"
    inputs = _inputs(store, method, kwargs)
    record = {"method": method, **kwargs}
    if registry.get(method).hbgf_start and kwargs.get("init") in (None, "auto"):
        record["starts"] = STARTS_TAG  # a record of the former default starts is then stale
    if method in MODEL_KEPT:
        record["model"] = MODEL_KEPT[method]  # a result from before its model was kept is then stale
    if store.is_complete(stage, record, inputs):
        logger.info("%s: up to date, skipped", stage)
        return _metrics(store, name)
    # fit first: bad parameters or data fail before the previous result is unmarked
    t0 = time.perf_counter()
    with warnings.catch_warnings(record=True) as caught:  # recorded with the result, and logged
        warnings.simplefilter("always")
        with elapsed_line(f"consensus {name}", progress=progress):
            est = _fit(store, method, kwargs, client)
        if getattr(est, "chosen_", method) not in _OWN_EMPTY_ROWS:
            _place_unlabelled(est, _unlabelled_rows(store))
        _check_clusters_used(est)
    seconds = time.perf_counter() - t0
    notes = list(dict.fromkeys(f"{w.category.__name__}: {w.message}" for w in caught))  # once each
    for note in notes:
        logger.warning("%s: %s", stage, note)
    with store.stage(stage, record, inputs, writes=(stage,)):
        Y = np.asarray(est.memberships_, dtype=np.float32)
        n, k = Y.shape
        group = store.group.require_group("consensus")
        if name in group:
            del group[name]
        out = group.create_group(name)
        rows = max(1, min(n, 2**22 // max(k, 1)))
        out.create_array("Y", shape=Y.shape, chunks=(rows, k), dtype="float32")[:] = Y
        out.create_array("labels", shape=(n,), chunks=(rows,), dtype="int32")[:] = est.labels_.astype(
            np.int32
        )
        out.create_array("uncertainty", shape=(n,), chunks=(rows,), dtype="float32")[:] = est.uncertainty_
        chosen = getattr(est, "chosen_", None)  # auto: the candidate kept, whose model is kept
        model, model_method = (est.estimator_, resolve_method(chosen, {})[0]) if chosen else (est, method)
        write_model(out, model, model_method)
        objective = getattr(model, "objective_", getattr(model, "lower_bound_", None))
        converged = getattr(model, "converged_", None)  # None: a method that does not iterate
        converged = None if converged is None else bool(converged)
        metrics = {"effective_k": int(est.effective_k_), "seconds": round(seconds, 3), "converged": converged}
        if notes:  # in metrics.json and the report's JSON too, not only in the log
            metrics["warnings"] = notes
        if objective is not None:
            metrics["objective"] = float(objective)
        if chosen:  # auto: which result it kept, and every candidate's score
            metrics["chosen"] = chosen
            metrics["anmi"] = {k: round(v, 6) for k, v in est.scores_.items()}
        elif getattr(est, "candidate_", None):  # graph: the candidate partition kept, every one's cut
            metrics["candidate"] = est.candidate_
            metrics["cuts"] = {k: round(v, 6) for k, v in est.cuts_.items()}
        elif getattr(est, "anmi_", None):  # GKCC: Algorithm 1's partition or KCC's, and both scores
            metrics["kept"] = est.start_
            metrics["anmi"] = {k: round(v, 6) for k, v in est.anmi_.items()}
        metrics.update(k_metrics(est))  # K chosen: which, by what, and every K's scores
        if "y_true" in store:
            from ..metrics import partition_scores  # scikit-learn: imported only when a result is scored

            metrics = {**partition_scores(est.labels_, store["y_true"][:]), **metrics}
        trace = getattr(model, "objective_trace_", getattr(model, "lower_bound_trace_", None))
        trace = [] if trace is None else np.asarray(trace).tolist()[-_TRACE_MAX:]
        out.attrs.update(
            {
                "method": method,
                "params": kwargs,
                "n_iter": int(getattr(model, "n_iter_", 0)),
                "objective_trace": trace,
                "metrics": metrics,
                "converged": converged,
                "warnings": notes,
                **({"chosen": chosen} if chosen else {}),
            }
        )
    return metrics


def _metrics(store, name):
    """The metrics of the result ``name``. One fitted on imported labels before ``ingest`` brought ``y_true``
    (which leaves it up to date) was scored against none: it is scored here, as its fit would have."""
    metrics = store[f"consensus/{name}"].attrs["metrics"]
    if "ARI" in metrics or "y_true" not in store:
        return metrics
    from ..metrics import partition_scores

    return {**partition_scores(store[f"consensus/{name}/labels"][:], store["y_true"][:]), **metrics}


def current_results(store):
    """``{name: metrics}`` of the consensus results that are complete and up to date with their inputs."""
    out = {}
    if "consensus" not in store:
        return out
    for name in sorted(store["consensus"].group_keys()):
        rec = store.record(f"consensus/{name}") or {}
        if not rec.get("complete"):
            continue
        try:
            current = _inputs(store, rec["params"]["method"], rec["params"])
        except StageContentError:  # an input that is not what its record says: named, never left out
            raise
        except InputError:
            continue
        if rec.get("inputs") == current:
            out[name] = _metrics(store, name)
    return out

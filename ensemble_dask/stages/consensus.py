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

import logging
import time

import numpy as np

from .._validation import InputError, stage_seed
from ..io.store import RunStore
from ..metrics import partition_scores

__all__ = ["METHODS", "resolve_method", "consensus_stage", "current_results"]

logger = logging.getLogger(__name__)

#: method -> what it fits on
METHODS = {"pcc": "pairs", "ppc": "pairs", "bce": "labels", "mm": "labels", "gbce": "labels+X"}

_TRACE_MAX = 2000  # objective trace points kept in the attributes


def resolve_method(name, params):
    """``(method, params)`` for the workflow entry ``name: params``."""
    params = dict(params or {})
    method = params.pop("method", None)
    if method is None:
        method = name.split("-")[0]
        if method == "pcc" and name in ("pcc-kl", "pcc-l2"):
            params.setdefault("divergence", name[4:])
    if method not in METHODS:
        raise InputError(f"consensus method {name!r}: unknown method {method!r}; known: {sorted(METHODS)}")
    return method, params


def _estimator(method, params):
    if method in ("pcc", "ppc"):
        from ..consensus.pcc import PCC, PPC

        cls = PCC if method == "pcc" else PPC
    else:
        from ..consensus import bce

        cls = {"bce": bce.BCE, "mm": bce.MM, "gbce": bce.GBCE}[method]
    try:
        return cls(**params)
    except TypeError as exc:
        raise InputError(f"consensus method {method!r}: {exc}") from exc


def _inputs(store, method):
    if METHODS[method] == "pairs":
        return [store.stage_hash("coassoc")]
    hashes = [store.stage_hash("generate")]
    if METHODS[method] == "labels+X":
        hashes.append(store.stage_hash("ingest"))
    return hashes


def _fit(store, method, kwargs, client):
    """The fitted estimator of ``method`` with parameters ``kwargs`` on the store's data."""
    est = _estimator(method, kwargs)
    if METHODS[method] == "pairs":
        from ..coassoc import read_pairs

        # pairs never co-present in a clustering (possible with subsamples) carry no evidence
        return est.fit(read_pairs(store.group).observed())
    if method == "bce" and client is not None:
        # the E-step runs on the workers, each reading its own row blocks of labels from the store
        from ..federated.dask import fit_bce_dask

        return fit_bce_dask(
            f"{store.url}/labels", client=client, storage_options=store.storage_options or None, **kwargs
        )
    labels = store["labels"][:]
    if method == "gbce":
        return est.fit(labels, store["X"][:])
    return est.fit(labels)


def consensus_stage(store: RunStore, name, *, seed=0, client=None, **params):
    """Run consensus method ``name`` on ``store`` unless its record is up to date.

    With a ``client``, BCE's E-step runs on the cluster's workers on row blocks of ``labels``
    (:func:`~ensemble_dask.federated.dask.fit_bce_dask`); the other methods run in this process.

    Returns
    -------
    dict
        The method's entry of ``report/metrics.json``: ``H``, ``ARI``, ``NMI`` (when the store
        has ``y_true``), ``effective_k``, ``seconds``, ``objective``.
    """
    method, kwargs = resolve_method(name, params)
    kwargs.setdefault("random_state", int(stage_seed(seed, "consensus").generate_state(1)[0]))
    stage = f"consensus/{name}"
    inputs = _inputs(store, method)
    record = {"method": method, **kwargs}
    if store.is_complete(stage, record, inputs):
        logger.info("%s: up to date, skipped", stage)
        return store[stage].attrs["metrics"]
    # fit first: bad parameters or data fail before the previous result is unmarked
    t0 = time.perf_counter()
    est = _fit(store, method, kwargs, client)
    seconds = time.perf_counter() - t0
    with store.stage(stage, record, inputs):
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
        if hasattr(est, "alpha_"):  # BCE / GBCE: the Dirichlet prior and per-clustering label distributions
            out.create_array("alpha", data=np.asarray(est.alpha_, dtype=np.float64))
        if hasattr(est, "beta_"):
            beta = [np.asarray(b, dtype=np.float64) for b in est.beta_]
            out.create_array("beta", data=np.concatenate(beta, axis=1))
            out["beta"].attrs["offsets"] = np.cumsum([0] + [b.shape[1] for b in beta]).tolist()
        objective = getattr(est, "objective_", getattr(est, "lower_bound_", None))
        metrics = {"effective_k": int(est.effective_k_), "seconds": round(seconds, 3)}
        if objective is not None:
            metrics["objective"] = float(objective)
        if "y_true" in store:
            metrics = {**partition_scores(est.labels_, store["y_true"][:]), **metrics}
        trace = getattr(est, "objective_trace_", getattr(est, "lower_bound_trace_", None))
        trace = [] if trace is None else np.asarray(trace).tolist()[-_TRACE_MAX:]
        out.attrs.update(
            {
                "method": method,
                "params": kwargs,
                "n_iter": int(getattr(est, "n_iter_", 0)),
                "objective_trace": trace,
                "metrics": metrics,
                "converged": bool(getattr(est, "converged_", True)),
            }
        )
    return metrics


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
            current = _inputs(store, rec["params"]["method"])
        except InputError:
            continue
        if rec.get("inputs") == current:
            out[name] = store[f"consensus/{name}"].attrs["metrics"]
    return out

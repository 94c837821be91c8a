"""Base clusterers (in memory, NumPy and scikit-learn/SciPy only) and the ensemble plans.

A *plan* is the list of per-clustering specifications of an ensemble: algorithm, number of
clusters, subsample seed and rate. Each clustering u draws everything from its own
``SeedSequence`` child, spawned from one run seed, so its labels do not depend on how many
workers run the ensemble or in which order.

Registry (``ALGORITHMS``): ``kmeans``; agglomerative ``single``, ``average``, ``complete``,
``ward``, ``centroid`` (SciPy's hierarchical clustering, O(m^2) memory, so limited to
subsamples of ``max_samples`` points); ``spectral`` (scikit-learn, nearest-neighbour affinity).
Ensemble types of Lourenço et al. 2015 Sect. 7.2: ``type1`` = k-means with a random k in [k_min, k_max];
``type2`` = a mix of the registry's algorithms with varying k, drawing only among those whose
``max_samples`` allows the subsample size.
"""

from __future__ import annotations

import inspect
import math
import warnings
from dataclasses import dataclass

import numpy as np

from .._validation import InputError, check_choice, check_int, check_rate, shown, stage_seed

__all__ = [
    "ALGORITHMS",
    "ENSEMBLE_TYPES",
    "Algorithm",
    "plan_ensemble",
    "run_clustering",
    "subsample",
    "subsample_of",
]


@dataclass(frozen=True)
class Algorithm:
    """A registered base clusterer: ``fit(X, k, seed) -> labels`` and a subsample size limit."""

    name: str
    fit: object
    max_samples: int | None = None


def _kmeans(x, k, seed, overwrite=False):
    from sklearn.cluster import KMeans

    # copy_x=False centres ``x`` in place (and restores it) instead of centring a copy: the same labels
    km = KMeans(n_clusters=k, n_init=1, init="k-means++", random_state=seed, copy_x=not overwrite)
    return km.fit(x).labels_


def _hierarchical(method):
    def fit(x, k, seed):
        from scipy.cluster.hierarchy import fcluster, linkage

        z = linkage(np.asarray(x, dtype=np.float64), method=method)
        return fcluster(z, t=k, criterion="maxclust") - 1

    return fit


def _spectral(x, k, seed):
    from sklearn.cluster import SpectralClustering

    nn = min(10, len(x) - 1)
    model = SpectralClustering(
        n_clusters=k,
        affinity="nearest_neighbors",
        n_neighbors=nn,
        assign_labels="cluster_qr",
        random_state=seed,
    )
    with warnings.catch_warnings():
        # well-separated subsamples give a disconnected k-NN graph; the embedding is still usable
        warnings.filterwarnings("ignore", message="Graph is not fully connected")
        return model.fit(x).labels_


ALGORITHMS = {
    "kmeans": Algorithm("kmeans", _kmeans),
    **{
        m: Algorithm(m, _hierarchical(m), max_samples=10_000)
        for m in ("single", "average", "complete", "ward", "centroid")
    },
    "spectral": Algorithm("spectral", _spectral, max_samples=10_000),
}
ENSEMBLE_TYPES = ("type1", "type2")


def subsample_size(n, rate, max_rows=None):
    """The points of a subsample of ``n`` at ``rate``: ``round(rate * n)``, at least 1, at most ``max_rows``
    (None: no limit)."""
    m = max(1, int(round(rate * n)))
    return m if max_rows is None else min(m, int(max_rows))


def subsample(n, rate, rng, max_rows=None):
    """Sorted indices of a subsample of :func:`subsample_size` of ``n`` points (all when that is ``n``)."""
    m = subsample_size(n, rate, max_rows)
    if m >= n:
        return np.arange(n, dtype=np.int64)
    return np.sort(rng.choice(n, size=m, replace=False)).astype(np.int64)


#: ``k_max="sqrt"`` is the square root of the rows up to this many rows (k at most 141): the ``graph``
#: consensus, which takes such ensembles, builds its graph on a sample of as many rows (its ``sample_size``),
#: and a k-means's cost grows with k
SQRT_ROWS = 20_000


def resolve_k_max(n, k_min, k_max, rate=1.0, max_rows=None):
    """``k_max`` as an int: ``"sqrt"`` is ``max(k_min, floor(sqrt(min(n, SQRT_ROWS))))``, at most a
    subsample's points."""
    if isinstance(k_max, str) and k_max != "sqrt":
        raise InputError(f"The 'k_max' parameter must be an integer or 'sqrt'; got {shown(k_max)}")
    if k_max == "sqrt":
        k_max = min(max(k_min, math.isqrt(min(n, SQRT_ROWS))), subsample_size(n, rate, max_rows))
    return check_int(k_max, "k_max", min_value=2)


def plan_ensemble(
    n,
    n_clusterings,
    *,
    ensemble="type1",
    k_min=2,
    k_max=10,
    rate=1.0,
    algorithms=None,
    seed=0,
    start=0,
    extend=False,
    max_rows=None,
):
    """Specifications of base clusterings ``start .. n_clusterings - 1`` of an ensemble.

    Parameters
    ----------
    n : int
        Number of points.
    n_clusterings : int
        Size N of the whole ensemble.
    ensemble : {"type1", "type2"}, default="type1"
    k_min, k_max : int, default=2, 10
        Each clustering's k is drawn uniformly in [k_min, k_max]; ``k_max="sqrt"`` is
        ``max(k_min, floor(sqrt(min(n, 20000))))`` (at most the subsample's points; :data:`SQRT_ROWS`): many
        small clusters, as in Fred & Jain's evidence accumulation.
    rate : float in (0, 1], default=1.0
        Subsample rate; points outside a clustering's subsample get the label -1 (unless ``extend``).
    algorithms : list of str, default=None
        Algorithms a ``type2`` ensemble draws from (all registered ones by default).
    seed : int or SeedSequence, default=0
        Run seed; clustering u uses child u of ``stage_seed(seed, "generate").spawn``.
    start : int, default=0
        First clustering to plan (to extend an ensemble with new columns).
    extend : bool, default=False
        Every point outside a clustering's subsample is labelled by the nearest centre (mean) of that
        clustering's clusters, instead of -1.
    max_rows : int or None, default=None
        A subsample holds at most this many points (the rate's share of a larger data set is cut to it):
        a base clustering's cost then stops growing with the rows (those outside are labelled by
        ``extend``, or -1).

    Returns
    -------
    list of dict
        ``{"index", "algorithm", "k", "seed", "rate", "m"}`` per clustering (and ``"extend": True``,
        ``"max_rows"`` when given).
    """
    n = check_int(n, "n", min_value=2)
    n_clusterings = check_int(n_clusterings, "n_clusterings", min_value=1)
    check_choice(ensemble, "ensemble", ENSEMBLE_TYPES)
    rate = check_rate(rate, "rate")
    if not isinstance(extend, bool | np.bool_):
        raise InputError(f"The 'extend' parameter takes true or false; got {shown(extend)}")
    if max_rows is not None:
        max_rows = check_int(max_rows, "max_rows", min_value=2)
    k_min = check_int(k_min, "k_min", min_value=2)
    k_max = resolve_k_max(n, k_min, k_max, rate, max_rows)
    if k_min > k_max:
        raise InputError(f"k_min={k_min} must be <= k_max={k_max}")
    m = subsample_size(n, rate, max_rows)
    if k_max > m:
        cut = "" if max_rows is None else f", max_rows={max_rows}"
        raise InputError(f"k_max={k_max} is larger than a subsample of {m} points (n={n}, rate={rate}{cut})")
    for name in algorithms or []:
        if not isinstance(name, str) or name not in ALGORITHMS:
            raise InputError(
                f"The 'algorithms' parameter takes names among {sorted(ALGORITHMS)}; got {shown(name)}"
            )
    if ensemble == "type1":
        if algorithms is not None and list(algorithms) != ["kmeans"]:
            raise InputError(
                "The 'algorithms' parameter applies to ensemble='type2' (type1 is k-means); "
                f"got {list(algorithms)}"
            )
        pool = ["kmeans"]
    else:
        pool = list(ALGORITHMS) if algorithms is None else list(algorithms)
    allowed = [a for a in pool if ALGORITHMS[a].max_samples is None or m <= ALGORITHMS[a].max_samples]
    if not allowed:
        raise InputError(
            f"none of the algorithms {pool} can cluster a subsample of {m} points; "
            "add 'kmeans' or lower the rate"
        )
    root = stage_seed(seed, "generate")
    children = root.spawn(n_clusterings)
    plans = []
    for u in range(start, n_clusterings):
        rng = np.random.default_rng(children[u])
        algo = allowed[int(rng.integers(len(allowed)))] if len(allowed) > 1 else allowed[0]
        plans.append(
            {
                "index": u,
                "algorithm": algo,
                "k": int(rng.integers(k_min, k_max + 1)),
                "seed": int(rng.integers(2**31 - 1)),
                "rate": rate,
                "m": m,
                **({"extend": True} if extend else {}),
                **({"max_rows": max_rows} if max_rows is not None else {}),
            }
        )
    return plans


def run_clustering(x_sub, spec, *, overwrite_x=False):
    """Cluster the subsample rows ``x_sub`` as ``spec`` says; labels 0..k'-1 (int32).

    ``overwrite_x``: ``x_sub`` is the caller's own copy, which a clusterer may use as its work space
    (k-means then centres it in place instead of a copy of it: one subsample less in memory).

    The clusterer runs single-threaded (BLAS and OpenMP pools limited to one thread): parallelism
    comes from running clusterings side by side, and the floating-point reductions, hence the
    labels, are then the same on every machine and with any number of workers.

    Side by side on threads of one fresh process (a Dask worker of several threads), the clusterers'
    modules are imported by one thread at a time (:func:`~ensemble_dask.runtime.imports.import_once`): a
    k-means importing scikit-learn, which imports SciPy, beside a hierarchical clustering importing
    ``scipy.cluster.hierarchy`` could be handed a half-initialised SciPy.
    """
    from threadpoolctl import threadpool_limits

    from ..runtime.imports import import_once

    import_once("scipy.cluster.hierarchy", "sklearn.cluster")

    algo = ALGORITHMS.get(spec["algorithm"])
    if algo is None:
        raise InputError(f"unknown algorithm {spec['algorithm']!r}; known: {sorted(ALGORITHMS)}")
    if spec["k"] > len(x_sub):
        raise InputError(f"k={spec['k']} is larger than the subsample of {len(x_sub)} points")
    kw = {"overwrite": True} if overwrite_x and "overwrite" in inspect.signature(algo.fit).parameters else {}
    with threadpool_limits(1):
        raw = np.asarray(algo.fit(x_sub, int(spec["k"]), int(spec["seed"]), **kw))
    _, labels = np.unique(raw, return_inverse=True)
    return labels.astype(np.int32)


def subsample_of(spec, n):
    """The subsample indices of clustering ``spec`` (drawn from its own seed)."""
    rng = np.random.default_rng(np.random.SeedSequence(spec["seed"], spawn_key=(0,)))
    return subsample(n, spec["rate"], rng, spec.get("max_rows"))

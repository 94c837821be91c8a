"""Row-distributed KCC across sites (Li & Liu 2018) with secure aggregation: ``federated: method: kcc``.

The same federation as row-distributed BCE (:mod:`.bce`): each site's rows stay with its own agent
(:mod:`~ensemble_dask.federated.site.agent`), and the coordinator obtains only secure sums
(:class:`~.link.Federation`):

1. each site reads its rows (only their counts come back); the category space of each clustering
   comes from the secure sums of :mod:`.bce` (label range, then per-label counts);
2. one secure sum of the per-category counts gives the pooled label distribution (the prior of
   empty centroid blocks and the scale of ``tol``);
3. the start (``init="clusters"``, see :class:`~ensemble_dask.consensus.KCC`): the coordinator
   draws ``K`` categories from the pooled counts with the run's seed, and one secure sum of the
   sites' label counts over the rows carrying each of them gives the ``K`` starting centroids. KCC's
   ``'k-means++'``, ``'random'`` and ``'spectral'`` starts pick individual rows and are refused;
4. per Lloyd iteration the coordinator sends the centroids; each site assigns its rows (the
   assignment stays in its session) and returns its statistics - per cluster, the counts of each
   clustering's labels, the cluster sizes, the squared error and the number of rows that changed
   cluster - masked; the coordinator decodes their total and updates the centroids with
   :func:`~ensemble_dask.consensus.kcc._kcc.centers_from_stats`;
5. each site writes its rows' memberships to its own ``output``; with reference labels at every
   site, the contingency tables of its consensus labels join one more secure sum (H, ARI, NMI).

**Empty clusters.** In memory, KCC reseeds an empty cluster at the rows farthest from their
centroids; those are individual rows, so here no site sends any (``n_far = 0``) and an empty
cluster's centroid becomes the pooled label distribution (the prior), which this driver takes from no
single row. (That is what an honest coordinator sends. A site cannot tell honest centroids from crafted
ones, and crafted ones turn the sums into counts of the federation's rows equal to a label tuple: the
threat model in ``docs/guide/federation.md`` says what the sums reveal.) As long as
no cluster empties - the usual case - the fit therefore equals ``KCC(n_clusters, init="clusters",
random_state=seed, ...)`` on the pooled rows (counts are integers, summed exactly; the squared
error up to floating-point summation order), with the same determinism for a seed and for any cut
of the rows into sites.

``mode="plain"`` sends the statistics in clear (the baseline that measures the cost of masking).
KCC runs are not checkpointed: a Lloyd iteration is one pass over the rows, and a rerun starts over.
"""

from __future__ import annotations

import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..._validation import InputError, check_int, check_random_state, convergence_warning
from ...consensus._common.encoding import Encoding, check_encoding
from ...consensus.kcc import KCC
from ...consensus.kcc._kcc import kcc_starts
from .bce import (
    _category_space,
    _check_sites,
    federation_scores,
    joined_sites,
    over_survivors,
)

__all__ = ["FederatedKCCResult", "run_federated_kcc"]


# --------------------------------------------------------------------------- coordinator


def pooled_sse(counts, MT, sq, offsets):
    """The sum of the rows' squared distances to their centroids ``MT`` (``G x K``, block norms ``sq``) from
    the clusters' label counts alone: a row's observed label ``g`` of clustering ``i`` adds ``1 - 2 MT[g, c]
    + sq[c, i]`` (a missing one nothing), so the sum is ``sum_ci n_ci (1 + sq[c, i]) - 2 sum_cg counts[c, g]
    MT[g, c]`` with ``n_ci`` the rows of cluster ``c`` labelled in clustering ``i``."""
    from ...consensus.kcc._blocks import block_sums

    labelled = block_sums(counts.T, offsets).T  # K x N
    return max(float((labelled * (1.0 + sq)).sum() - 2.0 * (counts * MT.T).sum()), 0.0)


class SiteSums:
    """Backend of :func:`~ensemble_dask.consensus.kcc._kcc.kcc_starts` over sites: each call is one secure
    sum.

    Offers only the aggregate calls (``sizes``, ``cooccurrence``, ``step``); the row-level ones of
    :class:`~ensemble_dask.consensus.kcc._kcc.LocalBlocks` (``row``, ``pick``, ...) do not exist here.
    Records the objective trace of every start.
    """

    def __init__(self, agg, n_rows, n_clusterings, offsets, progress=None):
        self.agg = agg
        self.n = float(n_rows)
        self.N = int(n_clusterings)
        self.offsets = np.asarray(offsets)
        self.progress = progress
        self.traces = []
        self.seconds = 0.0
        self.n_steps = 0

    def reset(self):
        if self.traces:  # the sites' assignments of the previous start
            self.agg.call("reset", what=f"start {len(self.traces) + 1}")
        self.traces.append([])

    def sizes(self, n_categories):
        vec = self.agg.sum("kcc_sizes", (n_categories,), what="the category-count round")
        return vec[:n_categories], float(vec[n_categories])

    def cooccurrence(self, chosen, n_categories):
        K = len(chosen)
        what = f"the start round of start {len(self.traces) + 1}"
        vec = self.agg.sum("kcc_cooccurrence", (np.asarray(chosen, dtype=np.int64), n_categories), what=what)
        return vec[: K * n_categories].reshape(K, n_categories), vec[K * n_categories :]

    def step(self, MT, sq, n_far):  # the Lloyd loop's backend interface: each site computes sq itself
        G, K = MT.shape
        trace = self.traces[-1]
        what = f"Lloyd iteration {len(trace) + 1}" + (
            f" of start {len(self.traces)}" if len(self.traces) > 1 else ""
        )
        t0 = time.perf_counter()
        vec = self.agg.sum("kcc_step", (MT,), what=what)
        self.seconds += time.perf_counter() - t0
        self.n_steps += 1
        counts = vec[: K * G].reshape(K, G)
        stats = {
            "counts": counts,
            "sizes": vec[K * G : K * G + K],
            "sse": pooled_sse(counts, MT, sq, self.offsets),
            "changed": float(np.rint(vec[K * G + K])),  # a count: exact up to the fixed point's 2**-64
            "far_d": np.empty(0),
            "far_rows": np.zeros((0, self.N), dtype=np.int32),  # no site sends a row of its own
        }
        trace.append(stats["sse"] / self.n**2)
        if self.progress is not None:
            self.progress(len(trace) - 1, trace[-1])
        return stats


@dataclass
class FederatedKCCResult:
    """Outcome of a federated KCC fit: what the coordinator holds (centroids, totals, timings)."""

    cluster_centers_: list
    categories_: list
    objective_: float
    inertia_: float
    objective_trace_: np.ndarray
    n_iter_: int
    converged_: bool
    mode: str
    site_names: list
    rows_per_site: dict
    seconds: float
    seconds_per_iteration: float
    scores: dict | None = None
    method: str = "kcc"
    dropped: list = field(default_factory=list)


def run_federated_kcc(
    sites,
    n_clusters,
    context,
    *,
    mode="secure",
    init="clusters",
    n_init=1,
    max_iter=300,
    tol=1e-4,
    random_state=None,
    n_labels=None,
    timeout=120.0,
    progress=None,
):
    """Row-distributed KCC across site agents; the coordinator sees only secure sums.

    Parameters
    ----------
    sites : list of dict
        As for :func:`~.bce.run_federated_bce`: ``name`` and ``address`` of each site agent.
    n_clusters : int
    context : ssl.SSLContext
        The coordinator's TLS client context.
    mode : {"secure", "plain"}, default="secure"
    init : {"clusters"} or array of shape (K, G), default="clusters"
        The start; KCC's ``'k-means++'``, ``'random'`` and ``'spectral'`` need individual rows and are
        refused.
    n_init, max_iter, tol, random_state
        As in :class:`~ensemble_dask.consensus.KCC`.
    n_labels : int, default=None
        Labels are ``0 .. n_labels - 1`` in every clustering (None: bounded by a secure sum).
    timeout, progress
        As for :func:`~.bce.run_federated_bce` (``progress(iteration, objective)`` per Lloyd step).

    Returns
    -------
    FederatedKCCResult
        Equal to ``KCC(n_clusters, init="clusters", ...)`` on the pooled rows of the sites that took part
        to the end, while no cluster empties (see the module's docstring).
    """
    t_start = time.perf_counter()
    if mode not in ("secure", "plain"):
        raise InputError(f"The 'mode' parameter must be one of ['plain', 'secure']; got {mode!r}")
    if isinstance(init, str) and init != "clusters":
        raise InputError(
            f"The 'init' parameter of federated KCC must be 'clusters' or an array; got {init!r} "
            "('k-means++', 'random' and 'spectral' pick individual rows, which no site sends)"
        )
    sites = _check_sites(sites)
    est = KCC(n_clusters, init=init, n_init=n_init, max_iter=max_iter, tol=tol, random_state=random_state)
    est._validate_params()
    if n_labels is not None:
        n_labels = check_int(n_labels, "n_labels", min_value=1)

    def fit(agg):
        N, rows_per_site = joined_sites(agg)
        n = sum(rows_per_site.values())
        categories = _category_space(agg, n_labels, N)
        enc = Encoding.from_categories(categories)
        check_encoding(enc, (n, N))
        est._check_data(n, enc.n_categories)
        agg.call("prepare", (categories, est._k), what="preparing the sites' rows")
        backend = SiteSums(agg, n, N, enc.offsets, progress)
        (MT, sse, n_iter, converged), n_weight = kcc_starts(
            est, backend, enc, check_random_state(random_state)
        )
        # the best start is the one whose last step gave its squared error
        trace = next((t for t in backend.traces if t and t[-1] == sse / n_weight**2), backend.traces[-1])
        agg.call("finish", (MT,), what="writing memberships")
        scores = federation_scores(agg, est._k)
        return MT, sse, n_iter, converged, n_weight, trace, enc, categories, rows_per_site, scores, backend

    out, dropped = over_survivors(fit, sites, "kcc", context, mode, timeout)
    MT, sse, n_iter, converged, n_weight, trace, enc, categories, rows_per_site, scores, backend = out
    if not converged:
        warnings.warn(
            f"federated KCC did not converge in max_iter={est.max_iter} Lloyd iterations "
            "(centroid shift above tol)",
            convergence_warning(),
            stacklevel=2,
        )
    offsets = enc.offsets
    return FederatedKCCResult(
        cluster_centers_=[
            np.ascontiguousarray(MT[a:b].T) for a, b in zip(offsets[:-1], offsets[1:], strict=True)
        ],
        categories_=categories,
        objective_=sse / n_weight**2,
        inertia_=sse,
        objective_trace_=np.asarray(trace),
        n_iter_=int(n_iter),
        converged_=bool(converged),
        mode=mode,
        site_names=sorted(rows_per_site),
        rows_per_site=rows_per_site,
        seconds=time.perf_counter() - t_start,
        seconds_per_iteration=backend.seconds / backend.n_steps if backend.n_steps else float("nan"),
        scores=scores,
        dropped=dropped,
    )

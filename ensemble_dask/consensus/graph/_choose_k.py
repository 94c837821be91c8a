"""How many clusters: the graph consensus at every K of a range, on one graph, each K scored.

The sampled rows' co-association graph is built once (:meth:`GraphConsensus._graph`); each candidate partition
is then had at every K at the cost of about one: Genie's merges are one sequence cut at each K
(:func:`~._kernels.genie_merges`), the spectral candidate's embedding is one Lanczos run of ``k_max + 1``
eigenvectors whose first K columns k-means cuts at K. Each K's consensus is the candidate of the smallest
normalised cut, as at a fixed K. The criteria, each computed from that graph, the base labels and pairs of
sampled rows (never an ``n x n`` matrix):

* ``eigengap``: ``lambda_K - lambda_{K+1}`` of ``D^-1/2 A D^-1/2`` on the co-association graph ``A``
  (von Luxburg 2007, "A tutorial on spectral clustering", Statistics and Computing 17(4)): K nearly
  disconnected groups give K eigenvalues near 1. Largest wins.
* ``lifetime``: the range of co-association heights over which Genie's hierarchy of the ``genie-ca`` tree
  keeps K clusters (Fred & Jain 2005, "Combining multiple clusterings using evidence accumulation", IEEE
  TPAMI 27(6): the lifetime criterion of evidence accumulation). Largest wins.
* ``pac``: the proportion of ambiguous clustering (Senbabaoglu, Michailidis & Li 2014, Scientific Reports
  4:6207) of the consensus matrix at K in ConsensusClusterPlus's sense (Monti et al. 2003): the share of
  resampled consensus runs that put a pair together, here each run the ``genie-ca`` consensus of a random
  half of the base clusterings, over uniformly sampled pairs of rows; the share of pairs in ``(0.1, 0.9]``.
  Smallest wins.
* ``stability``: the mean adjusted Rand index between the consensus partitions at K of two disjoint random
  halves of the base clusterings (the same runs as ``pac``). Largest wins.

A tie goes to the smaller K for ``eigengap`` and ``lifetime``; for ``pac`` and ``stability`` the largest K
within 0.01 of the best value wins (:func:`best_k`).
"""

from __future__ import annotations

import numpy as np

from ..._validation import InputError
from .._common.krange import auto_k_max, k_range
from . import _kernels as _k
from ._parts import _embedded_kmeans, _least_cut, _spanning_tree, _spectral_embedding

__all__ = ["CRITERIA", "DEFAULT_CRITERION", "k_range", "auto_k_max", "sweep", "pac", "consensus_cdf"]

#: each criterion, and whether its largest value wins (else its smallest)
CRITERIA = {"eigengap": True, "lifetime": True, "pac": False, "stability": True}
DEFAULT_CRITERION = "stability"
#: the criteria of reproducibility over resampled ensembles, and how far from the best value a larger K is
#: still taken as reproducible as the best (:func:`best_k`)
REPRODUCIBLE = ("pac", "stability")
REPRODUCIBLE_TOL = 0.01
#: the consensus values the CDF is kept at (the report draws it)
CDF_GRID = np.linspace(0.0, 1.0, 21)
#: pairs of sampled rows per row that ``pac`` reads (at most :data:`MAX_PAIRS` in all)
PAIRS_PER_ROW = 20
MAX_PAIRS = 200_000


def pac(co, lo=0.1, hi=0.9):
    """The share of the consensus values ``co`` (pairs' co-clustering shares) in ``(lo, hi]``."""
    co = np.asarray(co)
    return float(np.mean((co > lo) & (co <= hi))) if co.size else 0.0


def consensus_cdf(co, grid=CDF_GRID):
    """The empirical CDF of the consensus values ``co`` at ``grid``."""
    co = np.sort(np.asarray(co, dtype=np.float64))
    return (np.searchsorted(co, grid, side="right") / max(co.size, 1)).tolist()


def _ari(a, b):
    """The adjusted Rand index of two labelings (plain NumPy: the contingency table's pair counts)."""
    n = a.shape[0]
    _, ia = np.unique(a, return_inverse=True)
    _, ib = np.unique(b, return_inverse=True)
    table = np.bincount(ia * (ib.max() + 1) + ib).astype(np.float64)
    pairs = (table * (table - 1)).sum() / 2
    sa = np.bincount(ia).astype(np.float64)
    sb = np.bincount(ib).astype(np.float64)
    pa, pb = (sa * (sa - 1)).sum() / 2, (sb * (sb - 1)).sum() / 2
    total = n * (n - 1) / 2
    expected = pa * pb / total if total else 0.0
    top = (pa + pb) / 2
    return 1.0 if top == expected else float((pairs - expected) / (top - expected))


def _genie_cuts(tree, n, ks, threshold, k_low):
    """The partitions at each K of ``ks`` of Genie's one sequence of merges on ``tree`` ``(u, v, weight)``,
    and the merges' heights (the running maximum of their weights), merged down to ``k_low`` clusters."""
    u, v, w = tree
    order = _k.genie_merges(u, v, n, k_low, float(threshold))
    heights = np.maximum.accumulate(w[order]) if order.size else w[:0]
    return {K: _k.cut(u, v, order[: n - K], n) for K in ks}, heights


def sweep(est, L, Z, ks, cands, rng, n_resamples, criterion):
    """The graph consensus of the sampled rows (base labels ``L``, features ``Z``) at every K of ``ks``
    (increasing), every criterion of :data:`CRITERIA` at each, and the K that ``criterion`` chooses.

    Returns ``(K, reason, partition, kept, cuts, scores, cdfs)``: the K chosen, why (:func:`best_k`), its
    partition; per K, the candidate kept and every candidate's normalised cut, ``{criterion: value}`` and the
    consensus CDF at :data:`CDF_GRID`. The spectral candidate (k-means of its embedding, 10 starts: most of a
    fit's time) is cut at the K chosen only, where every candidate is compared as at a fixed K; at the other
    K the Genie candidates are.
    """
    n, N = L.shape
    g = est._graph(L, Z, cands)
    out = {K: {} for K in ks}
    heights = None
    for name in ("genie-ca", "genie-weighted"):
        if name in cands or name == "genie-ca":  # genie-ca's hierarchy gives the lifetimes
            parts, h = _genie_cuts(_spanning_tree(g.tree_graph(name)), n, ks, est.gini_threshold, ks[0] - 1)
            if name in cands:
                for K in ks:
                    out[K][name] = parts[K]
            if name == "genie-ca":
                heights = h
    seed = int(rng.integers(2**31 - 1))
    values, embedding = _spectral_embedding(g.A.tocsr(), min(ks[-1] + 1, n), seed)
    values = np.r_[values, np.zeros(max(0, ks[-1] + 1 - values.size))]
    scores = {K: {"eigengap": float(values[K - 1] - values[K])} for K in ks}
    for K in ks:  # K clusters from merge n - K to merge n - K + 1 (index n - K - 1 to n - K)
        top = heights[n - K] if n - K < heights.size else heights[-1]
        scores[K]["lifetime"] = float(top - heights[n - K - 1]) if n - K - 1 >= 0 else 0.0
    co, stability = _resampled(g, L, ks, est.gini_threshold, rng, n_resamples)
    cdfs = {}
    for K in ks:
        scores[K]["pac"] = pac(co[K])
        scores[K]["stability"] = stability[K]
        cdfs[K] = consensus_cdf(co[K])
    chosen, reason = best_k(scores, criterion)
    if "spectral" in cands and (est._spectral_at(chosen) or cands == ["spectral"]):
        out[chosen]["spectral"] = _embedded_kmeans(embedding, chosen, seed)
    kept, cuts, partition = {}, {}, None
    for K in ks:
        here = [c for c in cands if c in out[K]]
        if here:
            z, kept[K], cuts[K] = _least_cut(g, out[K], here)
            partition = z if K == chosen else partition
        else:  # spectral alone, at another K than the one chosen: not cut
            kept[K], cuts[K] = None, {}
    return chosen, reason, partition, kept, cuts, scores, cdfs


def _resampled(g, L, ks, threshold, rng, n_resamples):
    """``({K: consensus values of sampled pairs}, {K: stability})`` from ``n_resamples`` splits of the base
    clusterings into two disjoint random halves, each half's ``genie-ca`` consensus cut at every K."""
    n, N = L.shape
    if N < 2:
        raise InputError(f"choosing K reads halves of the base clusterings: it needs at least 2; got {N}")
    m = min(PAIRS_PER_ROW * n, MAX_PAIRS)
    a = rng.integers(0, n, m)
    b = (a + rng.integers(1, n, m)) % n  # another row than a
    together = {K: np.zeros(m) for K in ks}
    aris = {K: [] for K in ks}
    ca, lw = np.empty(len(g.ei)), np.empty(len(g.ei))
    for _ in range(n_resamples):
        perm = rng.permutation(N)
        halves = []
        for cols in (np.sort(perm[: N // 2]), np.sort(perm[N // 2 :])):
            Lh = np.ascontiguousarray(L[:, cols])
            _k.edge_shares(Lh, np.zeros(Lh.shape), g.ei, g.ej, ca, lw)
            parts, _ = _genie_cuts(_spanning_tree(g.tree_graph("genie-ca", ca)), n, ks, threshold, ks[0])
            halves.append(parts)
            for K in ks:
                together[K] += parts[K][a] == parts[K][b]
        for K in ks:
            aris[K].append(_ari(halves[0][K], halves[1][K]))
    runs = max(2 * n_resamples, 1)
    return {K: together[K] / runs for K in ks}, {K: float(np.mean(aris[K])) if aris[K] else 0.0 for K in ks}


def best_k(scores, criterion):
    """``(K, reason)``: the K of the best ``criterion`` value in ``scores`` (``{K: {criterion: value}}``),
    and a line saying why it won.

    ``eigengap`` and ``lifetime``: the smaller K on a tie. ``pac`` and ``stability``: the largest K within
    :data:`REPRODUCIBLE_TOL` of the best value. A partition that merges whole clusters is as reproducible as
    the true one (a consensus at K below the true K is 0 ambiguous pairs and stability 1, as on well-separated
    blobs), so the finest partition that the resampled ensembles reproduce as well as the best is kept.
    """
    largest = CRITERIA[criterion]
    ks = sorted(scores)
    vals = np.array([scores[K][criterion] for K in ks])
    key = -vals if largest else vals
    if criterion in REPRODUCIBLE:
        i = int(np.flatnonzero(key <= key.min() + REPRODUCIBLE_TOL)[-1])
    else:
        i = int(np.argmin(key))  # the first: the smaller K on a tie
    rest = [j for j in range(len(ks)) if j != i]
    if not rest:
        return ks[i], f"{criterion} {vals[i]:.4g} at K={ks[i]}, the only K of the range"
    j = min(rest, key=lambda r: (key[r], -r if criterion in REPRODUCIBLE else r))
    word = "largest" if largest else "smallest"
    if criterion in REPRODUCIBLE:
        word += f"; the largest K within {REPRODUCIBLE_TOL} of the best"
    return ks[i], f"{criterion} ({word} wins) {vals[i]:.4g} at K={ks[i]}; next {vals[j]:.4g} at K={ks[j]}"

"""GKCC: greedy K-means-based consensus clustering (Li & Liu 2018 Sect. 4, Algorithm 1).

The data of Algorithm 1 is here the input labels matrix, taken as its 1-of-K matrix ``B`` (eq. 3), so
GKCC is a consensus method like the others. Starting from the centre of the data, for
``k = 2 .. K``: 59 points are sampled (Lemma 1: the best of 59 draws is in the top 5% with
probability 0.95), a k-means runs from the previous ``k - 1`` centres plus each sampled point, the
59 partitions are kept as basic partitions and appended one-hot to the data, and a k-means from the
winner's partition (lowest objective) in the augmented space gives the next step's centres. The
consensus is a final KCC on the ``59 (K - 1)`` generated partitions, started from the last winner's
partition, so the result is deterministic for a seed.

Identical input rows get identical labels in every partition generated (each is a Lloyd fixed
point with deterministic ties), so the whole run works on the distinct rows weighted by their
multiplicity; the 59 candidate runs of a step are independent (:func:`run_candidate`) and run
together, one pass over the rows per Lloyd iteration for all of them (:func:`run_candidates`), in
one or more groups: ``fit`` takes a ``mapper`` so that a Dask layer can run the groups as tasks.

The shared passes compute what the candidates alone would, bit for bit (the same floating-point
operations per candidate; label counts are sums of integer row weights, exact in any order): a row is
read once per pass for all candidates, the previous centres' distances (the same for every candidate)
are computed once in the first pass, counts move only for rows that changed cluster, and candidates
that reach the same state share one. The augmented data is kept as int16 indices when its categories
allow, written in place. Timings and memory: ``benchmarks/bench_gkcc.py`` and the benchmarks page.

Algorithm 1's work grows like ``J^2 K^4`` times the rows (``J`` candidates per step, each a k-means over
``k`` centres in a space that grows by ``J`` partitions per step, for more Lloyd iterations as ``k``
grows). With the defaults (``max_rows="auto"``, ``n_candidates="auto"``) it runs where it fits
:data:`WORK_BUDGET`: on all rows, or else on a seeded sample of rows (at least
:data:`SAMPLE_ROWS_PER_CLUSTER` per cluster), whose final partition then starts KCC's Lloyd steps on every
row in the input labels' space; only where even that sample does not fit are fewer than 59 points drawn
per step. Explicit ``max_rows=None`` and ``n_candidates=59`` run the paper's algorithm on every row,
however long.

Where one cluster holds most points, Algorithm 1 splits it, and its partition can have a lower KCC
objective in the labels' space than the true one, so no criterion of that objective can prefer the truth;
the agreement with the base clusterings (ANMI, Strehl and Ghosh,
:func:`~ensemble_dask.consensus._common.agreement.anmi`) can. So by default (``compare="anmi"``) KCC's own
fit (its default spectral start) runs on every row beside Algorithm 1, and the partition of higher ANMI with
the input clusterings is kept (``start_``, ``anmi_``); ``compare=None`` keeps Algorithm 1's result, the
paper's. The benchmarks page ("Real data") has the figures.
"""

from __future__ import annotations

import os
import warnings
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from numbers import Integral, Real

import numpy as np

from ..._validation import InputError, check_int, check_labels_matrix, check_random_state, convergence_warning
from .._common import _kernels as common_kern
from .._common.agreement import anmi
from .._common.base import normalized_entropy
from .._common.encoding import compress_rows
from .._common.params import Interval, Options, ParamsMixin, check_n_clusters
from . import _kernels as kern
from ._kcc import (
    KCC,
    Encoding,
    LocalBlocks,
    _proportions,
    _row_center,
    block_norms,
    block_sizes,
    centers_from_partition,
    centers_from_stats,
    check_encoding,
    encode,
    lloyd,
)

__all__ = ["GKCC", "run_candidate", "run_candidates", "plan_work"]

#: work of GKCC's greedy steps, in units of ``J^2 sum_{k=2..K} k^3`` x rows, that the defaults keep to
WORK_BUDGET = 6e11
#: the smallest sample of rows (per cluster) the greedy steps run on under ``max_rows="auto"``
SAMPLE_ROWS_PER_CLUSTER = 10
#: Lemma 1 of Li & Liu 2018: the best of 59 draws is in the top 5% with probability 0.95
PAPER_CANDIDATES = 59


def plan_work(n_rows, n_distinct, K, n_candidates="auto", max_rows="auto"):
    """``(J, rows)``: the candidates per step and the rows the greedy steps run on (None: every row).

    ``n_rows`` points with ``n_distinct`` distinct label rows (the greedy steps run on those, so their
    number is what costs). ``max_rows="auto"``: the largest sample within :data:`WORK_BUDGET`, at least
    :data:`SAMPLE_ROWS_PER_CLUSTER` x K; ``n_candidates="auto"``: 59, fewer (down to 2) only where the
    rows chosen still exceed the budget at 59.
    """
    units = float(sum(k**3 for k in range(2, K + 1)))
    J = PAPER_CANDIDATES if n_candidates == "auto" else n_candidates
    if max_rows == "auto":
        rows = max(int(WORK_BUDGET // (J * J * units)), SAMPLE_ROWS_PER_CLUSTER * K)
    else:
        rows = n_rows if max_rows is None else max_rows
    rows = min(rows, n_rows)
    if n_candidates == "auto" and J * J * units * min(rows, n_distinct) > WORK_BUDGET:
        J = max(2, int(np.sqrt(WORK_BUDGET / (units * min(rows, n_distinct)))))
    return J, (rows if n_distinct > rows else None)


def _prior_tol(gidx, weight, enc, tol):
    """Per-clustering label proportions and the absolute tolerance (``tol`` x mean column variance)."""
    counts, total = block_sizes(gidx, weight, enc.n_categories)
    p = counts / total
    return _proportions(counts[None, :], enc)[0], tol * float(np.mean(p * (1 - p)))


def run_candidate(gidx, weight, enc, prior, MT_prev, row, max_iter, tol):
    """One candidate of a GKCC step: k-means from the previous centres plus the point ``row``.

    All inputs are plain arrays (``gidx`` rows of the current augmented data, their weights, the
    :class:`~ensemble_dask.consensus.kcc._kcc.Encoding`, the per-clustering proportions ``prior``, the
    previous centres ``MT_prev`` as ``G x (k - 1)``, the candidate's ``gidx`` row) and ``tol`` is
    absolute. Returns ``(labels, sse, converged)``. ``fit`` runs :func:`run_candidates` instead,
    which gives the same for each candidate; this is its reference.
    """
    MT0 = np.ascontiguousarray(np.column_stack([MT_prev, _row_center(row, enc, prior)]))
    backend = LocalBlocks([gidx], [weight])
    MT, sse, _, converged = lloyd(backend, MT0, enc, prior, max_iter, tol)
    return backend.labels[0].astype(np.int32), sse, converged


def run_candidates(gidx, weight, enc, prior, MT_prev, rows, max_iter, tol, out=None, pool=None, n_threads=1):
    """The candidates of a GKCC step at ``rows`` (``J x N``), as :func:`run_candidate` each, in one pass per
    iteration.

    Each candidate's Lloyd run is :func:`~ensemble_dask.consensus.kcc._kcc.lloyd`'s, step for step (the
    same stopping rules, the same floating-point values: see
    :func:`~ensemble_dask.consensus.kcc._kernels.assign_many`), but the passes over the rows are
    shared: a pass reads each row once and assigns it for every candidate still running (a
    candidate that has converged drops out; one that stopped on the centroid shift takes a last
    pass for its labels and squared error, as ``lloyd`` does). The counts of a candidate are kept
    between its passes and only changed rows move, which is exact for integer ``weight`` (GKCC's
    row multiplicities). Returns ``(labels (n x J) int32, sse (J,), converged (J,) bool)``; the
    result of a candidate does not depend on which others run with it. ``out`` (``n x J`` int32,
    may be a view) receives the labels (and is returned) instead of a new array.

    The candidates run in chunks whose per-candidate tables (centroids, counts: ``K (G + N)``
    numbers each) take at most :data:`CHUNK_BYTES` together; at large ``K`` (``G`` grows with
    every step's 59 partitions) a chunk is a few candidates, at small ``K`` one chunk is all.
    With a thread ``pool``, each pass splits the candidates it runs into ``n_threads`` shares, one
    kernel call each (the kernels release the GIL); nothing else changes.
    """
    rows = np.atleast_2d(np.asarray(rows))
    J, n = rows.shape[0], gidx.shape[0]
    labels = np.empty((n, J), dtype=np.int32) if out is None else out
    per = 8 * (MT_prev.shape[1] + 1) * (enc.n_categories + enc.n_clusterings)
    step = max(1, CHUNK_BYTES // per)
    sse, converged = np.zeros(J), np.zeros(J, dtype=bool)
    for a in range(0, J, step):
        b = min(a + step, J)
        _, sse[a:b], converged[a:b] = _run_chunk(
            gidx, weight, enc, prior, MT_prev, rows[a:b], max_iter, tol, labels[:, a:b], pool, n_threads
        )
    return labels, sse, converged


#: bytes of the per-candidate tables of one chunk of :func:`run_candidates` (a few such arrays live at once)
CHUNK_BYTES = 32 << 20


def _run_chunk(gidx, weight, enc, prior, MT_prev, rows, max_iter, tol, labels, pool, n_threads):
    """:func:`run_candidates` on one chunk of candidates, their labels written into ``labels``."""
    J, G, N = rows.shape[0], enc.n_categories, enc.n_clusterings
    K = MT_prev.shape[1] + 1
    MT = [np.ascontiguousarray(np.column_stack([MT_prev, _row_center(r, enc, prior)])) for r in rows]
    labels[...] = -1
    cext = np.zeros((J, K, G + N))
    lhash = np.zeros(J, dtype=np.uint64)
    sse = np.zeros(J)
    it = np.zeros(J, dtype=np.int64)
    phase = np.zeros(J, dtype=np.int8)  # 0 iterating, 1 one last pass for labels and sse, 2 done
    converged = np.zeros(J, dtype=bool)
    while (act := np.flatnonzero(phase < 2)).size:
        first = it.max() == 0
        # candidates in the same state (centroids, labels) have the same pass: it runs once for them
        reps, pos = (act, np.arange(J)) if first else _same_state(act, MT, labels, lhash)
        MTs = np.stack([MT[j] for j in reps])
        sqs = np.stack([block_norms(MT[j], enc.offsets) for j in reps])
        sizes, far_d = np.zeros((reps.size, K)), np.empty((reps.size, K))
        far_row = np.empty((reps.size, K), dtype=np.int64)
        a_sse, a_changed, a_hash = (
            np.zeros(reps.size),
            np.zeros(reps.size),
            np.zeros(reps.size, dtype=np.uint64),
        )
        if first and np.array_equal(
            sqs[:, : K - 1], np.broadcast_to(sqs[:1, : K - 1], sqs[:, : K - 1].shape)
        ):
            # the first pass: the shared previous centres' distances once per row (assign_first)
            arrs = (gidx, weight, MTs, sqs, labels, cext, sizes, far_d, far_row, a_sse, a_hash)
            _in_shares(partial(_first_share, arrs), J, pool, n_threads)
            a_changed[:] = float(weight.sum())
        else:
            arrs = (
                gidx,
                weight,
                MTs,
                sqs,
                reps,
                labels,
                cext,
                sizes,
                far_d,
                far_row,
                a_sse,
                a_changed,
                a_hash,
            )
            _in_shares(partial(_many_share, arrs), reps.size, pool, n_threads)
        for j in act:
            a = pos[j]
            r = reps[a]
            if r != j:  # a follower: its representative's pass is its own
                labels[:, j] = labels[:, r]
                cext[j] = cext[r]
            lhash[j] = a_hash[a]
            if phase[j] == 1:  # the last pass after a stop on the shift: labels and sse of the final MT
                sse[j], phase[j] = a_sse[a], 2
                continue
            keep = far_row[a] >= 0
            st = {"counts": cext[j, :, :G].copy(), "sizes": sizes[a], "far_rows": gidx[far_row[a][keep]]}
            new = centers_from_stats(st, enc, prior)
            shift = float(((new - MT[j]) ** 2).sum())
            MT[j] = new
            if it[j] > 0 and a_changed[a] == 0:
                sse[j], phase[j], converged[j] = a_sse[a], 2, True
            elif shift <= tol:
                phase[j], converged[j] = 1, True
            it[j] += 1
            if phase[j] == 0 and it[j] >= max_iter:
                phase[j] = 1
    return labels, sse, converged


def _first_share(arrs, sl):
    """:func:`~ensemble_dask.consensus.kcc._kernels.assign_first` for the candidates ``sl`` (a slice)."""
    gidx, weight, MTs, sqs, labels, cext, sizes, far_d, far_row, sse, lhash = arrs
    K, GN = cext.shape[1], cext.shape[2]
    base, moved = np.zeros((K - 1, GN)), np.zeros((K - 1, GN, sl.stop - sl.start))
    kern.assign_first(
        gidx, weight, MTs[sl], sqs[sl], labels[:, sl], base, moved, sizes[sl], far_d[sl], far_row[sl],
        sse[sl], lhash[sl],
    )  # fmt: skip
    moved = moved.transpose(2, 0, 1)  # share x (K - 1) x (G + N)
    cext[sl, : K - 1] = base[None] - moved
    cext[sl, K - 1] = moved.sum(axis=1)


def _many_share(arrs, sl):
    """:func:`~ensemble_dask.consensus.kcc._kernels.assign_many` for the runs at positions ``sl``."""
    gidx, weight, MTs, sqs, reps, labels, cext, sizes, far_d, far_row, sse, changed, lhash = arrs
    kern.assign_many(
        gidx, weight, MTs[sl], sqs[sl], reps[sl], labels, cext, sizes[sl], far_d[sl], far_row[sl],
        sse[sl], changed[sl], lhash[sl],
    )  # fmt: skip


def _in_shares(func, m, pool, n_threads):
    """``func(slice)`` on ``min(n_threads, m)`` contiguous shares of ``range(m)``, on ``pool`` if given."""
    cuts = np.linspace(0, m, min(max(n_threads, 1), m) + 1).astype(int)
    shares = [slice(int(a), int(b)) for a, b in zip(cuts[:-1], cuts[1:], strict=True)]
    if pool is None or len(shares) == 1:
        for sl in shares:
            func(sl)
    else:
        list(pool.map(func, shares))


def _same_state(act, MT, labels, lhash):
    """Representatives of the candidates ``act`` by state: ``(reps, pos)`` with ``reps[pos[j]]`` the
    candidate whose pass ``j`` takes (the same centroids and labels, checked, not only hashed)."""
    reps, pos, seen = [], {}, {}
    for j in act:
        key = (MT[j].tobytes(), int(lhash[j]))
        r = seen.get(key)
        if r is not None and np.array_equal(MT[j], MT[r]) and np.array_equal(labels[:, j], labels[:, r]):
            pos[j] = pos[r]
            continue
        if r is None:
            seen[key] = j
        pos[j] = len(reps)
        reps.append(j)
    return np.array(reps, dtype=np.int64), pos


def _category_dtype(bound):
    """The smallest of int16 and int32 holding global indices below ``bound``."""
    return np.int16 if bound < np.iinfo(np.int16).max else np.int32


def _encode_into(parts, out, shift=0):
    """Global indices (``shift`` + :func:`~ensemble_dask.consensus.kcc._kcc.encode`'s) of the labels
    ``parts`` (``u x m``, all present, small; may be a view) written into ``out`` (``u x m``, may be
    a view); returns their categories."""
    top = np.maximum(parts.max(axis=0).astype(np.int64) + 1, 0)
    seen = np.zeros((parts.shape[1], int(top.max())), dtype=np.bool_)
    common_kern.column_presence(parts, top, seen)
    cats = [np.flatnonzero(row).astype(np.int64) for row in seen]
    offsets = Encoding.from_categories(cats).offsets
    lut_off = np.concatenate([[0], np.cumsum(top)]).astype(np.int64)
    lut = np.full(lut_off[-1], -1, dtype=np.int32)
    for i, c in enumerate(cats):
        lut[lut_off[i] + c] = shift + offsets[i] + np.arange(c.size)
    common_kern.encode_lut(parts, lut, lut_off, out)
    return cats


def _append(aug, gidx, enc, parts):
    """The data ``gidx`` (the first columns of ``aug``) with the partitions ``parts`` (u x 59) appended
    one-hot in the next columns of ``aug``: ``(gidx, encoding)``, the new ``gidx`` a view of ``aug``."""
    N, m = gidx.shape[1], parts.shape[1]
    cats = _encode_into(parts, aug[:, N : N + m], shift=enc.n_categories)
    return aug[:, : N + m], Encoding.from_categories(list(enc.categories) + cats)


def _serial_map(func, args):
    return [func(*a) for a in args]


class GKCC(ParamsMixin):
    """Greedy K-means-based consensus clustering (Li & Liu 2018 Algorithm 1).

    Parameters
    ----------
    n_clusters : int, default=2
        ``K`` (``2 <= K <= n``).
    n_candidates : int or "auto", default="auto"
        Points sampled per greedy step (59 from Lemma 1 with p = 0.05, delta = 0.95). ``"auto"``: 59,
        unless even the smallest sample of ``max_rows="auto"`` would exceed :data:`WORK_BUDGET` at 59
        (many clusters, e.g. 9 at K = 100): then as many as fit (see :func:`plan_work`).
    max_rows : int, None or "auto", default="auto"
        The greedy steps run on a seeded uniform sample of this many points when the points have more
        distinct label rows than that (they run on the distinct rows), else on all (None: always on all).
        ``"auto"``: all when their distinct label rows fit :data:`WORK_BUDGET`, else as many as fit (at
        least 10 per cluster). With a sample, its final partition's centroids in the input labels'
        space start KCC's Lloyd steps on every row.
    max_iter : int, default=300
        Lloyd iterations per k-means.
    tol : float, default=1e-4
        Relative tolerance of every k-means (see :class:`~ensemble_dask.consensus.KCC`).
    random_state : int, Generator or None, default=None
        Seeds the candidate draws; the result is deterministic for a seed.
    n_jobs : int or None, default=None
        Threads of the passes over the rows in this process, each running a share of the
        candidates (None: 1, -1: one per core). The result does not depend on it.
    compare : "anmi" or None, default="anmi"
        ``"anmi"``: :class:`~ensemble_dask.consensus.KCC` with its default start also runs on every row, and
        the partition of higher ANMI with the input clusterings is kept (Algorithm 1's on a tie): the
        greedy steps split a cluster that holds most points, a partition of lower objective than the true
        one but that agrees less with the clusterings. None: Algorithm 1's result (the paper's).

    Attributes
    ----------
    labels_, memberships_, uncertainty_, effective_k_, cluster_centers_, objective_, inertia_,
    n_iter_, converged_
        As :class:`~ensemble_dask.consensus.KCC`'s, for the final KCC on ``partitions_`` (with a
        sample: for the Lloyd steps on every row, in the input labels' space).
    partitions_ : ndarray of int32, shape (n or rows, n_candidates_ * (K - 1))
        The generated basic partitions (step ``k`` = 2 .. K, ``n_candidates_`` columns each), of the
        rows ``sample_indices_`` when the greedy steps ran on a sample.
    step_objectives_ : ndarray, shape (K - 1, n_candidates_)
        Each candidate's objective (squared error / rows^2) in its step's augmented space.
    candidates_ : ndarray of int64, shape (K - 1, n_candidates_)
        The sampled points of each step (indices of the input rows).
    n_candidates_ : int
        The points drawn per step.
    sample_indices_ : ndarray of int64 or None
        The sorted input rows the greedy steps ran on, None when they ran on all.
    start_ : {"greedy", "kcc"}
        Where the final partition comes from: Algorithm 1 (on all rows, or Lloyd's steps from its
        sample's partition), or KCC's own fit when its ANMI was higher (``compare="anmi"``).
    anmi_ : dict or None
        ``{"greedy": ..., "kcc": ...}``: the two partitions' ANMI with the input clusterings (None with
        ``compare=None``).

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([[0, 1], [0, 1], [1, 0], [1, 0], [2, 0], [2, 0]])
    >>> GKCC(2, n_candidates=4, random_state=0).fit(labels).partitions_.shape
    (6, 4)
    """

    _parameter_constraints = {
        "n_clusters": [Interval(Integral, 2, None)],
        "n_candidates": [Options("auto"), Interval(Integral, 1, None)],
        "max_rows": [None, Options("auto"), Interval(Integral, 1, None)],
        "max_iter": [Interval(Integral, 1, None)],
        "tol": [Interval(Real, 0, None, inf_ok=True)],
        "random_state": ["random_state"],
        "n_jobs": [None, Options(-1), Interval(Integral, 1, None)],
        "compare": [None, Options("anmi")],
    }

    def __init__(
        self,
        n_clusters=2,
        *,
        n_candidates="auto",
        max_rows="auto",
        max_iter=300,
        tol=1e-4,
        random_state=None,
        n_jobs=None,
        compare="anmi",
    ):
        self.n_clusters = n_clusters
        self.n_candidates = n_candidates
        self.max_rows = max_rows
        self.max_iter = max_iter
        self.tol = tol
        self.random_state = random_state
        self.n_jobs = n_jobs
        self.compare = compare

    def fit(self, labels, y=None, *, mapper=None, n_tasks=None):
        """Fit on an ``n x N`` labels matrix (``-1`` = missing).

        ``mapper(func, list_of_argument_tuples)`` runs the candidate k-means of a step (default: a
        loop here); each call is :func:`run_candidates` on plain arrays, for one of ``n_tasks``
        groups of the step's candidates (default: one group without a mapper, one candidate per
        group with one). The result does not depend on the grouping.
        """
        labels = check_labels_matrix(labels)
        n = labels.shape[0]
        self._validate_params()
        K = check_n_clusters(self, n)
        n_cand = self.n_candidates if isinstance(self.n_candidates, str) else int(self.n_candidates)
        max_rows = self.max_rows
        if max_rows is not None and not isinstance(max_rows, str):
            max_rows = int(max_rows)
            if max_rows < K:
                raise InputError(
                    f"The 'max_rows' parameter of GKCC must be >= n_clusters={K}; got {max_rows}"
                )
        max_iter = int(self.max_iter)
        n_jobs = (
            1 if self.n_jobs is None else (os.cpu_count() or 1) if self.n_jobs == -1 else int(self.n_jobs)
        )
        if n_tasks is None:
            n_tasks = 1 if mapper is None else None  # with a mapper: one task per candidate (below)
        if n_tasks is not None:
            n_tasks = check_int(n_tasks, "n_tasks", min_value=1)
        local = mapper is None
        pool = ThreadPoolExecutor(n_jobs) if local and n_jobs > 1 else None  # the kernels release the GIL
        try:
            extra = (pool, n_jobs) if local else None
            self._fit(labels, n, K, n_cand, max_rows, max_iter, mapper or _serial_map, n_tasks, extra)
        finally:
            if pool is not None:
                pool.shutdown()
        return self

    def _fit(self, labels, n, K, n_cand, max_rows, max_iter, mapper, n_tasks, local):
        """``local``: None with a caller's mapper, else ``(thread pool or None, threads)`` for the passes."""
        gidx_full, enc = encode(labels)
        check_encoding(enc, labels.shape)
        rng = check_random_state(self.random_state)
        gidx, weight, inverse = compress_rows(gidx_full)
        n_cand, rows = plan_work(n, gidx.shape[0], K, n_cand, max_rows)
        self.n_candidates_ = n_cand
        n_tasks = n_cand if n_tasks is None else n_tasks
        self.start_ = "greedy"
        if rows is None:
            del gidx_full
            self.sample_indices_ = None
            final = self._greedy(
                gidx, weight, inverse, enc, n, K, n_cand, max_iter, mapper, n_tasks, local, rng
            )
        else:
            # the greedy steps on a uniform sample of the points (in the labels' encoding, where a category
            # absent from the sample has a zero count), then Lloyd's steps on every row from its partition
            pts = np.sort(rng.choice(n, size=rows, replace=False))
            gs, ws, invs = compress_rows(gidx_full[pts])
            lab_s = self._greedy(gs, ws, invs, enc, rows, K, n_cand, max_iter, mapper, n_tasks, local, rng)[5]
            self.sample_indices_ = pts
            self.candidates_ = pts[self.candidates_]
            prior, tol = _prior_tol(gidx, weight, enc, self.tol)
            MT0 = centers_from_partition(gidx_full[pts], np.ones(rows), lab_s[invs], K, enc, prior)
            del gidx_full
            backend = LocalBlocks([gidx], [weight])
            MT, sse, n_iter, converged = lloyd(backend, MT0, enc, prior, max_iter, tol)
            final = (enc, MT, sse, n_iter, converged, *backend.memberships(MT, block_norms(MT, enc.offsets)))
        self.anmi_ = None
        if self.compare == "anmi":
            kcc = KCC(K, max_iter=max_iter, tol=self.tol, random_state=int(rng.integers(2**31 - 1)))
            with warnings.catch_warnings():
                warnings.simplefilter("ignore", convergence_warning())  # reported below if it is kept
                kcc.fit(labels)
            self.anmi_ = {"greedy": anmi(final[5][inverse], labels), "kcc": anmi(kcc.labels_, labels)}
            if self.anmi_["kcc"] > self.anmi_["greedy"]:
                self.start_ = "kcc"
                fit = (kcc.inertia_, kcc.n_iter_, kcc.converged_, kcc.labels_, kcc.memberships_)
                self._set_final(enc, None, *fit, None, n)
                self.cluster_centers_ = kcc.cluster_centers_
                return self
        return self._set_final(*final, inverse, n)

    def _greedy(self, gidx, weight, inverse, enc, n, K, n_cand, max_iter, mapper, n_tasks, local, rng):
        """Algorithm 1 on the distinct rows ``gidx`` (weights, and ``inverse`` to the ``n`` points): sets
        ``partitions_``, ``step_objectives_`` and ``candidates_``; returns the final KCC on the partitions
        as ``(encoding, MT, sse, n_iter, converged, labels, memberships)`` of the distinct rows."""
        # the augmented data's indices stay small: int16 unless there are 32767 categories or more
        bound = enc.n_categories + enc.n_clusterings + n_cand * ((K - 2) + sum(range(2, K)))
        u, N0 = gidx.shape
        # room for the partitions appended at steps 2 .. K - 1 (written in place, never copied), and a spare
        # column: each view of the data is then non-contiguous, one layout for numba (fewer kernel compiles)
        aug = np.empty((u, N0 + n_cand * (K - 2) + 1), dtype=_category_dtype(bound))
        aug[:, :N0] = gidx
        gidx = aug[:, :N0]
        identity = u == n and bool(np.all(inverse == np.arange(n)))
        prior, tol = _prior_tol(gidx, weight, enc, self.tol)
        MT_prev = prior[:, None].copy()
        P = np.empty((u, n_cand * (K - 1)), dtype=np.int32)  # the generated partitions, step by step
        objs, cands = [], []
        winner = None
        for k in range(2, K + 1):
            ids = rng.choice(n, size=min(n_cand, n), replace=False)
            if ids.size < n_cand:  # fewer points than candidates: draw again with replacement
                ids = np.concatenate([ids, rng.choice(n, size=n_cand - ids.size)])
            rows = gidx[inverse[ids]]
            groups = np.array_split(np.arange(ids.size), min(n_tasks, ids.size))
            block = P[:, (k - 2) * n_cand : (k - 1) * n_cand]
            # in this process the candidates' labels go straight into P (a mapper's come back)
            args = [
                (gidx, weight, enc, prior, MT_prev, rows[q], max_iter, tol)
                + ((block[:, q[0] : q[-1] + 1], *local) if local else ())
                for q in groups
            ]
            res = mapper(run_candidates, args)
            if local is None:
                block[...] = np.hstack([r[0] for r in res])
            sse = np.concatenate([r[1] for r in res])
            del res
            winner = block[:, int(np.argmin(sse))]
            objs.append(sse / n**2)
            cands.append(ids)
            if k == K:
                break
            gidx, enc = _append(aug, gidx, enc, block)
            prior, tol = _prior_tol(gidx, weight, enc, self.tol)
            MT0 = centers_from_partition(gidx, weight, winner, k, enc, prior)
            MT_prev = lloyd(LocalBlocks([gidx], [weight]), MT0, enc, prior, max_iter, tol)[0]

        # the augmented data (args hold it too): the final KCC needs only the generated partitions
        del gidx, aug, args
        # final KCC on the generated partitions, from the last winner's partition
        gP = np.empty(P.shape, dtype=_category_dtype(n_cand * sum(range(2, K + 1))))
        encP = Encoding.from_categories(_encode_into(P, gP))
        priorP, tolP = _prior_tol(gP, weight, encP, self.tol)
        MT0 = centers_from_partition(gP, weight, winner, K, encP, priorP)
        backend = LocalBlocks([gP], [weight])
        MT, sse, n_iter, converged = lloyd(backend, MT0, encP, priorP, max_iter, tolP)
        lab, Y = backend.memberships(MT, block_norms(MT, encP.offsets))
        self.partitions_ = P if identity else P[inverse]  # no copy when every row is distinct
        del gP
        self.step_objectives_ = np.array(objs)
        self.candidates_ = np.array(cands, dtype=np.int64)
        return encP, MT, sse, n_iter, converged, lab, Y

    def _set_final(self, enc, MT, sse, n_iter, converged, lab, Y, inverse, n):
        """The fitted attributes of the final k-means (``lab``, ``Y`` of the distinct rows, or of every row
        when ``inverse`` is None; ``MT`` None: ``cluster_centers_`` set by the caller)."""
        self.encoding_ = enc
        off = enc.offsets
        if MT is not None:
            self.cluster_centers_ = [
                np.ascontiguousarray(MT[a:b].T) for a, b in zip(off[:-1], off[1:], strict=True)
            ]
        self.inertia_ = sse
        self.objective_ = sse / n**2
        self.n_iter_ = n_iter
        self.converged_ = converged
        self.memberships_ = Y if inverse is None else Y[inverse]
        self.labels_ = lab if inverse is None else lab[inverse]
        self.uncertainty_ = normalized_entropy(self.memberships_)
        self.effective_k_ = int(np.unique(self.labels_).size)
        if not converged:
            warnings.warn(
                f"GKCC's final KCC did not converge in max_iter={self.max_iter} Lloyd iterations",
                convergence_warning(),
                stacklevel=3,
            )
        return self

    def fit_predict(self, labels, y=None):
        return self.fit(labels).labels_

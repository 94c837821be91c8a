"""Seeded pair sampling: which pairs (i, j) the co-association store holds.

Four strategies: ``full``, ``uniform``, ``per-point`` and ``cocluster``. Randomness is drawn per fixed-size
*seed block* of rows (``block_size``, a parameter of the strategy) from
``SeedSequence(seed, spawn_key=(b,))``, the b-th child of ``SeedSequence(seed).spawn``; so the same seed gives
the same pairs whatever the number of Dask partitions or workers.
"""

from __future__ import annotations

import math
import numbers
from dataclasses import dataclass

import numpy as np

from .._validation import InputError, check_choice, check_int, check_labels_matrix, check_rate
from ..runtime.threads import thread_map, usable_cores
from . import _kernels as _k

__all__ = ["STRATEGIES", "sample_pairs"]

STRATEGIES = ("full", "uniform", "per-point", "cocluster")
_STRATEGY_PARAMS = {
    "full": {"max_n": 5000},
    "uniform": {"p": 0.00025},
    "per-point": {"l": 30},
    "cocluster": {"l": 30, "fraction": 0.5},
}
DEFAULT_BLOCK_SIZE = 4096
#: in memory, from this many points the seed blocks draw on threads, and from this many labels the
#: cluster index is built on threads (below, a pool costs more than it saves)
THREADED_ROWS = 50_000
THREADED_LABELS = 1_000_000


# --------------------------------------------------------------------------- pair sampling


@dataclass(frozen=True)
class _Sampler:
    """A validated strategy: which pairs of ``n`` points, drawn from ``seed`` per seed block."""

    strategy: str
    n: int
    seed: int
    block_size: int
    params: dict

    @property
    def n_blocks(self) -> int:
        return -(-self.n // self.block_size)

    @property
    def row_local(self) -> bool:
        """Whether every pair drawn by a seed block has its smaller point in that block."""
        return self.strategy in ("full", "uniform")

    @property
    def needs_labels(self) -> bool:
        return self.strategy == "cocluster"

    def rng(self, b):
        return np.random.default_rng(np.random.SeedSequence(self.seed, spawn_key=(b,)))

    def block_keys(self, b, cluster_index=None, labels=None):
        """Pair keys ``i * n + j`` (i < j) drawn by seed block ``b``.

        For ``full`` and ``uniform`` they are sorted and unique; for the other strategies they
        may repeat (deduplicate the union over blocks).
        """
        n = self.n
        r0 = b * self.block_size
        r1 = min(r0 + self.block_size, n)
        if self.strategy == "full":
            return _triangle_keys(n, r0, r1, np.arange(_triangle_len(n, r0, r1), dtype=np.int64))
        if self.strategy == "uniform":
            return _triangle_keys(
                n, r0, r1, _bernoulli_positions(self.rng(b), _triangle_len(n, r0, r1), self.params["p"])
            )
        l = self.params["l"]
        if self.strategy == "per-point":
            rng = self.rng(b)
            i = np.repeat(np.arange(r0, r1, dtype=np.int64), l)
            j = rng.integers(0, n - 1, size=i.size, dtype=np.int64)
            j += j >= i
            return np.minimum(i, j) * n + np.maximum(i, j)
        members, start = cluster_index
        n_co = self.n_cocluster
        keys = np.empty((r1 - r0) * l, dtype=np.int64)
        _k.cocluster_draws_kernel(labels[r0:r1], r0, n, members, start, n_co, l - n_co, self.state(b), keys)
        return keys

    @property
    def n_cocluster(self):
        """Co-cluster draws per point of the ``cocluster`` strategy (the rest of ``l`` are uniform)."""
        return int(math.floor(self.params["fraction"] * self.params["l"] + 0.5))

    def state(self, b):
        """The splitmix64 state of seed block ``b``'s ``cocluster`` draws."""
        return self.rng(b).integers(np.iinfo(np.int64).min, np.iinfo(np.int64).max, size=1, dtype=np.int64)

    def attrs(self):
        return {
            "strategy": self.strategy,
            "params": dict(self.params),
            "seed": self.seed,
            "block_size": self.block_size,
        }


def _triangle_len(n, r0, r1):
    """Number of pairs (i, j), r0 <= i < r1, i < j < n."""
    return (r1 - r0) * (n - 1) - (r0 + r1 - 1) * (r1 - r0) // 2


def _triangle_keys(n, r0, r1, pos):
    """Map sorted positions in the row-major upper triangle of rows r0..r1-1 to keys i*n+j."""
    rows = np.arange(r0, r1, dtype=np.int64)
    ends = np.cumsum(n - 1 - rows)
    r = np.searchsorted(ends, pos, side="right")
    starts = ends - (n - 1 - rows)
    i = rows[r]
    j = i + 1 + (pos - starts[r])
    return i * n + j


def _bernoulli_positions(rng, m, p):
    """Sorted positions in ``[0, m)``, each kept independently with probability p (geometric skips)."""
    if m == 0:
        return np.zeros(0, dtype=np.int64)
    out = []
    last = -1
    while True:
        expect = (m - 1 - last) * p
        size = int(expect + 6.0 * math.sqrt(expect) + 64)
        pos = last + np.cumsum(rng.geometric(p, size=size), dtype=np.int64)
        if pos[-1] >= m:
            out.append(pos[: np.searchsorted(pos, m)])
            break
        out.append(pos)
        last = int(pos[-1])
    return np.concatenate(out)


def _resolve_seed(seed):
    if seed is None:
        return int(np.random.SeedSequence().entropy)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"The 'seed' parameter must be a non-negative integer or None; got {seed!r}")
    return int(seed)


def _make_sampler(strategy, n, seed, block_size, params):
    strategy = check_choice(strategy, "strategy", STRATEGIES)
    n = check_int(n, "n", min_value=2)
    block_size = check_int(block_size, "block_size", min_value=1)
    unknown = set(params) - set(_STRATEGY_PARAMS[strategy])
    if unknown:
        raise InputError(
            f"Unknown parameter(s) {sorted(unknown)} for strategy {strategy!r}; "
            f"it takes {sorted(_STRATEGY_PARAMS[strategy])}"
        )
    resolved = {**_STRATEGY_PARAMS[strategy], **params}
    if strategy == "full":
        resolved["max_n"] = check_int(resolved["max_n"], "max_n", min_value=2)
        if n > resolved["max_n"]:
            raise InputError(
                f"strategy 'full' stores all n*(n-1)/2 pairs and is limited to n <= "
                f"max_n={resolved['max_n']}; got n={n} (raise max_n, or sample with another strategy)"
            )
    if strategy == "uniform":
        resolved["p"] = check_rate(resolved["p"], "p")
    if strategy in ("per-point", "cocluster"):
        resolved["l"] = check_int(resolved["l"], "l", min_value=1)
        if resolved["l"] >= n:
            raise InputError(f"The 'l' parameter must be < n={n}; got l={resolved['l']}")
    if strategy == "cocluster":
        resolved["fraction"] = _check_fraction(resolved["fraction"])
    return _Sampler(strategy, n, _resolve_seed(seed), block_size, resolved)


def _check_fraction(value):
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not (0.0 <= float(value) <= 1.0):
        raise InputError(f"The 'fraction' parameter must be a number in [0, 1]; got {value!r}")
    return float(value)


def _unique(keys):
    """Sorted unique values of an int64 array (a sort and a mask)."""
    keys = np.sort(keys)
    if keys.size:
        keep = np.empty(keys.size, dtype=bool)
        keep[0] = True
        np.not_equal(keys[1:], keys[:-1], out=keep[1:])
        keys = keys[keep]
    return keys


def _cluster_index(labels):
    """``(members, start)`` of :func:`~._kernels.cluster_index_kernel`; the clusterings are split over
    this process's cores when there are many labels (each thread fills its own columns)."""
    n, n_clust = labels.shape
    if n >= 2**31:
        raise InputError(f"the cocluster index holds at most 2**31 - 1 points in memory; got {n}")
    n_ids = max(int(labels.max(initial=-1)) + 1, 1)
    if n * n_clust < THREADED_LABELS or n_clust < 2:
        return _k.cluster_index_kernel(labels, n_ids)
    members = np.empty((n_clust, n), dtype=np.int32)
    start = np.zeros((n_clust, n_ids + 1), dtype=np.int64)
    bounds = np.linspace(0, n_clust, min(n_clust, usable_cores()) + 1).astype(int)
    thread_map(
        lambda t: _k.cluster_index_columns(labels, bounds[t], bounds[t + 1], members, start),
        range(len(bounds) - 1),
    )
    return members, start


def _sample_keys(sampler, labels=None, blocks=None):
    """Sorted unique pair keys drawn by the given seed blocks (all by default)."""
    blocks = range(sampler.n_blocks) if blocks is None else blocks
    index = _cluster_index(labels) if sampler.needs_labels else None
    parts = [sampler.block_keys(b, index, labels) for b in blocks]
    keys = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return keys if sampler.row_local else _unique(keys)


def _sample_upper(sampler, labels=None):
    """The pairs of every seed block as an upper-triangle CSR ``(indptr, cols)``: row i holds the
    ``j > i`` of its pairs, ascending (the sorted unique keys, without a global sort)."""
    index = _cluster_index(labels) if sampler.needs_labels else None
    # the seed blocks draw on this process's cores (each from its own seed: the same keys on any number)
    threads = 1 if sampler.n < THREADED_ROWS else None
    parts = thread_map(
        lambda b: sampler.block_keys(b, index, labels), range(sampler.n_blocks), max_threads=threads
    )
    keys = np.concatenate(parts) if parts else np.zeros(0, dtype=np.int64)
    return _k.upper_csr_kernel(keys, sampler.n)


def _check_sampler_labels(sampler, labels):
    if sampler.needs_labels:
        if labels is None:
            raise InputError("strategy 'cocluster' draws partners from base clusters: pass labels")
        labels = check_labels_matrix(labels)
        if labels.shape[0] != sampler.n:
            raise InputError(f"labels has {labels.shape[0]} rows but n={sampler.n}")
    return labels


def sample_pairs(strategy, n, *, seed, labels=None, block_size=DEFAULT_BLOCK_SIZE, **params):
    """Draw a sparse set of unordered point pairs.

    Parameters
    ----------
    strategy : {"full", "uniform", "per-point", "cocluster"}
        ``full``: every pair (refused for ``n > max_n``). ``uniform``: each pair kept
        independently with probability ``p``, drawn by geometric skips over the upper
        triangle, never enumerating the n^2 pairs. ``per-point``: every point draws ``l``
        partners uniformly (with replacement; pairs deduplicated, so a point has about
        ``2 l`` neighbours in the end). ``cocluster``: like ``per-point``, but a share
        ``fraction`` of each point's ``l`` draws is a uniform other member of its cluster in
        a uniformly chosen base clustering that holds it (needs ``labels``).
    n : int
        Number of points.
    seed : int or None
        Root of all randomness; ``None`` draws fresh OS entropy.
    labels : array-like of shape (n, N), default=None
        Base labels; required by ``cocluster`` only.
    block_size : int, default=4096
        Rows per seed block. Changing it changes the pairs; the Dask chunking does not.
    **params
        ``max_n`` (full, default=5000), ``p`` (uniform, in (0, 1], default=0.00025, the
        paper's 0.25 per mille), ``l`` (per-point and cocluster, 1 <= l < n, default=30),
        ``fraction`` (cocluster, in [0, 1], default=0.5).

    Returns
    -------
    i, j : ndarray of shape (P,), int64
        Unique pairs with ``i < j``, sorted by i then j.

    Examples
    --------
    >>> i, j = sample_pairs("full", 3, seed=0)
    >>> i.tolist(), j.tolist()
    ([0, 0, 1], [1, 2, 2])
    >>> i, j = sample_pairs("per-point", 1000, seed=1, l=5)
    >>> bool(np.all(i < j)), 4000 < len(i) <= 5000
    (True, True)
    """
    sampler = _make_sampler(strategy, n, seed, block_size, params)
    labels = _check_sampler_labels(sampler, labels)
    indptr, cols = _sample_upper(sampler, labels)
    return np.repeat(np.arange(sampler.n, dtype=np.int64), np.diff(indptr)), cols

"""k-means in NumPy, for the small inputs of a consensus (a spectral embedding's rows): there, importing
scikit-learn (about a second: it imports SciPy's statistics and pandas) costs more than the fit itself, and
a command on small data pays it every time. Above :data:`SMALL_KMEANS` rows x clusters the callers use
scikit-learn's ``KMeans``, whose compiled loops are faster there; the graph consensus finds the nearest
neighbours of a small sample likewise (:data:`SMALL_SEARCH`).

:func:`kmeans` is scikit-learn's algorithm: greedy k-means++ seeding (``2 + log K`` local trials), Lloyd
iterations to a centre shift below ``tol`` times the mean variance of the columns (or no label changed), an
emptied cluster given the row farthest from its centre, the best of ``n_init`` starts by inertia; its random
draws are its own (NumPy's ``Generator``), so its partition is not scikit-learn's for the same seed."""

from __future__ import annotations

import numpy as np

__all__ = ["SMALL_KMEANS", "SMALL_SEARCH", "kmeans"]

#: at most this many rows x clusters: :func:`kmeans` (a fit of ten starts takes milliseconds)
SMALL_KMEANS = 100_000
#: at most this many rows x queries x columns: every distance computed, no tree (a tenth of a second)
SMALL_SEARCH = 100_000_000


def _sq_distances(A, B):
    """``|a - b|^2`` of every row of ``A`` to every row of ``B`` (``len(A) x len(B)``), by one product."""
    d = (A * A).sum(axis=1)[:, None] - 2.0 * (A @ B.T) + (B * B).sum(axis=1)[None, :]
    return np.maximum(d, 0.0)


def _seeding(U, w, k, rng):
    """Greedy k-means++ (Arthur & Vassilvitskii 2007, with scikit-learn's ``2 + int(log k)`` local trials):
    ``k`` rows of ``U`` as the first centres."""
    n = U.shape[0]
    trials = 2 + int(np.log(k))
    centres = np.empty((k, U.shape[1]))
    first = rng.choice(n, p=w / w.sum())
    centres[0] = U[first]
    closest = _sq_distances(U, U[first : first + 1])[:, 0]
    for c in range(1, k):
        weighted = w * closest
        total = weighted.sum()
        if total > 0:
            picks = np.searchsorted(np.cumsum(weighted), rng.random(trials) * total, side="right")
            picks = np.minimum(picks, n - 1)
        else:  # every row on a centre already
            picks = rng.choice(n, size=trials)
        candidates = np.minimum(closest[:, None], _sq_distances(U, U[picks]))
        best = int(np.argmin(w @ candidates))
        closest = candidates[:, best]
        centres[c] = U[picks[best]]
    return centres


def _lloyd(U, w, centres, max_iter, tol):
    """Lloyd's iterations from ``centres``: ``(labels, inertia)``."""
    n, k = U.shape[0], centres.shape[0]
    labels = None
    for _ in range(max_iter):
        d = _sq_distances(U, centres)
        new = np.argmin(d, axis=1)
        mass = np.bincount(new, weights=w, minlength=k)
        empty = np.flatnonzero(mass == 0)
        if empty.size:  # each emptied cluster takes the row farthest from its centre
            far = np.argsort(-d[np.arange(n), new], kind="stable")[: empty.size]
            new[far] = empty
            mass = np.bincount(new, weights=w, minlength=k)
        sums = np.zeros_like(centres)
        np.add.at(sums, new, U * w[:, None])
        moved = sums / np.maximum(mass, 1e-300)[:, None]
        shift = float(((moved - centres) ** 2).sum())
        same = labels is not None and np.array_equal(new, labels)
        centres, labels = moved, new
        if same or shift <= tol:
            break
    d = _sq_distances(U, centres)
    labels = np.argmin(d, axis=1)
    return labels, float(w @ d[np.arange(n), labels])


def kmeans(U, k, *, n_init=10, seed=None, sample_weight=None, max_iter=300, tol=1e-4):
    """Labels (int64) of weighted k-means of the rows of ``U`` into ``k`` clusters: the best of ``n_init``
    starts by inertia (see the module's docstring).

    Examples
    --------
    >>> U = np.array([[0.0], [0.1], [5.0], [5.2]])
    >>> labels = kmeans(U, 2, seed=0)
    >>> bool(labels[0] == labels[1] != labels[2] == labels[3])
    True
    """
    U = np.asarray(U, dtype=np.float64)
    w = np.ones(U.shape[0]) if sample_weight is None else np.asarray(sample_weight, dtype=np.float64)
    rng = np.random.default_rng(seed)
    tol = tol * float(np.mean(np.var(U, axis=0))) if U.size else 0.0
    best, best_inertia = None, np.inf
    for _ in range(int(n_init)):
        labels, inertia = _lloyd(U, w, _seeding(U, w, k, rng), max_iter, tol)
        if inertia < best_inertia:
            best, best_inertia = labels, inertia
    return best.astype(np.int64)

"""The starts of PCC's and PPC's descents: a checked ``init`` (random, hard labels, a membership matrix or a
list of candidates), the best of several candidates by their objective, and the descent's own array made
from the chosen one.
"""

from __future__ import annotations

import numpy as np

from ..._validation import InputError, check_choice
from .._common import pair_kernels as _pairk
from .._common.base import dense_codes
from . import _kernels as _k

_KL_EPS = 1e-10  # KL's second argument is clamped into [eps, 1 - eps]
_INIT_CONCENTRATION = 10.0  # Dirichlet(alpha = this) start: random, near uniform


def check_init(init, n, k, smoothing=0.0, *, vertex_labels=False):
    """None for ``"random"``, else the start as an ``(n, k)`` float64 array with rows on the simplex;
    a list or tuple of starts gives a list of such arrays (candidates, see :func:`_best_start`).

    With ``vertex_labels``, a start of hard labels that puts every row on a vertex (no smoothing, no
    ``-1``) is returned as its codes in ``[0, k)`` instead (int64, shape ``(n,)``): candidates are compared
    from their labels, and only the chosen one becomes a matrix (:func:`_start_matrix`)."""
    if (
        isinstance(init, (list, tuple))
        and init
        and all(np.ndim(v) == 0 and not isinstance(v, str) for v in init)
    ):
        init = np.asarray(init)  # one start given as a plain list of labels (``labels_.tolist()``)
    if isinstance(init, (list, tuple)):
        if not init:
            raise InputError("The 'init' list of candidate starts is empty")
        starts = [
            check_init(one, n, k, smoothing, vertex_labels=vertex_labels)
            for one in init
            if not isinstance(one, str)
        ]
        return starts or None
    if isinstance(init, str):
        check_choice(init, "init", {"random"})
        return None
    arr = np.asarray(init)
    if arr.shape == (n,) and np.issubdtype(arr.dtype, np.integer):
        known = arr >= 0
        vals = arr[known]
        n_codes, inv = dense_codes(vals, n)
        if n_codes > k:
            raise InputError(
                f"The 'init' labels must have at most n_clusters={k} distinct values; got {n_codes}"
            )
        if smoothing == 0.0 and vals.size == n:  # every row a vertex
            if vertex_labels:
                return np.asarray(inv, dtype=np.int64)
            Y = np.zeros((n, k))
            Y[np.arange(n), inv] = 1.0
            return Y
        Y = np.full((n, k), 1.0 / k)
        Y[known] *= smoothing
        Y[np.flatnonzero(known), inv] += 1.0 - smoothing
        return Y
    if arr.shape == (n, k) and np.issubdtype(arr.dtype, np.number):
        Y = arr.astype(np.float64)
        tot = Y.sum(axis=1, keepdims=True)
        if not np.all(np.isfinite(Y)) or np.any(Y < 0) or np.any(tot <= 0):
            raise InputError("The 'init' memberships must be finite, non-negative, and no row all zero")
        return np.ascontiguousarray((1.0 - smoothing) * (Y / tot) + smoothing / k)
    raise InputError(
        f"The 'init' parameter must be 'random', {n} integer labels or an ({n}, {k}) membership "
        f"matrix; got {type(init).__name__} of shape {arr.shape} and dtype {arr.dtype}"
    )


def _start_matrix(start, k):
    """The ``(n, k)`` start of a :func:`check_init` result: vertex labels become their one-hot rows."""
    if start.ndim == 2:
        return start
    Y = np.zeros((start.shape[0], k))
    Y[np.arange(start.shape[0]), start] = 1.0
    return Y


def _work_rows(start, k):
    """The descent's ``n x 2K`` array (:func:`._kernels.aligned_rows`: each row's memberships, then its kept
    pair gradient) with ``start`` (vertex labels, written as their one-hot rows, or an ``n x k`` matrix) in
    its first ``k`` columns."""
    Y = _k.aligned_rows(start.shape[0], 2 * k)
    if start.ndim == 1:
        _k.one_hot_rows(start, Y, k)
    else:
        Y[:, :k] = start
    return Y


def _vertex_labels(Y):
    """The labels of a start whose every row is a vertex of the simplex, else None."""
    if Y.ndim == 1:  # vertex labels of check_init(..., vertex_labels=True)
        return Y
    lab = Y.argmax(axis=1)
    return lab if np.array_equal(Y[np.arange(Y.shape[0]), lab], np.ones(Y.shape[0])) else None


def _matched(la, lb, k):
    """``lb`` relabelled so that each of its clusters takes the label of A's cluster it overlaps most,
    where that is one-to-one (f is symmetric in the labels; matching makes few rows differ)."""
    table = np.bincount(lb * k + la, minlength=k * k).reshape(k, k)
    to = table.argmax(axis=1)
    used = table.sum(axis=1) > 0
    if np.unique(to[used]).size != int(used.sum()):
        return lb
    return to[lb]


def _best_start(starts, data, w, indices, code, diag, k=None, need_f=True, matrix=True):
    """``(start, f)``: of several candidate starts (or one), the one with the lowest objective (f for PCC,
    P for PPC), and that objective (nan for a random start: not drawn yet). Vertex starts (hard labels) are
    compared by f(B) - f(A), summed over the pairs of the points whose (matched) labels differ: near-identical
    starts cost next to nothing. ``k`` (the matrices' width) is needed when a start is given as vertex
    labels. Without ``need_f`` f is nan, not computed (the caller's descent starts elsewhere, or computes
    it): a single candidate is returned as it is, and vertex starts are compared by their changes alone,
    without the first one's f, a pass over every pair. Without ``matrix`` a start of vertex labels is
    returned as them (for :func:`_work_rows`)."""
    if starts is None:
        return None, np.nan
    if not isinstance(starts, list):
        starts = [starts]
    k = next((Y.shape[1] for Y in starts if Y.ndim == 2), k)
    if len(starts) == 1 and not need_f:
        return _start_matrix(starts[0], k) if matrix else starts[0], np.nan
    args = (data.indptr, indices, data.x, w)
    labs = [_vertex_labels(Y) for Y in starts]
    if all(lab is not None for lab in labs):
        base = labs[0]
        objs = [_pairk.objective_labels(*args, base, code, _KL_EPS) if need_f else 0.0]
        for lab in labs[1:]:
            objs.append(
                objs[0] + _pairk.objective_change_labels(*args, base, _matched(base, lab, k), code, _KL_EPS)
            )
    else:
        starts = [_start_matrix(Y, k) for Y in starts]
        objs = [_k.objective(*args, Y, code, _KL_EPS, diag) for Y in starts]
    best = int(np.argmin(objs))
    return _start_matrix(starts[best], k) if matrix else starts[best], float(objs[best]) if need_f else np.nan


def _start(rng, n, k):
    """A seeded random start near the uniform point (which is stationary, so never used itself)."""
    return np.ascontiguousarray(rng.dirichlet(np.full(k, _INIT_CONCENTRATION), size=n))

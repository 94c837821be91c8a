"""``AutoConsensus``: the consensus result of highest ANMI among several methods' (Strehl & Ghosh 2002)."""

from __future__ import annotations

from numbers import Integral

from ..._validation import InputError, check_labels_matrix
from .. import registry
from .._common.agreement import anmi
from .._common.params import Interval, ParamsMixin

__all__ = ["AutoConsensus", "CANDIDATES", "anmi"]

#: the methods ``auto`` fits by default: those of this package whose time grows linearly with the rows
CANDIDATES = ("pcc-kl", "pcc-l2", "bce", "mm", "kcc", "hbgf")


def resolve(name):
    """``(method, parameters)`` of a candidate's name: a registered method, or ``pcc-kl`` / ``pcc-l2``."""
    if name in registry.ALIASES:
        method, preset = registry.ALIASES[name]
        return method, dict(preset)
    if name in registry.names() and name != "auto":
        return name, {}
    raise InputError(
        f"The 'candidates' parameter of AutoConsensus names consensus methods of {registry.names()} (not "
        f"auto) or pcc-kl, pcc-l2; got {name!r}"
    )


class AutoConsensus(ParamsMixin):
    """The consensus result that agrees best with the ensemble: each candidate method is fitted, and the one
    whose labels have the highest :func:`anmi` with the base clusterings is kept (Strehl and Ghosh's
    criterion of a consensus, computed from the labels alone: never from reference labels).

    Parameters
    ----------
    n_clusters : int, default=2
        ``K``, for every candidate.
    candidates : sequence of str, default=:data:`CANDIDATES`
        The methods fitted: names of :mod:`~ensemble_dask.consensus.registry` or ``pcc-kl`` / ``pcc-l2``.
    random_state : int, Generator or None, default=None
        The seed of every candidate.

    Attributes
    ----------
    labels_, memberships_, uncertainty_, effective_k_
        The chosen result's.
    chosen_ : str
        The candidate kept.
    estimator_ : estimator
        Its fitted estimator.
    scores_ : dict
        Every candidate's ANMI.

    Examples
    --------
    >>> import numpy as np
    >>> labels = np.array([[0, 1, 0], [0, 1, 0], [0, 1, 1], [1, 0, 2], [1, 0, 2], [1, 2, 2]])
    >>> auto = AutoConsensus(2, candidates=["kcc", "hbgf"], random_state=0).fit(labels)
    >>> auto.chosen_ in ("kcc", "hbgf"), sorted(auto.scores_)
    (True, ['hbgf', 'kcc'])
    """

    _parameter_constraints = {
        "n_clusters": [Interval(Integral, 2, None)],
        "candidates": [str, "array-like"],  # and each a method's name (below)
        "random_state": ["random_state"],
    }

    def __init__(self, n_clusters=2, *, candidates=CANDIDATES, random_state=None):
        self.n_clusters = n_clusters
        self.candidates = candidates
        self.random_state = random_state

    def _validate_params(self):
        super()._validate_params()
        names = [self.candidates] if isinstance(self.candidates, str) else list(self.candidates)
        if not names or len(set(names)) != len(names):
            raise InputError(
                f"The 'candidates' parameter of AutoConsensus must name one method or more, each once; got "
                f"{self.candidates!r}"
            )
        for name in names:
            resolve(name)
        return names

    def fit(self, labels, pairs=None, *, fit_candidate=None):
        """Fit every candidate and keep the best; returns ``self``.

        ``labels``: the ``n x N`` base labels (``-1`` absent; a zarr array is read by blocks of rows), which
        every candidate's ANMI is computed on. ``fit_candidate(name, method, params)`` returns a candidate's
        fitted estimator (the ``consensus`` stage fits it as it fits that method alone: its starts, its
        pairs, its row blocks); by default a method on labels is fitted on ``labels`` and one on pairs on
        ``pairs`` (required then: a :class:`~ensemble_dask.PairCounts` or pair data).
        """
        names = self._validate_params()
        if fit_candidate is None:
            labels = check_labels_matrix(labels)
            fit_candidate = self._fitter(labels, pairs)
        scores, fitted = {}, {}
        for name in names:
            method, params = resolve(name)
            params = {**params, "n_clusters": self.n_clusters}
            takes = registry.get(method).estimator_class()._get_param_names()
            if self.random_state is not None and "random_state" in takes:
                params["random_state"] = self.random_state  # (EAC and the other deterministic ones take none)
            est = fit_candidate(name, method, params)
            scores[name] = anmi(est.labels_, labels)
            fitted[name] = est
        best = max(names, key=lambda nm: (scores[nm], -names.index(nm)))  # a tie: the first listed
        est = fitted[best]
        self.chosen_, self.estimator_, self.scores_ = best, est, scores
        self.memberships_, self.labels_ = est.memberships_, est.labels_
        self.uncertainty_, self.effective_k_ = est.uncertainty_, est.effective_k_
        return self

    @staticmethod
    def _fitter(labels, pairs):
        def fit(name, method, params):
            entry = registry.get(method)
            est = entry.estimator_class()(**params)
            if entry.fits_on == "pairs":
                if pairs is None:
                    raise InputError(f"AutoConsensus: candidate {name!r} fits on pairs: give pairs to fit")
                return est.fit(pairs)
            if entry.fits_on == "labels+X":
                raise InputError(
                    f"AutoConsensus: candidate {name!r} needs the features; it is not a candidate"
                )
            return est.fit(labels)

        return fit

    def fit_predict(self, labels, pairs=None):
        """Fit and return ``labels_``."""
        return self.fit(labels, pairs).labels_

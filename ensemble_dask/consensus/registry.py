"""The one registry of consensus methods.

The ``consensus`` stage, the workflow checks, the command line's help and the report page read it: adding
a method is its estimator's module and one :func:`register` call (below, or in a plugin). The estimator is
imported only when a method is used, so reading the registry imports no solver.

An estimator of the registry follows scikit-learn's conventions: parameters in ``__init__`` (with
``n_clusters``, and ``random_state`` when it draws anything), ``fit(labels)``, ``fit(pairs)`` or
``fit(labels, X)`` as :attr:`Method.fits_on` says, and after ``fit`` the attributes ``memberships_``
(n x K soft memberships), ``labels_``, ``uncertainty_`` and ``effective_k_``; optionally ``converged_``,
``objective_`` or ``lower_bound_``, ``objective_trace_`` and ``n_iter_``. Its parameters are declared in
``_parameter_constraints`` and checked by ``_validate_params()`` (from
:class:`~ensemble_dask.consensus._common.params.ParamsMixin`), which the workflow checks call before any
stage runs.
"""

from __future__ import annotations

import importlib
from dataclasses import dataclass

from .._validation import InputError

__all__ = ["Method", "register", "get", "names", "FITS_ON", "ALIASES"]

#: what a method's ``fit`` takes: the co-association ``pairs``, the ``labels`` matrix, labels and ``X``, or
#: labels and pairs (``auto``: it fits methods of both kinds)
FITS_ON = ("pairs", "labels", "labels+X", "labels+pairs")


@dataclass(frozen=True)
class Method:
    """A consensus method of the registry.

    Parameters
    ----------
    name : str
        Its name in workflows and on the command line (``pcc``, ``bce``, ...).
    estimator : str
        ``"module:Class"`` of its estimator, the module relative to :mod:`ensemble_dask.consensus` when it
        starts with a dot.
    fits_on : {"pairs", "labels", "labels+X", "labels+pairs"}
        What its ``fit`` takes.
    summary : str
        One line for the command line's help.
    row_blocks : bool, default=False
        It fits on the Dask cluster's row blocks of labels too large for one process (BCE's E-step, KCC's
        Lloyd step).
    starts : tuple of str, default=()
        The starts (``init``) a workflow may give it, the first being the default; ``"auto"`` is HBGF's
        partition of the store's labels, from which the method descends.
    hbgf_start : bool, default=False
        Its default start is HBGF's partition (its stage record carries the starts' tag, so a store
        finished with an older default is not up to date).
    trace : str, default="objective"
        What its trace is, for the report's figure: ``"objective"`` or ``"lower bound"``.
    fine_ensemble : bool, default=False
        Its default ensemble has many small clusters, every row labelled (``generate``'s ``fine``: k in
        ``[K, floor(sqrt(min(n, 20000)))]``, ``extend``); a workflow of such methods only gets it by default.
    chooses_k : bool, default=False
        Its ``n_clusters`` may be ``"auto"`` or a range ``[k_min, k_max]``: it fits every K of the range and
        keeps the best (``n_clusters_``, ``k_scores_``).
    """

    name: str
    estimator: str
    fits_on: str
    summary: str
    row_blocks: bool = False
    starts: tuple = ()
    hbgf_start: bool = False
    trace: str = "objective"
    fine_ensemble: bool = False
    chooses_k: bool = False

    def estimator_class(self):
        """The estimator's class (imported now)."""
        module, _, cls = self.estimator.partition(":")
        return getattr(importlib.import_module(module, package=__package__), cls)


_REGISTRY: dict[str, Method] = {}
#: the methods with a fit on the Dask cluster's row blocks (``stages.consensus._fit_on_cluster``)
_ROW_BLOCK_FITTERS = ("bce", "kcc")


def register(method):
    """Add ``method`` (a :class:`Method`) to the registry; a name taken already is an error."""
    if method.fits_on not in FITS_ON:
        raise ValueError(f"method {method.name!r}: fits_on must be one of {FITS_ON}; got {method.fits_on!r}")
    if method.row_blocks and method.name not in _ROW_BLOCK_FITTERS:
        raise ValueError(
            f"method {method.name!r}: row_blocks needs a fitter on the cluster's row blocks; there are "
            f"{sorted(_ROW_BLOCK_FITTERS)} only"
        )
    if method.starts and (method.starts[0] != "auto" or not set(method.starts) <= {"auto", "random"}):
        raise ValueError(
            f"method {method.name!r}: starts are 'auto' (the default, first) and 'random'; "
            f"got {method.starts}"
        )
    if method.name in _REGISTRY:
        raise ValueError(f"a consensus method named {method.name!r} is registered already")
    _REGISTRY[method.name] = method
    return method


def unregister(name):
    """Remove the method ``name`` (a plugin's, or a test's)."""
    _REGISTRY.pop(name, None)


def get(name):
    """The :class:`Method` named ``name``; an unknown name is an :class:`InputError` listing the known."""
    try:
        return _REGISTRY[name]
    except KeyError:
        raise InputError(f"unknown consensus method {name!r}; known: {names()}") from None


#: names that are a method with a parameter set: PCC with its divergence
ALIASES = {"pcc-kl": ("pcc", {"divergence": "kl"}), "pcc-l2": ("pcc", {"divergence": "l2"})}


def names():
    """The registered methods' names, sorted."""
    return sorted(_REGISTRY)


_PAIR_START = {"starts": ("auto", "random"), "hbgf_start": True}
for _method in (
    Method("pcc", ".pcc:PCC", "pairs", "probabilistic consensus clustering (pcc-kl, pcc-l2: its divergence)",
           **_PAIR_START),
    Method("ppc", ".pcc:PPC", "pairs", "pairwise probabilistic clustering", **_PAIR_START),
    Method("bce", ".bce:BCE", "labels", "Bayesian cluster ensembles (variational EM)", row_blocks=True,
           hbgf_start=True, trace="lower bound"),
    Method("mm", ".bce:MM", "labels", "mixture model of multinomials (EM)", hbgf_start=True,
           trace="lower bound"),
    Method("gbce", ".bce:GBCE", "labels+X", "generalized BCE: the labels and the features (Gaussian)",
           hbgf_start=True, trace="lower bound"),
    Method("kcc", ".kcc:KCC", "labels", "k-means-based consensus clustering", row_blocks=True,
           hbgf_start=True),
    Method("gkcc", ".kcc:GKCC", "labels", "greedy KCC (generates its own partitions, then KCC)"),
    Method("eac-sl", ".baselines:EACSingleLink", "pairs", "evidence accumulation, single link"),
    Method("eac-al", ".baselines:EACAverageLink", "pairs", "evidence accumulation, average link"),
    Method("cspa", ".baselines:CSPA", "pairs", "cluster-based similarity partitioning"),
    Method("hgpa", ".baselines:HGPA", "labels", "hypergraph partitioning"),
    Method("mcla", ".baselines:MCLA", "labels", "meta-clustering"),
    Method("hbgf", ".baselines:HBGF", "labels", "bipartite graph of points and clusters (spectral)"),
    Method("graph", ".graph:GraphConsensus", "labels+X",
           "Genie or spectral on a sparse nearest-neighbour co-association graph (with the features)",
           fine_ensemble=True, chooses_k=True),
    Method("auto", ".selection:AutoConsensus", "labels+pairs",
           "the result of highest ANMI with the ensemble among pcc-kl, pcc-l2, bce, mm, kcc, hbgf"),
):  # fmt: skip
    register(_method)

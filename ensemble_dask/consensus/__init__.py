"""Consensus solvers on NumPy alone (no Dask, no store), one package per family: ``pcc`` (PCC, PPC on the
co-association pairs), ``bce`` (BCE, GBCE, MM on the labels matrix), ``kcc`` (KCC, GKCC on the labels) and
``baselines`` (EAC, CSPA, HGPA, MCLA, HBGF), ``graph`` (a consensus on a sparse nearest-neighbour
co-association graph, with the features), over ``starts`` (the partitions the families start from) and
``_common`` (what they share). Families never import each other. :mod:`.registry` lists every method."""

import importlib
from typing import TYPE_CHECKING

if TYPE_CHECKING:  # what type checkers and the API docs read; at run time a family is imported on first use
    from .baselines import CSPA, HBGF, HGPA, MCLA, EACAverageLink, EACSingleLink
    from .bce import BCE, GBCE, MM
    from .graph import GraphConsensus
    from .kcc import GKCC, KCC
    from .pcc import PCC, PPC

__all__ = [
    "PCC",
    "PPC",
    "BCE",
    "GBCE",
    "MM",
    "KCC",
    "GKCC",
    "EACSingleLink",
    "EACAverageLink",
    "CSPA",
    "HGPA",
    "MCLA",
    "HBGF",
    "GraphConsensus",
]

#: each solver's family: a solver is imported on first use, so reading :mod:`.registry` (every command's
#: ``consensus --help`` text) imports no solver, numba or scikit-learn
_FAMILY = {
    "PCC": "pcc",
    "PPC": "pcc",
    "BCE": "bce",
    "GBCE": "bce",
    "MM": "bce",
    "KCC": "kcc",
    "GKCC": "kcc",
    "EACSingleLink": "baselines",
    "EACAverageLink": "baselines",
    "CSPA": "baselines",
    "HGPA": "baselines",
    "MCLA": "baselines",
    "HBGF": "baselines",
    "GraphConsensus": "graph",
}


def __getattr__(name):
    if name in _FAMILY:
        return getattr(importlib.import_module(f".{_FAMILY[name]}", __name__), name)
    if name in set(_FAMILY.values()) | {"starts", "selection", "registry"}:
        return importlib.import_module(f".{name}", __name__)
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")


def __dir__():
    return sorted(set(globals()) | set(__all__))

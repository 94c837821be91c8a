"""Consensus solvers on NumPy alone (no Dask, no store), one package per family: ``pcc`` (PCC, PPC on the
co-association pairs), ``bce`` (BCE, GBCE, MM on the labels matrix), ``kcc`` (KCC, GKCC on the labels) and
``baselines`` (EAC, CSPA, HGPA, MCLA, HBGF), over ``starts`` (the partitions the families start from) and
``_common`` (what they share). Families never import each other. :mod:`.registry` lists every method."""

from .baselines import CSPA, HBGF, HGPA, MCLA, EACAverageLink, EACSingleLink
from .bce import BCE, GBCE, MM
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
]

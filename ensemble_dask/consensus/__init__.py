"""Consensus solvers on NumPy alone (no Dask, no store): PCC and PPC on co-association counts,
BCE, GBCE and MM on a labels matrix with missing entries."""

from .baselines import CSPA, HBGF, HGPA, MCLA, EACAverageLink, EACSingleLink
from .bce import BCE, GBCE, MM
from .gkcc import GKCC
from .kcc import KCC
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

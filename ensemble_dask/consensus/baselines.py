"""The classic consensus baselines, by the names the consensus stage and the CLI use.

* on the co-association pairs (``fit(pairs)``, a :class:`~ensemble_dask.pairs.PairCounts`):
  ``eac-sl`` :class:`EACSingleLink`, ``eac-al`` :class:`EACAverageLink`, ``cspa`` :class:`CSPA`
  (:mod:`.baselines_pairs`);
* on the labels matrix (``fit(labels)``): ``hgpa`` :class:`HGPA`, ``mcla`` :class:`MCLA`,
  ``hbgf`` :class:`HBGF` (:mod:`.baselines_labels`), and ``kcc`` / ``gkcc``
  (:class:`~ensemble_dask.consensus.kcc.KCC`, :class:`~ensemble_dask.consensus.gkcc.GKCC`).
"""

from __future__ import annotations

from .baselines_labels import HBGF, HGPA, MCLA
from .baselines_pairs import CSPA, EACAverageLink, EACSingleLink
from .gkcc import GKCC
from .kcc import KCC

__all__ = ["EACSingleLink", "EACAverageLink", "CSPA", "HGPA", "MCLA", "HBGF", "METHODS", "INPUT"]

#: estimator class of each method name
METHODS = {
    "kcc": KCC,
    "gkcc": GKCC,
    "eac-sl": EACSingleLink,
    "eac-al": EACAverageLink,
    "cspa": CSPA,
    "hgpa": HGPA,
    "mcla": MCLA,
    "hbgf": HBGF,
}

#: what each method's ``fit`` takes: the ``labels`` matrix or the co-association ``pairs``
INPUT = {
    "kcc": "labels",
    "gkcc": "labels",
    "eac-sl": "pairs",
    "eac-al": "pairs",
    "cspa": "pairs",
    "hgpa": "labels",
    "mcla": "labels",
    "hbgf": "labels",
}

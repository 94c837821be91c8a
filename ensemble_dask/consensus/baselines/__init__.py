"""The classic consensus baselines (their names in workflows and on the command line are in
:mod:`ensemble_dask.consensus.registry`).

* on the co-association pairs (``fit(pairs)``, a :class:`~ensemble_dask.pairs.PairCounts`):
  ``eac-sl`` :class:`EACSingleLink`, ``eac-al`` :class:`EACAverageLink`, ``cspa`` :class:`CSPA`
  (:mod:`._pairs`);
* on the labels matrix (``fit(labels)``): ``hgpa`` :class:`HGPA`, ``mcla`` :class:`MCLA`,
  ``hbgf`` :class:`HBGF` (:mod:`._labels`), and ``kcc`` / ``gkcc``
  (:class:`~ensemble_dask.consensus.KCC`, :class:`~ensemble_dask.consensus.GKCC`).
"""

from __future__ import annotations

from ._labels import HBGF, HGPA, MCLA
from ._pairs import CSPA, EACAverageLink, EACSingleLink

__all__ = ["EACSingleLink", "EACAverageLink", "CSPA", "HGPA", "MCLA", "HBGF"]

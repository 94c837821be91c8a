"""The BCE family on the labels matrix: :class:`BCE` (Bayesian cluster ensembles, variational EM of a
mixed-membership model), :class:`GBCE` (BCE with the original features) and :class:`MM` (the mixture of
multinomials, plain EM).

Inside: ``_em`` holds what every fit shares, from the packed E-step statistics to the EM driver (also driven
on a cluster's row blocks by :mod:`ensemble_dask.rowblocks` and across sites by
:mod:`ensemble_dask.federated`); ``_seeding`` their starts; ``_base`` the estimators' common class;
``_kernels`` the numba E-steps.
"""

from ._bce import BCE
from ._em import BCEWarning, EmptyRowsWarning, UnseenLabelsWarning
from ._gbce import GBCE
from ._mm import MM

__all__ = ["BCE", "GBCE", "MM", "BCEWarning", "EmptyRowsWarning", "UnseenLabelsWarning"]

"""The KCC family on the labels matrix: :class:`KCC` (k-means-based consensus clustering, k-means on the
one-hot labels never built densely) and :class:`GKCC` (greedy KCC, which makes its own partitions first).

Inside: ``_blocks`` holds KCC's steps on blocks of rows (also driven on a cluster's row blocks by
:mod:`ensemble_dask.rowblocks` and across sites by :mod:`ensemble_dask.federated`); ``_kernels`` the numba
Lloyd steps.
"""

from ._gkcc import GKCC
from ._kcc import KCC

__all__ = ["KCC", "GKCC"]

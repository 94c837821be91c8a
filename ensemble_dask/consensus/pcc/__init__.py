"""The pair family on the co-association pairs: :class:`PCC` (probabilistic consensus clustering, KL or
squared L2 divergence) and :class:`PPC` (pairwise probabilistic clustering, Baum-Eagon).

Inside: ``_kernels`` and ``_ppc_kernels`` hold the numba sweeps, ``_stored`` the fit on a pairs store too
large for memory.
"""

from ._pcc import DIVERGENCES, PCC, PPC

__all__ = ["PCC", "PPC", "DIVERGENCES"]

"""Consensus on a sparse co-association graph (``graph``): :class:`GraphConsensus`."""

from __future__ import annotations

from ._graph import GraphConsensus

__all__ = ["GraphConsensus"]

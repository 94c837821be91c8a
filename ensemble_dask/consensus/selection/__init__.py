"""A consensus that picks among the consensus results: :class:`AutoConsensus` fits several methods and keeps
the one whose labels agree best with the ensemble, by :func:`anmi` (no reference labels)."""

from ._auto import CANDIDATES, AutoConsensus, anmi, resolve

__all__ = ["AutoConsensus", "CANDIDATES", "anmi", "resolve"]

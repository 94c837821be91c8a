"""BCE's parameters as a message carries them: ``{"alpha", "beta"}`` float arrays, the coordinator's and a
site's reading of one format."""

from __future__ import annotations

import numpy as np

from ...consensus.bce._em import Params

__all__ = ["params_from_message", "params_to_message"]


def params_to_message(params):
    """``params`` (BCE's ``Params``) as a message's map of float64 arrays."""
    return {
        "alpha": np.array(params.alpha, dtype=np.float64),
        "beta": np.array(params.beta, dtype=np.float64),
    }


def params_from_message(d, k):
    """BCE's ``Params`` of ``k`` clusters from a message's map (``beta`` flattened or ``k x G``)."""
    return Params(
        np.asarray(d["alpha"], dtype=np.float64),
        np.asarray(d["beta"], dtype=np.float64).reshape(k, -1),
        np.zeros((k, 0)),
        np.ones((k, 0)),
    )

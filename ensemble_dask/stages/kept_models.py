"""The arrays a fitted consensus model is kept as in a result's group of the run store, from which
:mod:`.predict` rebuilds it."""

from __future__ import annotations

import numpy as np

__all__ = ["write_model"]


def write_model(out, model, method):
    """The arrays of a fitted ``model`` that ``predict`` rebuilds it from, into the result's group ``out``."""

    def blocks(key, arrays, offsets):
        out.create_array(key, data=np.concatenate([np.asarray(a, dtype=np.float64) for a in arrays], axis=1))
        out[key].attrs["offsets"] = np.asarray(offsets).tolist()

    if hasattr(model, "alpha_"):  # BCE / GBCE: the Dirichlet prior and per-clustering label distributions
        out.create_array("alpha", data=np.asarray(model.alpha_, dtype=np.float64))
    if hasattr(model, "beta_"):
        blocks("beta", model.beta_, np.cumsum([0] + [b.shape[1] for b in model.beta_]))
    for attr in ("weights_", "means_", "variances_"):  # MM's mixing weights, GBCE's Gaussians
        if hasattr(model, attr):
            out.create_array(attr.rstrip("_"), data=np.asarray(getattr(model, attr), dtype=np.float64))
    if method == "graph":  # its base clusters' votes
        blocks("tables", [model.tables_], model.offsets_)
    if method == "kcc":  # its centroids over the fit's labels
        blocks("centers", model.cluster_centers_, model.encoding_.offsets)

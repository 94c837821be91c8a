"""Federated workflows: row-distributed BCE over sites that keep their rows.

A workflow with a ``federated:`` section declares the sites (name, URL of its rows of the labels
matrix, the Dask worker resource its workers offer, optionally an ``output`` URL where the site
writes its own rows' memberships) and the BCE parameters. The coordinator's run store receives
only the model (alpha, beta), the bound trace and the protocol's message counts; memberships stay
with each site. Without a ``scheduler`` the sites are simulated locally: one worker process per
site, offering that site's resource.

:func:`split_sites` cuts the ``labels`` of a run store into per-site arrays, to try the protocol
on one machine.
"""

from __future__ import annotations

import logging

import numpy as np

from .._validation import InputError, check_int
from ..io.store import RunStore

__all__ = ["run_federated_workflow", "split_sites", "FEDERATED_KEYS"]

logger = logging.getLogger(__name__)

FEDERATED_KEYS = {
    "sites",
    "mode",
    "n_clusters",
    "n_init",
    "max_iter",
    "tol",
    "e_step_tol",
    "e_step_max_iter",
    "frac_bits",
}


def split_sites(store, out, names, *, storage_options=None):
    """Write ``store``'s labels, cut in contiguous row blocks, as one zarr array per site.

    Returns the site declarations ``[{"name", "url", "resource", "output"}]`` for a workflow.
    """
    import zarr

    from ..io.urls import make_zarr_store

    if not names:
        raise InputError("split_sites needs at least one site name")
    labels = store["labels"]
    n = labels.shape[0]
    if len(names) > n:
        raise InputError(f"cannot split n={n} rows between {len(names)} sites")
    bounds = np.linspace(0, n, len(names) + 1).astype(int)
    sites = []
    for name, a, b in zip(names, bounds[:-1], bounds[1:], strict=True):
        url = f"{str(out).rstrip('/')}/{name}/labels.zarr"
        z = zarr.create_array(
            make_zarr_store(url, storage_options),
            shape=(b - a, labels.shape[1]),
            dtype="int32",
            overwrite=True,
        )
        z[:] = labels[a:b]
        sites.append(
            {
                "name": name,
                "url": url,
                "resource": name,
                "output": f"{str(out).rstrip('/')}/{name}/memberships.zarr",
            }
        )
    return sites


def run_federated_workflow(spec, *, client=None):
    """Run the ``federated:`` section of a workflow; returns the coordinator's summary dict."""
    from ..federated.rows import run_federated_bce
    from ..parallel import dask_client

    fed = dict(spec.get("federated") or {})
    unknown = set(fed) - FEDERATED_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)} in 'federated'; known: {sorted(FEDERATED_KEYS)}")
    sites = fed.pop("sites", None)
    if not isinstance(sites, list) or not sites:
        raise InputError(f"'federated.sites' must be a non-empty list of sites; got {sites!r}")
    n_clusters = check_int(fed.pop("n_clusters", None), "federated.n_clusters", min_value=1)
    seed = int(spec.get("seed", 0))
    from .._validation import stage_seed

    fed.setdefault("random_state", int(stage_seed(seed, "federated").generate_state(1)[0]))
    store = RunStore(
        spec.get("store") or f"runs/{spec.get('name', 'federated')}.zarr", spec.get("storage_options")
    )
    site_opts = spec.get("site_storage_options")
    scheduler = spec.get("scheduler")
    resources = None if scheduler or client else [{s.get("resource", ""): 1} for s in sites]
    record = {"sites": sites, "n_clusters": n_clusters, **fed}
    with (
        dask_client(client or scheduler, resources=resources) as c,
        store.stage("federated", record, []),
    ):
        result = run_federated_bce(sites, n_clusters, c, storage_options=site_opts, **fed)
        group = store.group.require_group("federated")
        for name in ("alpha", "beta"):
            if name in group:
                del group[name]
        group.create_array("alpha", data=np.asarray(result.alpha_, dtype=np.float64))
        beta = [np.asarray(b, dtype=np.float64) for b in result.beta_]
        group.create_array("beta", data=np.concatenate(beta, axis=1))
        group["beta"].attrs["offsets"] = np.cumsum([0] + [b.shape[1] for b in beta]).tolist()
        kinds = {}
        for m in result.log.messages:
            kinds[m.kind] = kinds.get(m.kind, 0) + 1
        summary = {
            "mode": result.mode,
            "sites": result.site_names,
            "n_clusters": n_clusters,
            "lower_bound": float(result.lower_bound_),
            "n_iter": int(result.n_iter_),
            "converged": bool(result.converged_),
            "messages": kinds,
        }
        group.attrs.update({**summary, "lower_bound_trace": np.asarray(result.lower_bound_trace_).tolist()})
    store.write_json("report/federated.json", summary)
    return summary

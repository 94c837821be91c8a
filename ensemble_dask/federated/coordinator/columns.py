"""Column-distributed BCE (Wang et al. 2011 Sect. 5.2.2).

Each *client* holds some base clusterings (columns) of all rows; a server (the coordinator
with its own worker) holds ``alpha`` and the rows' ``gamma``. Per iteration each client sends
``log beta_hj(x_ij)`` (an ``n x N_g x k`` array, ``nan`` where missing), the server runs the
E-step and returns each client its ``phi``, and the client updates its own ``beta`` (eq. 7),
which never leaves it. Note that the log-likelihood arrays reveal to the server which rows
share a base cluster (not the label values); that is inherent to the paper's protocol.

Its clients are the coordinator's own Dask workers, not site agents: this is the paper's protocol run in
one trust domain (as a study of its messages), with no protection against a malicious coordinator. Sites
that do not trust the coordinator run the row-distributed BCE and KCC of
:mod:`~ensemble_dask.federated.site.agent`.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass

import numpy as np

from ..._validation import InputError, check_random_state
from ...consensus.bce import BCE
from ...consensus.bce import _kernels as kern
from ...consensus.bce._em import _offsets, normalise_counts, update_alpha
from ...rowblocks.bce import (
    block_meta,
    encode_block,
    fresh_gamma,
    read_labels,
)
from ..protocol.secure import COORDINATOR, MessageLog

__all__ = ["ColumnBCEResult", "run_column_distributed_bce"]


@dataclass
class ColumnBCEResult:
    """Outcome of a column-distributed fit; ``site_gamma["server"]`` is a future of the server's gamma."""

    alpha_: np.ndarray
    beta_: list
    categories_: list
    lower_bound_: float
    lower_bound_trace_: np.ndarray
    n_iter_: int
    converged_: bool
    mode: str
    site_names: list
    site_gamma: dict
    log: MessageLog


def site_load(url, storage_options=None):
    return read_labels(url, storage_options=storage_options)


def _get(d, key):
    return d[key]


def _nrows(gidx):
    return gidx.shape[0]


def _check_sites(sites, client):
    if not isinstance(sites, (list, tuple)) or not sites:
        raise InputError(f"holders must be a non-empty list of dicts (name, url, resource); got {sites!r}")
    workers = client.scheduler_info(n_workers=-1)["workers"]
    offered = set()
    for w in workers.values():
        offered.update(k for k, v in (w.get("resources") or {}).items() if v > 0)
    names = []
    for i, s in enumerate(sites):
        if not isinstance(s, dict):
            raise InputError(f"holders[{i}] must be a dict with name, url and resource; got {s!r}")
        name = s.get("name", f"site-{i}")
        for key in ("url", "resource"):
            if not s.get(key):
                raise InputError(f"client {name!r} has no {key!r}")
        if s["resource"] not in offered:
            raise InputError(f"client {name!r} is unreachable: no worker offers resource {s['resource']!r}")
        names.append(name)
    if len(set(names)) != len(names):
        raise InputError(f"client names must be distinct; got {names}")
    return names


def _submit(client, site, fn, *args, kind):
    return client.submit(
        fn,
        *args,
        resources={site["resource"]: 1},
        pure=False,
        key=f"site-{site['_name']}-{kind}-{uuid.uuid4().hex[:12]}",
    )


def client_loglik(gidx, beta, offsets):
    """``log beta_hj(x_ij)`` for the client's columns: ``(n, N_g, k)``, ``nan`` where missing."""
    n, N = gidx.shape
    k = beta.shape[0]
    logbeta = np.log(np.maximum(beta, 1e-300))
    out = np.full((n, N, k), np.nan)
    for j in range(N):
        g = gidx[:, j]
        obs = g >= 0
        out[obs, j, :] = logbeta[:, g[obs]].T
    return out


def client_m_step(gidx, phi, offsets, R):
    """Client-side eq. 7: the client's beta from its labels and the server's ``phi``."""
    n, N = gidx.shape
    counts = np.zeros((phi.shape[2], R))
    for j in range(N):
        counts += kern.column_counts(gidx[:, j], 1.0, np.ascontiguousarray(phi[:, j, :]), R)
    return normalise_counts(counts, offsets)


def server_estep(alpha, gamma, tol, max_iter, *lls):
    """Server E-step on the clients' log-likelihoods; returns phi, the new gamma and the alpha statistics."""
    ll = np.concatenate(lls, axis=1)
    gamma = gamma.copy()
    phi, ss, bound, n_rows = kern.estep_from_loglik(ll, np.ones(ll.shape[1]), alpha, gamma, tol, max_iter)
    return {"phi": phi, "gamma": gamma, "ss": ss, "bound": bound, "n_rows": n_rows}


def _phi_slice(res, a, b):
    return np.ascontiguousarray(res["phi"][:, a:b, :])


def _summary(res):
    return {"ss": res["ss"], "bound": res["bound"], "n_rows": res["n_rows"]}


def run_column_distributed_bce(
    holders,
    n_clusters,
    client,
    *,
    server_resource=None,
    max_iter=300,
    tol=1e-5,
    e_step_tol=1e-4,
    e_step_max_iter=100,
    alpha_init=1.0,
    random_state=None,
    init=None,
    storage_options=None,
    log=None,
):
    """Column-distributed BCE (Wang et al. 2011 Sect. 5.2.2): clients hold columns, a server gamma/alpha.

    Parameters
    ----------
    holders : list of dict
        One dict per client: ``name``, ``url`` (its columns of the labels matrix, all rows in
        the same order) and ``resource``.
    n_clusters : int
    client : distributed.Client
    server_resource : str, default=None
        Worker resource of the server (None: any worker).
    max_iter, tol, e_step_tol, e_step_max_iter, alpha_init, random_state
        As in :class:`~ensemble_dask.consensus.BCE`; the random start (drawn by the
        coordinator from the clients' label categories) equals BCE's on the pooled columns.
    init : dict, default=None
        ``{"alpha": ..., "beta": [...]}`` start instead of a random one.
    storage_options : dict, default=None
    log : MessageLog, default=None

    Returns
    -------
    ColumnBCEResult
        With ``site_gamma`` holding the server's gamma under the key ``"server"``. The
        clients' final ``beta`` is sent to the coordinator once, at the end, to export the
        model (message kind ``"beta_final"``).
    """
    log = MessageLog() if log is None else log
    holders = [dict(h) for h in holders] if isinstance(holders, (list, tuple)) else holders
    names = _check_sites(holders, client)
    est = BCE(
        n_clusters,
        init="random",  # the sites' EM starts from random draws (k-means++ needs all rows in one place)
        max_iter=max_iter,
        tol=tol,
        e_step_tol=e_step_tol,
        e_step_max_iter=e_step_max_iter,
        alpha_init=alpha_init,
        random_state=random_state,
    )
    est._validate_params()
    k = est._k
    data, cats, ncols = [], [], []
    for h, name in zip(holders, names, strict=True):
        h["_name"] = name
        d = _submit(client, h, site_load, h["url"], storage_options, kind="load")
        try:
            nc, uniques, _ = _submit(client, h, block_meta, d, kind="meta").result()
        except Exception as exc:
            raise InputError(f"client {name!r}: cannot read labels at {h['url']!r}: {exc}") from exc
        log.record(name, COORDINATOR, "meta", {"n_clusterings": nc, "categories": uniques})
        data.append(d)
        cats.append([u.astype(np.int64) for u in uniques])
        ncols.append(nc)
    categories = [c for cs in cats for c in cs]
    offsets = _offsets(categories)
    if init is not None:
        p0 = est._params_from_init(init, categories, None)
    else:
        p0 = est._random_params(check_random_state(random_state), categories)
    srv = {"resources": {server_resource: 1}} if server_resource else {}
    col0 = np.concatenate([[0], np.cumsum(ncols)])
    local = []
    for i, h in enumerate(holders):
        loc_off = offsets[col0[i] : col0[i + 1] + 1] - offsets[col0[i]]
        g = _submit(client, h, encode_block, data[i], cats[i], kind="encode")
        beta_i = p0.beta[:, offsets[col0[i]] : offsets[col0[i + 1]]]
        log.record(COORDINATOR, h["_name"], "beta_init", beta_i)
        local.append({"gidx": g, "offsets": loc_off, "beta": beta_i})
    n_rows = _submit(client, holders[0], _nrows, data[0], kind="n").result()
    gamma = client.submit(fresh_gamma, n_rows, k, pure=False, **srv)
    alpha = p0.alpha
    trace, converged = [], False
    for t in range(max_iter):
        lls = []
        for h, loc in zip(holders, local, strict=True):
            lls.append(
                _submit(client, h, client_loglik, loc["gidx"], loc["beta"], loc["offsets"], kind="loglik")
            )
            log.record(h["_name"], "server", "loglik", None)
        res = client.submit(
            server_estep, alpha, gamma, float(e_step_tol), int(e_step_max_iter), *lls, pure=False, **srv
        )
        summary = client.submit(_summary, res, pure=False, **srv).result()
        trace.append(float(summary["bound"]))
        if t > 0 and abs(trace[-1] - trace[-2]) <= tol * abs(trace[-1]):
            converged = True
            gamma = client.submit(_get, res, "gamma", pure=False, **srv)
            break
        gamma = client.submit(_get, res, "gamma", pure=False, **srv)
        if t == max_iter - 1:
            break
        for i, (h, loc) in enumerate(zip(holders, local, strict=True)):
            phi = client.submit(_phi_slice, res, col0[i], col0[i + 1], pure=False, **srv)
            log.record("server", h["_name"], "phi", None)
            R = int(loc["offsets"][-1])
            loc["beta"] = _submit(client, h, client_m_step, loc["gidx"], phi, loc["offsets"], R, kind="mstep")
        alpha = update_alpha(alpha, summary["n_rows"], summary["ss"])
    betas = []
    for i, (h, loc) in enumerate(zip(holders, local, strict=True)):
        b = loc["beta"].result() if hasattr(loc["beta"], "result") else loc["beta"]
        log.record(h["_name"], COORDINATOR, "beta_final", b)
        for j in range(ncols[i]):
            betas.append(b[:, loc["offsets"][j] : loc["offsets"][j + 1]].copy())
    return ColumnBCEResult(
        alpha_=alpha,
        beta_=betas,
        categories_=categories,
        lower_bound_=trace[-1],
        lower_bound_trace_=np.asarray(trace),
        n_iter_=len(trace),
        converged_=converged,
        mode="column",
        site_names=names,
        site_gamma={"server": gamma},
        log=log,
    )

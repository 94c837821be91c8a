"""Row-distributed BCE across sites (papers/001 Sect. 5.2.1), with secure aggregation (:mod:`.secure`).

Each *site* owns some rows of the labels matrix at its own URL and a set of Dask workers
tagged with a worker resource (e.g. ``resources={"site-a": 1}``). Every task that touches a
site's rows is submitted with that resource, so it runs on the site's workers; the rows, the
rows' variational parameters and the site's statistics stay there. Per EM iteration the
coordinator sends ``(alpha, beta)`` to every site; each site runs its E-step and returns

* ``mode="secure"`` (exact, the default): its statistics vector in fixed point, modulo
  ``2**64``, plus a mask. The masks are pairwise: sites ``p < q`` agree on a seed by a
  Diffie-Hellman exchange (RFC 3526 2048-bit group; only public keys pass through the
  coordinator), and per round ``p`` adds and ``q`` subtracts the same pseudo-random vector,
  so the masks cancel in the sum. The coordinator learns only the total (with one site, the
  total *is* that site's statistics: there is nothing to hide it among). The EM driver is
  the in-memory one, so the fit equals centralised BCE up to the fixed-point rounding
  (``2**-frac_bits`` per entry and site);
* ``mode="plain"``: the statistics in clear (the baseline to measure the cost of masking);
* ``mode="sequential"``: the paper's heuristic variant. Parameters travel from site to site
  (worker to worker, not through the coordinator); each site runs its E-step and an M-step
  on its own rows and passes the new parameters on. It needs no aggregation but is not the
  centralised EM, and each site sees its predecessor's parameters.

All statistics a site returns are the sufficient statistics of
:func:`ensemble_dask.consensus.bce.estep_stats`: one aggregation per EM iteration suffices
because alpha's Newton iteration needs only the summed digamma vector (DESIGN.md).

Every message is recorded in a :class:`MessageLog` (sender, receiver, kind, payload) so
tests can check what each party received.
"""

from __future__ import annotations

import operator
import uuid
from dataclasses import dataclass

import numpy as np

from .._validation import InputError, check_int, check_random_state
from ..consensus.bce import (
    BCE,
    StatsLayout,
    _offsets,
    m_step,
    run_em,
)
from .dask import (
    block_meta,
    estep_task,
    expand_gamma,
    fresh_gamma_like,
    merge_categories,
    prepare_block,
    read_labels,
)
from .secure import (
    COORDINATOR,
    MessageLog,
    decode_fixed,
    public_part,
    site_keygen,
    site_masked_stats,
    site_pair_seeds,
    sum_words,
)

__all__ = ["FederatedBCEResult", "run_federated_bce"]

# --------------------------------------------------------------------------- site side


def site_load(url, storage_options=None):
    return read_labels(url, storage_options=storage_options)


def site_write_output(gamma, url, storage_options=None):
    """Write the site's memberships (n_site x k, float32) to its own ``output`` URL."""
    memb = (gamma / gamma.sum(axis=1, keepdims=True)).astype(np.float32)
    if url.endswith(".npy"):
        if "://" in url and not url.startswith("file://"):
            import fsspec

            with fsspec.open(url, "wb", **(storage_options or {})) as f:
                np.save(f, memb)
        else:
            np.save(url.removeprefix("file://"), memb)
    else:
        import zarr

        z = zarr.create_array(
            url.removeprefix("file://"),
            shape=memb.shape,
            dtype="float32",
            chunks=memb.shape,
            overwrite=True,
            storage_options=storage_options if "://" in url and not url.startswith("file://") else None,
        )
        z[:] = memb
    return memb.shape


def site_sequential_step(gidx, gamma, params, carry, offsets, tol, max_iter, reg_covar):
    """Heuristic row-distributed EM at one site: local E-step, local M-step, pass parameters on."""
    vec, gamma = estep_task(gidx, gamma, params, tol, max_iter)
    layout = StatsLayout(params.alpha.size, params.beta.shape[1], 0)
    stats = layout.unpack(vec)
    new = m_step(stats, params, offsets, reg_covar=reg_covar) if stats["n_rows"] > 0 else params
    return {"params": new, "gamma": gamma, "carry": carry + stats["bound"]}


def _get(d, key):
    return d[key]


# --------------------------------------------------------------------------- coordinator


@dataclass
class FederatedBCEResult:
    """Outcome of a federated fit. The coordinator holds only the model and the bound trace.

    ``site_gamma`` maps each site to a Dask future of its rows' variational parameters, living
    on that site's workers; :meth:`memberships` fetches them (for the site's owner).
    """

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

    def memberships(self, site):
        """Normalised memberships of ``site``'s rows (gathered from the site's workers)."""
        g = self.site_gamma[site].result()
        return g / g.sum(axis=1, keepdims=True)


def _check_sites(sites, client):
    if not isinstance(sites, (list, tuple)) or not sites:
        raise InputError(f"sites must be a non-empty list of dicts (name, url, resource); got {sites!r}")
    names = []
    workers = client.scheduler_info(n_workers=-1)["workers"]
    offered = set()
    for w in workers.values():
        offered.update(k for k, v in (w.get("resources") or {}).items() if v > 0)
    for i, s in enumerate(sites):
        if not isinstance(s, dict):
            raise InputError(f"sites[{i}] must be a dict with name, url and resource; got {s!r}")
        name = s.get("name", f"site-{i}")
        for key in ("url", "resource"):
            if not s.get(key):
                raise InputError(f"site {name!r} has no {key!r}")
        if s["resource"] not in offered:
            raise InputError(
                f"site {name!r} is unreachable: no worker offers resource {s['resource']!r} "
                f"(offered: {sorted(offered)})"
            )
        names.append(name)
    if len(set(names)) != len(names):
        raise InputError(f"site names must be distinct; got {names}")
    return names


def _submit(client, site, fn, *args, kind):
    return client.submit(
        fn,
        *args,
        resources={site["resource"]: 1},
        pure=False,
        key=f"site-{site['_name']}-{kind}-{uuid.uuid4().hex[:12]}",
    )


def _load_sites(sites, names, client, log, storage_options):
    data, metas = [], []
    for s, name in zip(sites, names, strict=True):
        s["_name"] = name
        data.append(_submit(client, s, site_load, s["url"], storage_options, kind="load"))
    meta_f = [_submit(client, s, block_meta, d, kind="meta") for s, d in zip(sites, data, strict=True)]
    for s, f in zip(sites, meta_f, strict=True):
        try:
            n_cols, uniques, _ = f.result()
        except InputError:
            raise
        except Exception as exc:  # file missing, unreadable store, ...
            raise InputError(f"site {s['_name']!r}: cannot read labels at {s['url']!r}: {exc}") from exc
        log.record(s["_name"], COORDINATOR, "meta", {"n_clusterings": n_cols, "categories": uniques})
        metas.append((n_cols, uniques))
    first = metas[0][0]
    for s, (n_cols, _) in zip(sites, metas, strict=True):
        if n_cols != first:
            raise InputError(
                f"site {s['_name']!r} has {n_cols} clusterings but site {sites[0]['_name']!r} has {first}"
            )
    categories = merge_categories([m[1] for m in metas])
    for s in sites:
        log.record(COORDINATOR, s["_name"], "categories", categories)
    gidx = [
        _submit(client, s, prepare_block, d, categories, kind="encode")
        for s, d in zip(sites, data, strict=True)
    ]
    return gidx, categories


class _SiteEStep:
    """Per-iteration E-step at every site and aggregation of the statistics (plain or secure)."""

    def __init__(self, client, sites, gidx, k, tol, max_iter, log, mode, frac_bits):
        self.client, self.sites, self.gidx = client, sites, gidx
        self.k, self.tol, self.max_iter = k, tol, max_iter
        self.log, self.mode, self.frac_bits = log, mode, frac_bits
        self.round = 0
        if mode == "secure" and len(sites) > 1:
            keys = [_submit(client, s, site_keygen, kind="keygen") for s in sites]
            pubs = []
            for s, kf in zip(sites, keys, strict=True):
                pub = _submit(client, s, public_part, kf, kind="public").result()
                log.record(s["_name"], COORDINATOR, "public_key", pub)
                pubs.append(pub)
            self.seeds = []
            for p, (s, kf) in enumerate(zip(sites, keys, strict=True)):
                log.record(COORDINATOR, s["_name"], "public_keys", list(pubs))
                self.seeds.append(_submit(client, s, site_pair_seeds, kf, pubs, p, kind="seeds"))
        else:
            self.seeds = [None] * len(sites)
        self.reset()

    def reset(self):
        self.gamma = [
            _submit(self.client, s, fresh_gamma_like, g, self.k, kind="gamma0")
            for s, g in zip(self.sites, self.gidx, strict=True)
        ]

    def __call__(self, params, t):
        results = []
        for s, g, gam in zip(self.sites, self.gidx, self.gamma, strict=True):
            self.log.record(COORDINATOR, s["_name"], "params", params)
            results.append(
                _submit(self.client, s, estep_task, g, gam, params, self.tol, self.max_iter, kind="estep")
            )
        self.gamma = [
            _submit(self.client, s, operator.itemgetter(1), r, kind="gamma")
            for s, r in zip(self.sites, results, strict=True)
        ]
        vecs = [
            _submit(self.client, s, operator.itemgetter(0), r, kind="stats")
            for s, r in zip(self.sites, results, strict=True)
        ]
        self.round += 1
        if self.mode == "plain" or (self.mode == "secure" and len(self.sites) == 1):
            total = None
            for s, v in zip(self.sites, vecs, strict=True):
                payload = v.result()
                kind = "stats" if self.mode == "plain" else "total"
                self.log.record(s["_name"], COORDINATOR, kind, payload)
                total = payload.copy() if total is None else total + payload
            return total
        masked = [
            _submit(
                self.client,
                s,
                site_masked_stats,
                v,
                seeds,
                p,
                self.round,
                self.frac_bits,
                len(self.sites),
                s["_name"],
                kind="masked",
            )
            for p, (s, v, seeds) in enumerate(zip(self.sites, vecs, self.seeds, strict=True))
        ]
        words = self.client.gather(masked)
        for s, w in zip(self.sites, words, strict=True):
            self.log.record(s["_name"], COORDINATOR, "masked_stats", w)
        return decode_fixed(sum_words(*words), self.frac_bits)

    def gammas(self):  # the coordinator never gathers the rows' parameters
        return None


def _nrows(gidx):
    return gidx.shape[0]


def run_federated_bce(
    sites,
    n_clusters,
    client,
    *,
    mode="secure",
    frac_bits=32,
    n_init=1,
    max_iter=300,
    tol=1e-5,
    e_step_tol=1e-4,
    e_step_max_iter=100,
    alpha_init=1.0,
    random_state=None,
    storage_options=None,
    log=None,
):
    """Row-distributed BCE across sites (papers/001 Sect. 5.2.1) on a Dask cluster.

    Parameters
    ----------
    sites : list of dict
        One dict per site: ``name``, ``url`` (its rows of the labels matrix: a zarr array or a
        ``.npy`` file, local path or fsspec URL readable by the site's workers), ``resource``
        (the Dask worker resource its workers offer) and optionally ``output`` (a URL where
        the site writes its rows' memberships at the end).
    n_clusters : int
        Number of consensus clusters.
    client : distributed.Client
        Client of a cluster whose workers offer the sites' resources.
    mode : {"secure", "plain", "sequential"}, default="secure"
        Exact EM with secure aggregation, exact EM with statistics in clear, or the paper's
        heuristic sequential variant.
    frac_bits : int, default=32
        Fractional bits of the fixed-point encoding of the secure mode.
    n_init, max_iter, tol, e_step_tol, e_step_max_iter, alpha_init, random_state
        As in :class:`~ensemble_dask.consensus.bce.BCE`; with the same ``random_state`` the
        random starts are those of ``BCE`` on the pooled rows.
    storage_options : dict, default=None
        fsspec options for the sites' URLs.
    log : MessageLog, default=None
        Where to record the protocol messages (a new log if None).

    Returns
    -------
    FederatedBCEResult
    """
    if mode not in ("secure", "plain", "sequential"):
        raise InputError(
            f"The 'mode' parameter must be one of ['plain', 'secure', 'sequential']; got {mode!r}"
        )
    frac_bits = check_int(frac_bits, "frac_bits", min_value=0, max_value=52)
    log = MessageLog() if log is None else log
    sites = [dict(s) for s in sites] if isinstance(sites, (list, tuple)) else sites
    names = _check_sites(sites, client)
    est = BCE(
        n_clusters,
        n_init=n_init,
        max_iter=max_iter,
        tol=tol,
        e_step_tol=e_step_tol,
        e_step_max_iter=e_step_max_iter,
        alpha_init=alpha_init,
        random_state=random_state,
    )
    est._check_params()
    k = est._k
    gidx, categories = _load_sites(sites, names, client, log, storage_options)
    offsets = _offsets(categories)
    rng = check_random_state(random_state)
    starts = [est._random_params(rng, categories) for _ in range(n_init)]
    layout = StatsLayout(k, int(offsets[-1]), 0)
    if mode == "sequential":
        params, trace, n_iter, converged, gamma = _run_sequential(
            client, sites, gidx, starts, offsets, k, est, log
        )
    else:
        estep = _SiteEStep(
            client, sites, gidx, k, float(e_step_tol), int(e_step_max_iter), log, mode, frac_bits
        )
        best = None
        for i, p0 in enumerate(starts):
            if i:
                estep.reset()
            params, trace, n_iter, converged, _ = run_em(
                estep, p0, layout, offsets, max_iter=max_iter, tol=tol
            )
            if best is None or trace[-1] > best[1][-1]:
                best = (params, trace, n_iter, converged, list(estep.gamma))
        params, trace, n_iter, converged, gamma = best
    gamma = [
        _submit(client, s, expand_gamma, g, p, kind="expand")
        for s, g, p in zip(sites, gamma, gidx, strict=True)
    ]
    site_gamma = dict(zip(names, gamma, strict=True))
    outs = [
        _submit(client, s, site_write_output, g, s["output"], storage_options, kind="output")
        for s, g in zip(sites, gamma, strict=True)
        if s.get("output")
    ]
    client.gather(outs)
    return FederatedBCEResult(
        alpha_=params.alpha,
        beta_=[params.beta[:, offsets[j] : offsets[j + 1]].copy() for j in range(len(categories))],
        categories_=categories,
        lower_bound_=float(trace[-1]),
        lower_bound_trace_=np.asarray(trace),
        n_iter_=n_iter,
        converged_=converged,
        mode=mode,
        site_names=names,
        site_gamma=site_gamma,
        log=log,
    )


def _run_sequential(client, sites, gidx, starts, offsets, k, est, log):
    """The paper's heuristic row-distributed EM: parameters passed from site to site."""
    best = None
    tol, maxit = float(est.e_step_tol), int(est.e_step_max_iter)
    for p0 in starts:
        gamma = [
            _submit(client, s, fresh_gamma_like, g, k, kind="gamma0")
            for s, g in zip(sites, gidx, strict=True)
        ]
        params, trace, converged = p0, [], False
        for t in range(est.max_iter):
            carry = 0.0
            prev = None
            for p, (s, g) in enumerate(zip(sites, gidx, strict=True)):
                if prev is None:
                    log.record(COORDINATOR, s["_name"], "params", params)
                    pin, cin = params, carry
                else:
                    # extracted on the sending site, so only (params, bound) travel to the next one
                    pin = _submit(client, sites[p - 1], _get, prev, "params", kind="params-out")
                    cin = _submit(client, sites[p - 1], _get, prev, "carry", kind="carry-out")
                    log.record(sites[p - 1]["_name"], s["_name"], "params", pin.key)
                res = _submit(
                    client,
                    s,
                    site_sequential_step,
                    g,
                    gamma[p],
                    pin,
                    cin,
                    offsets,
                    tol,
                    maxit,
                    1e-6,
                    kind="seq",
                )
                gamma[p] = _submit(client, s, _get, res, "gamma", kind="gamma")
                prev = res
            last = _submit(client, sites[-1], _get, prev, "params", kind="params-out")
            lastc = _submit(client, sites[-1], _get, prev, "carry", kind="carry-out")
            params, bound = last.result(), lastc.result()
            log.record(sites[-1]["_name"], COORDINATOR, "params", params)
            trace.append(bound)
            if t > 0 and abs(trace[-1] - trace[-2]) <= est.tol * abs(trace[-1]):
                converged = True
                break
        # final E-step everywhere with the final parameters, so memberships match them
        for p, (s, g) in enumerate(zip(sites, gidx, strict=True)):
            log.record(COORDINATOR, s["_name"], "params", params)
            r = _submit(client, s, estep_task, g, gamma[p], params, tol, maxit, kind="final")
            gamma[p] = _submit(client, s, operator.itemgetter(1), r, kind="gamma")
        if best is None or trace[-1] > best[1][-1]:
            best = (params, trace, len(trace), converged, gamma)
    return best

"""Row- and column-distributed BCE across sites (papers/001 Sect. 5.2), with secure aggregation.

Row-distributed (Sect. 5.2.1)
-----------------------------
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

Column-distributed (Sect. 5.2.2)
--------------------------------
Each *client* holds some base clusterings (columns) of all rows; a server (the coordinator
with its own worker) holds ``alpha`` and the rows' ``gamma``. Per iteration each client sends
``log beta_hj(x_ij)`` (an ``n x N_g x k`` array, ``nan`` where missing), the server runs the
E-step and returns each client its ``phi``, and the client updates its own ``beta`` (eq. 7),
which never leaves it. Note that the log-likelihood arrays reveal to the server which rows
share a base cluster (not the label values); that is inherent to the paper's protocol.
"""

from __future__ import annotations

import hashlib
import operator
import secrets
import uuid
from dataclasses import dataclass, field

import numpy as np

from .._validation import InputError, check_int, check_random_state
from ..consensus import _bce_kernels as kern
from ..consensus.bce import (
    BCE,
    StatsLayout,
    _offsets,
    m_step,
    normalise_counts,
    run_em,
    update_alpha,
)
from .dask import (
    block_meta,
    encode_block,
    estep_task,
    expand_gamma,
    fresh_gamma,
    fresh_gamma_like,
    merge_categories,
    prepare_block,
    read_labels,
)

__all__ = [
    "Message",
    "MessageLog",
    "FederatedBCEResult",
    "run_federated_bce",
    "run_column_distributed_bce",
    "encode_fixed",
    "decode_fixed",
    "COORDINATOR",
]

COORDINATOR = "coordinator"

# RFC 3526, 2048-bit MODP group 14, generator 2.
_DH_PRIME = int(
    "FFFFFFFFFFFFFFFFC90FDAA22168C234C4C6628B80DC1CD129024E088A67CC74020BBEA63B139B22514A08798E3404DD"
    "EF9519B3CD3A431B302B0A6DF25F14374FE1356D6D51C245E485B576625E7EC6F44C42E9A637ED6B0BFF5CB6F406B7ED"
    "EE386BFB5A899FA5AE9F24117C4B1FE649286651ECE45B3DC2007CB8A163BF0598DA48361C55D39A69163FA8FD24CF5F"
    "83655D23DCA3AD961C62F356208552BB9ED529077096966D670C354E4ABC9804F1746C08CA18217C32905E462E36CE3B"
    "E39E772C180E86039B2783A2EC07A28FB5C55DF06F4C52C9DE2BCBF6955817183995497CEA956AE515D2261898FA0510"
    "15728E5A8AACAA68FFFFFFFFFFFFFFFF",
    16,
)
_DH_GENERATOR = 2


@dataclass(frozen=True)
class Message:
    """One protocol message: who sent what kind of payload to whom."""

    sender: str
    receiver: str
    kind: str
    payload: object = None


@dataclass
class MessageLog:
    """Record of every protocol message, for audits and tests."""

    messages: list = field(default_factory=list)

    def record(self, sender, receiver, kind, payload=None):
        self.messages.append(Message(sender, receiver, kind, payload))

    def received_by(self, party):
        """Messages whose receiver is ``party``."""
        return [m for m in self.messages if m.receiver == party]

    def kinds(self, party):
        """Set of message kinds ``party`` received."""
        return {m.kind for m in self.received_by(party)}


# --------------------------------------------------------------------------- fixed point, masks


def encode_fixed(values, frac_bits):
    """Signed fixed point ``round(x * 2**frac_bits)`` as uint64 (two's complement, i.e. modulo 2**64)."""
    scaled = np.round(np.asarray(values, dtype=np.float64) * float(2**frac_bits))
    return scaled.astype(np.int64).view(np.uint64)


def decode_fixed(words, frac_bits):
    """Inverse of :func:`encode_fixed` for a (sum of) encoded vector(s)."""
    return np.asarray(words, dtype=np.uint64).view(np.int64).astype(np.float64) / float(2**frac_bits)


def _mask(seed, round_id, size):
    bitgen = np.random.PCG64(np.random.SeedSequence([seed, round_id]))
    return bitgen.random_raw(size).astype(np.uint64)


def site_keygen():
    """A site's Diffie-Hellman key pair ``{"private": a, "public": g**a mod p}`` (kept on the site)."""
    a = secrets.randbits(256) | 1
    return {"private": a, "public": pow(_DH_GENERATOR, a, _DH_PRIME)}


def public_part(keys):
    return keys["public"]


def site_pair_seeds(keys, publics, me):
    """Pairwise seeds ``sha256(g**(a_p a_q))`` with every other site, keyed by its index."""
    seeds = {}
    for q, pub in enumerate(publics):
        if q == me:
            continue
        if not 1 < pub < _DH_PRIME - 1:
            raise InputError(f"site {q} sent an invalid public key")
        shared = pow(pub, keys["private"], _DH_PRIME)
        digest = hashlib.sha256(shared.to_bytes(256, "big")).digest()
        seeds[q] = int.from_bytes(digest, "big")
    return seeds


def site_masked_stats(vec, seeds, me, round_id, frac_bits, n_sites, site_name):
    """Fixed-point statistics plus the site's pairwise masks, modulo 2**64."""
    vec = np.asarray(vec, dtype=np.float64)
    limit = 2.0 ** (62 - frac_bits) / n_sites
    if not np.all(np.isfinite(vec)) or np.max(np.abs(vec), initial=0.0) >= limit:
        raise InputError(
            f"site {site_name!r}: statistics exceed the fixed-point range (|x| < {limit:.3g} with "
            f"frac_bits={frac_bits}); lower frac_bits"
        )
    out = encode_fixed(vec, frac_bits)
    for q, seed in seeds.items():
        m = _mask(seed, round_id, vec.size)
        if me < q:
            out = out + m
        else:
            out = out - m
    return out


def sum_words(*words):
    """Sum of uint64 vectors modulo 2**64."""
    out = np.zeros_like(words[0])
    for w in words:
        out = out + w
    return out


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


# --------------------------------------------------------------------------- column-distributed


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
    """Column-distributed BCE (papers/001 Sect. 5.2.2): clients hold columns, a server gamma/alpha.

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
        As in :class:`~ensemble_dask.consensus.bce.BCE`; the random start (drawn by the
        coordinator from the clients' label categories) equals BCE's on the pooled columns.
    init : dict, default=None
        ``{"alpha": ..., "beta": [...]}`` start instead of a random one.
    storage_options : dict, default=None
    log : MessageLog, default=None

    Returns
    -------
    FederatedBCEResult
        With ``site_gamma`` holding the server's gamma under the key ``"server"``. The
        clients' final ``beta`` is sent to the coordinator once, at the end, to export the
        model (message kind ``"beta_final"``).
    """
    log = MessageLog() if log is None else log
    holders = [dict(h) for h in holders] if isinstance(holders, (list, tuple)) else holders
    names = _check_sites(holders, client)
    est = BCE(
        n_clusters,
        max_iter=max_iter,
        tol=tol,
        e_step_tol=e_step_tol,
        e_step_max_iter=e_step_max_iter,
        alpha_init=alpha_init,
        random_state=random_state,
    )
    est._check_params()
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
    return FederatedBCEResult(
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

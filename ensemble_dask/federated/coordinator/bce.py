"""Row-distributed BCE across sites (Wang et al. 2011 Sect. 5.2.1) with secure aggregation.

Each *site* runs its own agent (:mod:`~ensemble_dask.federated.site.agent`) holding its rows of the labels
matrix; the coordinator
names operations and gets back only what :class:`~.link.Federation` lets through. One run:

1. each site joins the session and reads its rows (its row and clustering counts come back);
2. the category space of each clustering is fixed by secure sums: with ``n_labels`` declared, one
   sum of per-label counts; otherwise first a sum of each clustering's counts of labels per bit
   length (bounding the label range), then the counts. The coordinator learns the pooled
   counts, never which site holds which label; the categories are those with a positive pooled
   count, exactly ``np.unique`` of the pooled rows;
3. per EM iteration the coordinator sends ``(alpha, beta)``; each site runs its E-step on its rows
   (warm-started from its rows' ``gamma``, kept in its session) and returns its statistics masked
   (SecAgg+, :mod:`~ensemble_dask.federated.protocol.secagg`); the coordinator unmasks the total and runs the
   M-step of
   :mod:`ensemble_dask.consensus.bce._bce`. The fit therefore equals centralised BCE up to each row's
   terms rounded to ``2**-32`` (a site sums them exactly, so that the total depends on the pooled rows
   alone: :func:`~ensemble_dask.federated.protocol.secure.encode_exact`; the secure sum is exact);
4. at the end each site writes its rows' memberships where its config says and, when it holds
   reference labels, the contingency table of its consensus labels against them joins one more
   secure sum, giving H, ARI and NMI of the whole federation.

The functions named ``bce_*`` here (reading the rows, the category-space vectors, the contingency table)
and the row-block ones of :mod:`~ensemble_dask.federated.site.rows` run at the site, called by its agent with
arguments it has checked; the E-step runs on the site's own Dask cluster over its row blocks.
A site that drops out ends its session; the fit starts again over the survivors in a new session (so
it is the fit on their rows), while at least the sites' minimum remain.

Checkpoints: after every M-step the driver hands ``(alpha, beta)``, the bound trace and the best
start so far to ``checkpoint.save``; each site with a ``checkpoint`` directory saves its rows'
``gamma`` there after every E-step (the last two), so a run resumed from the coordinator's
checkpoint continues exactly where it stopped. A site names each by the session and round of the E-step
that made it, and a resume names that round (the ``gamma_tag`` and the best start's ``tag`` in the
coordinator's checkpoint; :func:`~ensemble_dask.federated.site.rows.bce_prepare` says why).
"""

from __future__ import annotations

import hashlib
import json
import logging
import time
import warnings
from dataclasses import dataclass, field

import numpy as np

from ..._validation import InputError, check_int, check_random_state, convergence_warning
from ...consensus.bce import BCE
from ...consensus.bce._em import BCEWarning, StatsLayout, _offsets, m_step
from ...metrics import partition_scores
from ..protocol.messages import params_from_message, params_to_message
from ..protocol.secure import ROW_TERM_LIMIT
from ..protocol.wire import CANNOT_RESUME
from .link import Federation, SiteRefusedError, SitesDropped, SitesDroppedWarning

__all__ = ["FederatedBCEResult", "ResumeRefusedWarning", "run_federated_bce", "scores_from_contingency"]

logger = logging.getLogger(__name__)

_MAX_LABEL_SPACE = 1 << 24  # entries of the label-count vector without a declared n_labels


# --------------------------------------------------------------------------- coordinator


def scores_from_contingency(table):
    """H, ARI and NMI of the partition pair summarised by a contingency table (rows: clusters)."""
    table = np.rint(np.asarray(table)).astype(np.int64)
    rows, cols = np.nonzero(table)
    counts = table[rows, cols]
    return partition_scores(np.repeat(rows, counts), np.repeat(cols, counts))


@dataclass
class FederatedBCEResult:
    """Outcome of a federated fit: what the coordinator holds (the model, totals, timings)."""

    alpha_: np.ndarray
    beta_: list
    categories_: list
    lower_bound_: float
    lower_bound_trace_: np.ndarray
    n_iter_: int
    converged_: bool
    mode: str
    site_names: list
    rows_per_site: dict
    seconds: float
    seconds_per_iteration: float
    scores: dict | None = None
    resumed_from: int | None = None
    dropped: list = field(default_factory=list)


def _fingerprint(obj):
    blob = json.dumps(obj, sort_keys=True, default=lambda o: np.asarray(o).tolist())
    return hashlib.sha256(blob.encode()).hexdigest()[:16]


def _category_space(agg, n_labels, N):
    if n_labels is None:
        onehot = agg.sum("label_bits", what="the label-range round").reshape(N, 64)
        bits = [int(np.flatnonzero(row > 0.5).max()) if (row > 0.5).any() else 0 for row in onehot]
        sizes = [1 << b for b in bits]
        if sum(sizes) > _MAX_LABEL_SPACE:
            raise InputError(
                f"labels go up to {max(sizes) - 1}: declare 'n_labels' (labels are 0 .. n_labels-1) "
                "to bound the label-count vector"
            )
    else:
        sizes = [int(n_labels)] * N
    counts = agg.sum("label_counts", (sizes,), what="the label-count round")
    categories, o = [], 0
    for j, size in enumerate(sizes):
        categories.append(np.flatnonzero(counts[o : o + size] > 0.5).astype(np.int64))
        if counts[o + size] > 0.5:
            raise InputError(
                f"clustering {j} has labels >= n_labels={size} at some site: declare a larger n_labels"
            )
        o += size + 1
    return categories


def joined_sites(agg):
    """``(N clusterings, {site: rows})`` from the sites' answers to the join.

    Raises :class:`InputError` when the sites disagree on the number of clusterings.
    """
    infos = {n: agg.infos[n] for n in agg.alive}
    first = agg.alive[0]
    N = infos[first]["n_clusterings"]
    for name, info in infos.items():
        if info["n_clusterings"] != N:
            raise InputError(
                f"site {name!r} has {info['n_clusterings']} clusterings but site {first!r} has {N}"
            )
    return N, {name: int(info["n_rows"]) for name, info in infos.items()}


def federation_scores(agg, k):
    """H, ARI and NMI of the whole federation from a secure sum of contingency tables (or None)."""
    if not all(agg.infos[n].get("has_reference") for n in agg.alive):
        return None
    onehot = agg.sum("reference_bits", what="the reference-range round")
    n_classes = 1 << int(np.flatnonzero(onehot > 0.5).max(initial=0))  # no class at all: 1
    table = agg.sum("contingency", (n_classes,), what="the contingency round")
    return scores_from_contingency(table[:-1].reshape(k, n_classes))


def over_survivors(fit, sites, method, context, mode, timeout):
    """``fit(federation)`` in a session of the site agents, restarted over the survivors in a new session
    whenever sites drop out (so the result is the fit on the survivors' rows)."""
    dropped = []
    while True:
        agg = Federation(sites, method, context, mode=mode, timeout=timeout, exclude=dropped)
        try:
            with agg:
                return fit(agg), dropped
        except SitesDropped as exc:
            dropped = sorted(set(dropped) | set(exc.dropped))
            warnings.warn(
                f"{exc}; the fit starts again over {exc.survivors} (the result is the fit on their rows)",
                SitesDroppedWarning,
                stacklevel=3,
            )


def run_federated_bce(
    sites,
    n_clusters,
    context,
    *,
    mode="secure",
    n_init=1,
    max_iter=300,
    tol=1e-5,
    e_step_tol=1e-4,
    e_step_max_iter=100,
    alpha_init=1.0,
    random_state=None,
    n_labels=None,
    timeout=120.0,
    checkpoint=None,
    progress=None,
):
    """Row-distributed BCE across site agents (Wang et al. 2011 Sect. 5.2.1); the coordinator sees secure
    sums.

    Parameters
    ----------
    sites : list of dict
        ``name`` and ``address`` (``https://HOST:PORT``) of each site agent
        (:mod:`~ensemble_dask.federated.site.agent`). What a site
        reads and writes (its rows, reference labels, memberships, E-step checkpoint) is in its own config.
    n_clusters : int
    context : ssl.SSLContext
        The coordinator's TLS client context (:func:`~.link.client_context`).
    mode : {"secure", "plain"}, default="secure"
        ``"plain"``: statistics in clear, which every site refuses unless its config allows it.
    n_init, max_iter, tol, e_step_tol, e_step_max_iter, alpha_init, random_state
        As in :class:`~ensemble_dask.consensus.BCE` (same random starts as ``BCE`` on the
        pooled rows).
    n_labels : int, default=None
        Labels are ``0 .. n_labels - 1`` in every clustering (None: bounded by a secure sum).
    timeout : float, default=120
        Seconds a site may take for one request before it counts as dropped.
    checkpoint : object, default=None
        With ``load() -> dict | None`` and ``save(dict)``: the coordinator's checkpoint. A site that cannot
        resume from it (it keeps no checkpoints, or not the one named) refuses: the fit starts afresh, with
        a :class:`ResumeRefusedWarning`.
    progress : callable, default=None
        Called as ``progress(iteration, bound)`` after every EM iteration.

    Returns
    -------
    FederatedBCEResult
        The fit on the rows of the sites that took part to the end (``dropped`` names the others).
    """
    t_start = time.perf_counter()
    if mode not in ("secure", "plain"):
        raise InputError(f"The 'mode' parameter must be one of ['plain', 'secure']; got {mode!r}")
    sites = _check_sites(sites)
    est = BCE(
        n_clusters,
        init="random",  # the sites' EM starts from random draws (k-means++ needs all rows in one place)
        n_init=n_init,
        max_iter=max_iter,
        tol=tol,
        e_step_tol=e_step_tol,
        e_step_max_iter=e_step_max_iter,
        alpha_init=alpha_init,
        random_state=random_state,
    )
    est._validate_params()
    if n_labels is not None:
        n_labels = check_int(n_labels, "n_labels", min_value=1)

    def fit(agg, fresh=False):
        return _fit_bce(agg, est, n_labels, checkpoint, progress, fresh)

    try:
        out, dropped = over_survivors(fit, sites, "bce", context, mode, timeout)
    except _ResumeRefused as exc:  # a site keeps no checkpoints, or not the one named: the run starts afresh
        warnings.warn(f"{exc}; the fit starts afresh", ResumeRefusedWarning, stacklevel=2)
        out, dropped = over_survivors(lambda agg: fit(agg, True), sites, "bce", context, mode, timeout)
    best, params, offsets, categories, rows_per_site, scores, resumed_from, t_em, n_em = out
    seconds = time.perf_counter() - t_start
    if not best["converged"]:
        warnings.warn(
            f"federated BCE did not converge in max_iter={est.max_iter} EM iterations "
            f"(last relative bound change above tol={est.tol})",
            convergence_warning(),
            stacklevel=2,
        )
    return FederatedBCEResult(
        alpha_=params.alpha,
        beta_=[params.beta[:, offsets[j] : offsets[j + 1]].copy() for j in range(len(categories))],
        categories_=categories,
        lower_bound_=float(best["trace"][-1]),
        lower_bound_trace_=np.asarray(best["trace"]),
        n_iter_=len(best["trace"]),
        converged_=bool(best["converged"]),
        mode=mode,
        site_names=sorted(rows_per_site),
        rows_per_site=rows_per_site,
        seconds=seconds,
        seconds_per_iteration=t_em / n_em if n_em else float("nan"),
        scores=scores,
        resumed_from=resumed_from,
        dropped=dropped,
    )


class ResumeRefusedWarning(UserWarning):
    """A federated BCE run could not resume from the coordinator's checkpoint: it starts afresh."""


class _ResumeRefused(Exception):
    pass


def _fit_bce(agg, est, n_labels, checkpoint, progress, fresh=False):
    """One session's fit (see :func:`run_federated_bce`); ``fresh``: the coordinator's checkpoint is not
    read (a site refused to resume from it)."""
    k = est._k
    N, rows_per_site = joined_sites(agg)
    categories = _category_space(agg, n_labels, N)
    offsets = _offsets(categories)
    layout = StatsLayout(k, int(offsets[-1]), 0)
    rng = check_random_state(est.random_state)
    starts = [est._random_params(rng, categories) for _ in range(est.n_init)]
    run_key = _fingerprint(
        {
            "sites": sorted(agg.alive),
            "k": k,
            "params": [est.n_init, est.max_iter, est.tol, est.e_step_tol, est.e_step_max_iter,
                       est.alpha_init, est.random_state],
            "categories": [c.tolist() for c in categories],
            "mode": agg.mode,
        }
    )  # fmt: skip
    state = checkpoint.load() if checkpoint is not None and not fresh else None
    if state is not None and state.get("run_key") != run_key:
        logger.info("checkpoint belongs to another run; starting afresh")
        state = None
    if state is not None and (
        (state["trace"] and not state.get("gamma_tag")) or (state["best"] and not state["best"].get("tag"))
    ):
        logger.info(
            "checkpoint of an earlier version names no E-step of the sites' checkpoints; starting afresh"
        )
        state = None
    if state is None:
        state = {"run_key": run_key, "init": 0, "trace": [], "params": None, "best": None, "gamma_tag": None}
    first = state["init"]
    resume = None
    if state["trace"] or state["best"] is not None:
        best = state["best"] or {}
        resume = [
            first,
            len(state["trace"]) - 1 if state["trace"] else None,
            state["gamma_tag"] if state["trace"] else None,
            best.get("init"),
            best.get("tag"),
        ]
    resumed_from = len(state["trace"]) if resume is not None else None
    try:
        agg.call("prepare", (categories, k, run_key, resume), what="preparing the sites' rows")
    except SiteRefusedError as exc:
        if resume is None or exc.code != CANNOT_RESUME:  # any other refusal stops the run
            raise
        raise _ResumeRefused(f"resuming from EM iteration {resumed_from}: {exc}") from exc
    # the sites name each checkpoint of their rows by the session and round of the E-step that made it
    # (site_rows.bce_prepare): the tag of the rows' current gamma, for a resume to name it
    gamma_tag = state["gamma_tag"] if state["trace"] else None
    n_em = 0
    t_em = 0.0
    for i in range(first, est.n_init):
        if i == first and state["trace"]:
            trace = list(state["trace"])
            params = params_from_message(state["params"], k)
        else:
            trace, params = [], starts[i]
            if i > first:
                agg.call("reset", what=f"start {i + 1}")
        converged = False
        for t in range(len(trace), est.max_iter):
            t0 = time.perf_counter()
            vec = agg.sum(
                "estep",
                (params_to_message(params), i, t, float(est.e_step_tol), int(est.e_step_max_iter)),
                what=f"EM iteration {t + 1}" + (f" of start {i + 1}" if est.n_init > 1 else ""),
            )
            t_em += time.perf_counter() - t0
            n_em += 1
            gamma_tag = f"{agg.session}-{agg.round}"
            vec, clipped = vec[:-1], vec[-1]
            if clipped > 0:
                warnings.warn(
                    f"EM iteration {t + 1}: the sites clipped the E-step terms of {clipped:.0f} rows at "
                    f"+-{ROW_TERM_LIMIT:.3g} (parameters far from any fit's, smallest alpha "
                    f"{np.min(params.alpha):.3g}): the fit may differ from one on the pooled rows",
                    BCEWarning,
                    stacklevel=3,
                )
            stats = layout.unpack(vec)
            trace.append(stats["bound"])
            if progress is not None:
                progress(t, stats["bound"])
            if t > 0 and abs(trace[-1] - trace[-2]) <= est.tol * abs(trace[-1]):
                converged = True
                break
            if t == est.max_iter - 1:
                break
            params = m_step(stats, params, offsets)
            if checkpoint is not None:
                checkpoint.save(
                    {
                        **state,
                        "init": i,
                        "trace": trace,
                        "params": params_to_message(params),
                        "gamma_tag": gamma_tag,
                    }
                )
        best = state["best"]
        if best is None or trace[-1] > best["trace"][-1]:
            agg.call("promote", (i,), what=f"end of start {i + 1}")
            best = {"init": i, "trace": trace, "params": params_to_message(params), "converged": converged}
            best["tag"] = gamma_tag  # the tag of the E-step that made the promoted gamma
        state = {**state, "init": i + 1, "trace": [], "params": None, "best": best, "gamma_tag": None}
        if checkpoint is not None:
            checkpoint.save(state)
    best = state["best"]
    params = params_from_message(best["params"], k)
    agg.call("finish", what="writing memberships")
    scores = federation_scores(agg, k)
    return best, params, offsets, categories, rows_per_site, scores, resumed_from, t_em, n_em


def _check_sites(sites):
    if not isinstance(sites, (list, tuple)) or not sites:
        raise InputError(f"sites must be a non-empty list of dicts (name, address); got {sites!r}")
    out = []
    for i, s in enumerate(sites):
        if not isinstance(s, dict) or not s.get("name") or not s.get("address"):
            raise InputError(f"sites[{i}] must be a dict with the site's name and address; got {s!r}")
        out.append({"name": str(s["name"]), "address": str(s["address"])})
    names = [s["name"] for s in out]
    if len(set(names)) != len(names):
        raise InputError(f"site names must be distinct; got {names}")
    return out

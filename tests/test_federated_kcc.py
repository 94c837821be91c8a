"""Row-distributed KCC with secure aggregation (``federated: method: kcc``), on real processes over TLS.

The cluster is that of test_federated.py (a TLS `dask scheduler` and one `dask worker --no-nanny` per
site, each with its masking key); the answer is checked against in-memory KCC with the same start
(``init="clusters"``) on the pooled rows, and the client's connections against each site's statistics,
replayed here.
"""

from __future__ import annotations

import json

import numpy as np
import pytest

from ensemble_dask import InputError
from ensemble_dask._validation import check_random_state
from ensemble_dask.consensus.kcc import KCC, KCCConvergenceWarning, LocalBlocks, encode, kcc_starts
from ensemble_dask.federated import SiteLostError
from ensemble_dask.federated.rows_kcc import (
    kcc_cooccurrence,
    kcc_prepare,
    kcc_sizes,
    kcc_step,
    run_federated_kcc,
)
from ensemble_dask.federated.secure import decode_fixed, sum_words
from ensemble_dask.federated.site import SiteSession
from ensemble_dask.io.store import RunStore
from ensemble_dask.metrics import partition_scores
from ensemble_dask.pipeline import load_workflow
from ensemble_dask.stages.federated import FEDERATED_KEYS, _check_kcc_params, run_federated_workflow

from .conftest import REPO
from .test_federated import SITES, Received, iris_ensemble, leaks, make_sites, memberships, tls_cluster

CUTS = (45, 95)  # 45, 50, 55 rows: no site's row count equals the length of a protocol vector


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    yield from tls_cluster(tmp_path_factory, "tls-kcc")


@pytest.fixture(scope="module")
def iris():
    return iris_ensemble(1)


class Recorder(LocalBlocks):
    """In-memory backend that records what the coordinator sends (the start's categories, the centroids)."""

    def __init__(self, gidx):
        super().__init__([gidx])
        self.sent = []

    def cooccurrence(self, chosen, n_categories):
        self.sent.append(("co", np.array(chosen)))
        return super().cooccurrence(chosen, n_categories)

    def step(self, MT, sq, n_far):
        self.sent.append(("step", (MT.copy(), sq.copy())))
        return super().step(MT, sq, n_far)


def site_vectors(L, bounds, seed, **params):
    """Every vector each site computes in the run (its site functions, replayed on its rows here)."""
    gidx, enc = encode(L)
    rec = Recorder(gidx)
    est = KCC(3, init="clusters", random_state=seed, **{"n_init": 1, **params})
    est._check_params()
    kcc_starts(est, rec, enc, check_random_state(seed))
    G = enc.n_categories
    out = []
    for p in range(len(SITES)):
        st = SiteSession(name=SITES[p], session="replay", secure=False, n_sites=len(SITES))
        st.data["labels"] = L[bounds[p] : bounds[p + 1]]
        kcc_prepare(st, enc.categories)
        vecs = [kcc_sizes(st, G)]
        for kind, arg in rec.sent:
            vecs.append(kcc_cooccurrence(st, arg, G) if kind == "co" else kcc_step(st, *arg))
        out.append(vecs)
    return out


def fit(cluster, sites, **kw):
    kw = {"random_state": 3, "pins": cluster.pins(), "timeout": 180, **kw}
    return run_federated_kcc(sites, 3, cluster.client, **kw)


def test_secure_kcc_equals_centralised_and_the_client_never_receives_a_sites_statistics(
    cluster, iris, tmp_path
):
    L, y = iris
    sites, bounds = make_sites(L, tmp_path, y, cuts=CUTS)
    with Received() as rx:
        res = fit(cluster, sites)
    ref = KCC(3, init="clusters", n_init=1, random_state=3).fit(L)
    assert res.rows_per_site == {"site-0": 45, "site-1": 50, "site-2": 55}
    assert res.converged_ and ref.converged_ and res.n_iter_ == ref.n_iter_
    for c, rc in zip(res.cluster_centers_, ref.cluster_centers_, strict=True):
        np.testing.assert_allclose(c, rc, rtol=1e-12, atol=1e-15)
    assert res.objective_ == pytest.approx(ref.objective_, rel=1e-12)
    assert res.objective_trace_[-1] == pytest.approx(ref.objective_, rel=1e-12)
    np.testing.assert_allclose(memberships(sites), ref.memberships_, rtol=1e-6, atol=1e-7)  # float32 files
    central = partition_scores(ref.labels_, y)
    for key in ("H", "ARI", "NMI"):
        assert res.scores[key] == pytest.approx(central[key], abs=1e-12)
    assert res.scores["ARI"] > 0.5
    # the client received no site's statistics (sizes, start, Lloyd steps), nor their totals ...
    per_site = site_vectors(L, bounds, 3)
    arrays = rx.arrays()
    assert leaks(arrays, per_site) == []
    totals = [np.sum([per_site[p][r] for p in range(3)], axis=0) for r in range(len(per_site[0]))]
    assert leaks(arrays, [totals]) == []
    # ... but masked vectors adding up to those totals (so the check looked at the right data)
    size = totals[-1].size
    steps = [t for t in totals if t.size == size]
    assert len(steps) in (res.n_iter_, res.n_iter_ + 1)  # a final pass after a stop on tol
    words = [w for w in rx.arrays(raw=True) if w.ndim == 2 and w.shape == (2, size)]
    assert len(words) == 3 * len(steps)
    np.testing.assert_allclose(decode_fixed(sum_words(words)), np.sum(steps, axis=0), rtol=1e-12)
    # and nothing per row: neither assignments nor memberships
    row_counts = {45, 50, 55, L.shape[0]}
    assert not any(a.size in row_counts | {3 * r for r in row_counts} for a in arrays)


def test_the_check_sees_statistics_sent_in_clear(cluster, iris, tmp_path):
    L, _ = iris
    sites, bounds = make_sites(L, tmp_path, cuts=CUTS)
    with Received() as rx, pytest.warns(KCCConvergenceWarning, match="max_iter=1"):
        res = fit(cluster, sites, mode="plain", max_iter=1, tol=0.0)
    assert res.n_iter_ == 1 and res.converged_ is False  # stopped at the cap, and says so
    assert res.objective_trace_.size == 2  # the iteration, then the final assignment pass
    per_site = site_vectors(L, bounds, 3, max_iter=1, tol=0.0)
    hits = leaks(rx.arrays(), per_site)
    assert sorted(hits) == sorted((s, r) for s in SITES for r in range(len(per_site[0])))


def test_bad_method_and_bad_parameters_are_named(cluster, iris, tmp_path):
    L, _ = iris
    sites, _ = make_sites(L, tmp_path, cuts=CUTS)
    spec = {
        "store": str(tmp_path / "c.zarr"),
        "federated": {"method": "kmeans", "n_clusters": 3, "sites": sites},
    }
    with pytest.raises(
        InputError, match=r"'federated\.method' parameter must be one of \['bce', 'kcc'\]; got 'kmeans'"
    ):
        run_federated_workflow(spec)
    spec["federated"].update(method="kcc", e_step_tol=1e-3)
    with pytest.raises(InputError, match=r"'kcc' takes no \['e_step_tol'\]"):
        run_federated_workflow(spec)
    with pytest.raises(InputError, match="'init' parameter of federated KCC.*'k-means\\+\\+'"):
        fit(cluster, sites, init="k-means++")
    # the example workflow's section is one the stage accepts
    fed = dict(load_workflow(REPO / "workflows" / "federated-kcc.yaml")["federated"])
    assert fed["method"] == "kcc" and set(fed) <= FEDERATED_KEYS
    _check_kcc_params(
        fed["n_clusters"], {k: fed[k] for k in ("mode", "n_init", "max_iter", "tol") if k in fed}
    )


def test_the_workflow_stage_writes_the_model_metrics_and_report(cluster, iris, tmp_path):
    from ensemble_dask.stages.report_page import report_page

    L, y = iris
    sites, _ = make_sites(L, tmp_path, y, cuts=CUTS)
    store_url = tmp_path / "coordinator.zarr"
    spec = {
        "seed": 0,
        "store": str(store_url),
        "federated": {"method": "kcc", "n_clusters": 3, "certs": str(cluster.certs), "sites": sites},
    }
    summary = run_federated_workflow(spec, client=cluster.client)
    store = RunStore(store_url)
    rs = store.record("federated")["params"]["random_state"]
    ref = KCC(3, init="clusters", n_init=1, random_state=rs).fit(L)
    assert summary["method"] == "kcc" and summary["mode"] == "secure" and summary["tls"] is True
    assert summary["iterations"] == ref.n_iter_ and summary["converged"] is True
    assert summary["objective"] == pytest.approx(ref.objective_, rel=1e-12)
    assert summary["ARI"] == pytest.approx(partition_scores(ref.labels_, y)["ARI"], abs=1e-12)
    np.testing.assert_allclose(store["federated/centers"][:], np.hstack(ref.cluster_centers_), rtol=1e-12)
    assert json.loads((store_url / "report" / "metrics.json").read_text())["method"] == "kcc"
    html = (lambda url: open(url).read())(report_page(store))
    assert "KCC (Lloyd)" in html and "Lloyd iterations" in html


def test_a_lost_site_ends_the_run_naming_it(cluster, iris, tmp_path):
    """Last in this module: the killed worker is not restarted."""
    L, _ = iris
    sites, _ = make_sites(L, tmp_path, cuts=CUTS)

    def kill_after_first(t, objective):
        if t == 0:
            cluster.kill_worker("site-1")

    with pytest.raises(SiteLostError, match=r"site 'site-1'.*Lloyd iteration 2"):
        fit(cluster, sites, tol=0.0, progress=kill_after_first)

"""Tests of BCE on Dask row blocks and across sites (row- and column-distributed, secure aggregation).

One cluster of 5 single-thread worker PROCESSES (distributed.Nanny), worker ``i`` offering the
resource ``site-i``, is shared by the whole module; sites are assigned round-robin.
"""

from __future__ import annotations

import warnings
from pathlib import Path

import numpy as np
import pytest
import zarr
from sklearn.cluster import KMeans

from ensemble_dask import InputError
from ensemble_dask.consensus.bce import BCE, ConvergenceWarning, EmptyRowsWarning
from ensemble_dask.federated import (
    COORDINATOR,
    MessageLog,
    decode_fixed,
    encode_fixed,
    run_column_distributed_bce,
    run_federated_bce,
)
from ensemble_dask.federated.dask import estep_task, fit_bce_dask, prepare_block
from ensemble_dask.federated.secure import site_keygen, site_masked_stats, site_pair_seeds, sum_words
from ensemble_dask.metrics import micro_precision

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
N_WORKERS = 5
ITERS = 25


@pytest.fixture(scope="module")
def iris():
    if not DATA.is_dir():
        pytest.fail(f"shared data directory missing: {DATA}")
    X = np.loadtxt(DATA / "uci" / "iris.data.gz")
    y = np.loadtxt(DATA / "uci" / "iris.labels0.gz").astype(int)
    L = np.column_stack(
        [KMeans(3, n_init=1, init="random", random_state=s).fit_predict(X) for s in range(12)]
    ).astype(np.int32)
    rng = np.random.default_rng(0)
    L[rng.random(L.shape) < 0.15] = -1
    return L, y


@pytest.fixture(scope="module")
def client():
    from distributed import Client, Nanny, Scheduler, SpecCluster

    workers = {
        f"w{i}": {"cls": Nanny, "options": {"nthreads": 1, "resources": {f"site-{i}": 1}}}
        for i in range(N_WORKERS)
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0"}}
    with SpecCluster(scheduler=scheduler, workers=workers) as cluster, Client(cluster) as c:
        c.wait_for_workers(N_WORKERS)
        yield c


@pytest.fixture(scope="module")
def reference(iris):
    L, _ = iris
    with pytest.warns(ConvergenceWarning):
        return BCE(3, init="random", random_state=0, max_iter=ITERS, tol=0.0).fit(L)


def make_sites(L, P, root, seed=0, fmt="npy"):
    """Split rows unevenly into P sites; each site's rows stored at its own path."""
    rng = np.random.default_rng(seed + P)
    cuts = np.sort(rng.choice(np.arange(5, L.shape[0] - 4), size=P - 1, replace=False))
    cuts = np.concatenate([[0], cuts, [L.shape[0]]])
    sites = []
    for p in range(P):
        rows = L[cuts[p] : cuts[p + 1]]
        if fmt == "npy":
            url = str(root / f"site{p}.npy")
            np.save(url, rows)
        else:
            url = str(root / f"site{p}.zarr")
            z = zarr.create_array(url, shape=rows.shape, chunks=(16, rows.shape[1]), dtype="int32")
            z[:] = rows
        sites.append({"name": f"org-{p}", "url": url, "resource": f"site-{p % N_WORKERS}"})
    return sites, cuts


def worker_resources(client):
    return {a: w.get("resources", {}) for a, w in client.scheduler_info(n_workers=-1)["workers"].items()}


# --------------------------------------------------------------------------- primitives


def test_fixed_point_and_pairwise_masks_cancel():
    rng = np.random.default_rng(1)
    vecs = [rng.normal(0, 1e3, 50) for _ in range(4)]
    keys = [site_keygen() for _ in range(4)]
    pubs = [k["public"] for k in keys]
    seeds = [site_pair_seeds(k, pubs, p) for p, k in enumerate(keys)]
    assert seeds[0][2] == seeds[2][0] and seeds[1][3] == seeds[3][1] and seeds[0][1] != seeds[0][2]
    masked = [
        site_masked_stats(v, s, p, 7, 32, 4, f"s{p}")
        for p, (v, s) in enumerate(zip(vecs, seeds, strict=True))
    ]
    total = decode_fixed(sum_words(*masked), 32)
    np.testing.assert_allclose(total, np.sum(vecs, axis=0), atol=4 * 2.0**-32)
    for v, m in zip(vecs, masked, strict=True):  # a single masked vector says nothing about its site's values
        assert np.mean(np.abs(decode_fixed(m, 32) - v) < 1.0) < 0.05
    np.testing.assert_allclose(decode_fixed(encode_fixed(vecs[0], 32), 32), vecs[0], atol=2.0**-32)
    with pytest.raises(InputError, match="site 's9'.*fixed-point range"):
        site_masked_stats(np.array([1e12]), {}, 0, 0, 32, 2, "s9")


# --------------------------------------------------------------------------- Dask row blocks


def test_dask_blocks_on_zarr_equal_in_memory_fit(client, iris, reference, tmp_path):
    L, _ = iris
    url = str(tmp_path / "labels.zarr")
    z = zarr.create_array(url, shape=L.shape, chunks=(32, L.shape[1]), dtype="int32")
    z[:] = L
    with pytest.warns(ConvergenceWarning):
        est = fit_bce_dask(url, 3, client=client, random_state=0, max_iter=ITERS, tol=0.0)
    np.testing.assert_allclose(est.memberships_, reference.memberships_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.lower_bound_trace_, reference.lower_bound_trace_, rtol=1e-12)
    np.testing.assert_allclose(est.alpha_, reference.alpha_, rtol=1e-10)
    # also from an in-memory array, cut into other blocks
    with pytest.warns(ConvergenceWarning):
        est2 = fit_bce_dask(L, 3, client=client, block_rows=40, random_state=0, max_iter=ITERS, tol=0.0)
    np.testing.assert_allclose(est2.memberships_, reference.memberships_, rtol=1e-10, atol=1e-12)


# --------------------------------------------------------------------------- exact row-distributed


@pytest.mark.parametrize("P", [1, 2, 3, 4, 5])
def test_secure_row_distributed_equals_centralised(client, iris, reference, tmp_path, P):
    L, _ = iris
    sites, cuts = make_sites(L, P, tmp_path, fmt="npy" if P % 2 else "zarr")
    res = run_federated_bce(sites, 3, client, mode="secure", random_state=0, max_iter=ITERS, tol=0.0)
    assert res.n_iter_ == ITERS
    for p, s in enumerate(sites):
        np.testing.assert_allclose(
            res.memberships(s["name"]), reference.memberships_[cuts[p] : cuts[p + 1]], rtol=1e-8, atol=1e-10
        )
    np.testing.assert_allclose(res.alpha_, reference.alpha_, rtol=1e-8)
    for b, rb in zip(res.beta_, reference.beta_, strict=True):
        np.testing.assert_allclose(b, rb, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(res.lower_bound_trace_, reference.lower_bound_trace_, rtol=1e-8)


def replay_site_stats(rows, categories, params_seq):
    """What a site computes locally, round after round (its E-step with warm-started gamma)."""
    gidx = prepare_block(rows, categories)
    gamma = np.full((gidx["gidx"].shape[0], 3), -1.0)
    out = []
    for params in params_seq:
        vec, gamma = estep_task(gidx, gamma, params, 1e-4, 100)
        out.append(vec)
    return out


@pytest.mark.parametrize("mode", ["secure", "plain"])
def test_coordinator_never_receives_a_sites_statistics(client, iris, tmp_path, mode):
    L, _ = iris
    P = 3
    sites, cuts = make_sites(L, P, tmp_path)
    from distributed import get_task_stream

    log = MessageLog()
    with get_task_stream(client) as ts:
        res = run_federated_bce(sites, 3, client, mode=mode, random_state=1, max_iter=6, tol=0.0, log=log)
    names = [s["name"] for s in sites]
    to_coord = log.received_by(COORDINATOR)
    categories = next(m.payload for m in log.messages if m.kind == "categories")
    # the parameters each site was sent, in order
    sent = {n: [m.payload for m in log.received_by(n) if m.kind == "params"] for n in names}
    assert all(len(v) == res.n_iter_ for v in sent.values())
    local = {n: replay_site_stats(L[cuts[p] : cuts[p + 1]], categories, sent[n]) for p, n in enumerate(names)}
    if mode == "secure":
        assert {m.kind for m in to_coord} == {"meta", "public_key", "masked_stats"}
        rounds = [m for m in to_coord if m.kind == "masked_stats"]
        assert len(rounds) == P * res.n_iter_
        for r in range(res.n_iter_):
            msgs = rounds[r * P : (r + 1) * P]
            for m in msgs:
                own = encode_fixed(local[m.sender][r], 32)
                assert m.payload.dtype == np.uint64
                assert np.mean(m.payload == own) < 0.01  # masked: no entry of the site's own values
                # and no other site's values either
                for n in names:
                    assert not np.array_equal(m.payload, encode_fixed(local[n][r], 32))
            total = decode_fixed(sum_words(*[m.payload for m in msgs]), 32)
            np.testing.assert_allclose(
                total, np.sum([local[n][r] for n in names], axis=0), rtol=1e-9, atol=1e-8
            )
    else:  # the detector works: in clear, the coordinator does get each site's statistics
        stats = [m for m in to_coord if m.kind == "stats"]
        for r in range(res.n_iter_):
            for m in stats[r * P : (r + 1) * P]:
                np.testing.assert_array_equal(m.payload, local[m.sender][r])
    # no site's rows, gamma or private key ever reaches the coordinator
    assert all(m.kind != "gamma" for m in to_coord)
    # every task touching a site's data ran on that site's worker
    res_of = worker_resources(client)
    site_tasks = [t for t in ts.data if str(t["key"]).startswith("site-")]
    assert len(site_tasks) >= P * res.n_iter_
    for t in site_tasks:
        name = next(n for n in names if str(t["key"]).startswith(f"site-{n}-"))
        resource = sites[names.index(name)]["resource"]
        assert resource in res_of[t["worker"]], (t["key"], t["worker"])


# --------------------------------------------------------------------------- heuristic and column variants


def test_sequential_variant_passes_parameters_site_to_site(client, iris, tmp_path):
    L, y = iris
    order = np.random.default_rng(3).permutation(L.shape[0])  # iris rows are sorted by class
    L, y = L[order], y[order]
    sites, cuts = make_sites(L, 3, tmp_path)
    res = run_federated_bce(sites, 3, client, mode="sequential", random_state=0, max_iter=30, tol=1e-6)
    names = [s["name"] for s in sites]
    assert res.log.kinds(COORDINATOR) == {"meta", "params"}
    # parameters travel org-0 -> org-1 -> org-2, never back through the coordinator mid-iteration
    hops = {
        (m.sender, m.receiver) for m in res.log.messages if m.kind == "params" and m.sender != COORDINATOR
    }
    assert hops == {("org-0", "org-1"), ("org-1", "org-2"), ("org-2", COORDINATOR)}
    pred = np.concatenate([res.memberships(n).argmax(axis=1) for n in names])
    assert micro_precision(pred, y) >= 0.75


def test_column_distributed_equals_centralised(client, iris, reference, tmp_path):
    L, _ = iris
    holders = []
    for g, (a, b) in enumerate([(0, 3), (3, 8), (8, 12)]):
        url = str(tmp_path / f"cols{g}.npy")
        np.save(url, L[:, a:b])
        holders.append({"name": f"vendor-{g}", "url": url, "resource": f"site-{g}"})
    res = run_column_distributed_bce(
        holders, 3, client, server_resource="site-4", random_state=0, max_iter=ITERS, tol=0.0
    )
    gamma = res.site_gamma["server"].result()
    np.testing.assert_allclose(gamma / gamma.sum(axis=1, keepdims=True), reference.memberships_, rtol=1e-10)
    np.testing.assert_allclose(res.lower_bound_trace_, reference.lower_bound_trace_, rtol=1e-12)
    for b, rb in zip(res.beta_, reference.beta_, strict=True):
        np.testing.assert_allclose(b, rb, rtol=1e-10, atol=1e-14)
    # clients never send labels or beta mid-fit: only log-likelihoods, to the server
    assert {m.kind for m in res.log.messages if m.receiver == "server"} == {"loglik"}


# --------------------------------------------------------------------------- outputs and errors


def test_site_writes_its_memberships_to_its_own_output(client, iris, tmp_path):
    L, _ = iris
    sites, cuts = make_sites(L, 2, tmp_path)
    sites[1]["output"] = str(tmp_path / "org1-memberships.npy")
    res = run_federated_bce(sites, 3, client, random_state=0, max_iter=5, tol=0.0)
    got = np.load(sites[1]["output"])
    np.testing.assert_allclose(got, res.memberships("org-1"), rtol=1e-6)


def test_bad_sites_are_named(client, iris, tmp_path):
    L, _ = iris
    sites, _ = make_sites(L, 3, tmp_path)
    bad = [dict(s) for s in sites]
    bad[1]["url"] = str(tmp_path / "nowhere.npy")
    with pytest.raises(InputError, match="site 'org-1': cannot read labels"):
        run_federated_bce(bad, 3, client, max_iter=2)
    bad = [dict(s) for s in sites]
    bad[2]["resource"] = "site-mars"
    with pytest.raises(InputError, match="site 'org-2' is unreachable.*'site-mars'"):
        run_federated_bce(bad, 3, client, max_iter=2)
    bad = [dict(s) for s in sites]
    del bad[0]["url"]
    with pytest.raises(InputError, match="site 'org-0' has no 'url'"):
        run_federated_bce(bad, 3, client, max_iter=2)
    np.save(tmp_path / "narrow.npy", L[:10, :5])
    bad = [dict(s) for s in sites]
    bad[2]["url"] = str(tmp_path / "narrow.npy")
    with pytest.raises(InputError, match="site 'org-2' has 5 clusterings but site 'org-0' has 12"):
        run_federated_bce(bad, 3, client, max_iter=2)
    with pytest.raises(InputError, match="'mode'"):
        run_federated_bce(sites, 3, client, mode="gossip")


def test_missing_labels_across_sites_still_match(client, iris, tmp_path):
    L, _ = iris
    rng = np.random.default_rng(5)
    Lm = L.copy()
    Lm[rng.random(L.shape) < 0.6] = -1
    Lm[7] = -1  # an empty row at a site
    sites, cuts = make_sites(Lm, 2, tmp_path)
    with pytest.warns(EmptyRowsWarning), warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        ref = BCE(3, random_state=0, max_iter=10, tol=0.0).fit(Lm)
    res = run_federated_bce(sites, 3, client, random_state=0, max_iter=10, tol=0.0)
    memb = np.vstack([res.memberships(s["name"]) for s in sites])
    np.testing.assert_allclose(memb, ref.memberships_, rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(memb[7], ref.alpha_ / ref.alpha_.sum(), rtol=1e-8)

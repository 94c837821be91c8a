"""BCE's E-step on Dask row blocks, and column-distributed BCE (Wang et al. 2011 Sect. 5.2.2)."""

from pathlib import Path

import numpy as np
import pytest
import zarr
from sklearn.cluster import KMeans
from sklearn.exceptions import ConvergenceWarning

from ensemble_dask.consensus.bce import BCE
from ensemble_dask.federated import run_column_distributed_bce
from ensemble_dask.rowblocks.bce import fit_bce_dask

DATA = Path(__file__).resolve().parents[1] / "data"  # tests/data/README.md: provenance, licence
ITERS = 25


@pytest.fixture(scope="module")
def iris():
    X = np.loadtxt(DATA / "uci" / "iris.data.gz")
    L = np.column_stack(
        [KMeans(3, n_init=1, init="random", random_state=s).fit_predict(X) for s in range(12)]
    ).astype(np.int32)
    L[np.random.default_rng(0).random(L.shape) < 0.15] = -1
    return L


@pytest.fixture(scope="module")
def client():
    from distributed import Client, Scheduler, SpecCluster, Worker

    workers = {  # threads of this process: these tests are about the algorithm, not about processes
        f"w{i}": {
            "cls": Worker,
            "options": {"nthreads": 1, "resources": {f"site-{i}": 1}, "host": "127.0.0.1"},
        }
        for i in range(3)
    }
    scheduler = {"cls": Scheduler, "options": {"dashboard_address": ":0", "host": "127.0.0.1"}}
    with SpecCluster(scheduler=scheduler, workers=workers) as cluster, Client(cluster) as c:
        c.wait_for_workers(3)
        yield c


@pytest.fixture(scope="module")
def reference(iris):
    with pytest.warns(ConvergenceWarning):
        return BCE(3, init="random", random_state=0, max_iter=ITERS, tol=0.0).fit(iris)


@pytest.mark.slow
def test_dask_blocks_on_zarr_equal_in_memory_fit(client, iris, reference, tmp_path):
    url = str(tmp_path / "labels.zarr")
    z = zarr.create_array(url, shape=iris.shape, chunks=(32, iris.shape[1]), dtype="int32")
    z[:] = iris
    with pytest.warns(ConvergenceWarning):
        est = fit_bce_dask(url, 3, client=client, random_state=0, max_iter=ITERS, tol=0.0)
    np.testing.assert_allclose(est.memberships_, reference.memberships_, rtol=1e-10, atol=1e-12)
    np.testing.assert_allclose(est.lower_bound_trace_, reference.lower_bound_trace_, rtol=1e-12)
    np.testing.assert_allclose(est.alpha_, reference.alpha_, rtol=1e-10)
    with pytest.warns(ConvergenceWarning):  # also from an in-memory array, cut into other blocks
        est2 = fit_bce_dask(iris, 3, client=client, block_rows=40, random_state=0, max_iter=ITERS, tol=0.0)
    np.testing.assert_allclose(est2.memberships_, reference.memberships_, rtol=1e-10, atol=1e-12)


def test_dask_blocks_refuse_a_partition_as_the_start_by_name(client, iris):
    """Rows are not fetched to the client for a start: a partition given as ``init`` is refused clearly."""
    from ensemble_dask import InputError

    with pytest.raises(InputError, match=r"fit_bce_dask starts from .*got init=an array of shape \(150,\)"):
        fit_bce_dask(iris, 3, client=client, init=np.zeros(150, dtype=int))


def test_column_distributed_equals_centralised(client, iris, reference, tmp_path):
    holders = []
    for g, (a, b) in enumerate([(0, 3), (3, 8), (8, 12)]):
        url = str(tmp_path / f"cols{g}.npy")
        np.save(url, iris[:, a:b])
        holders.append({"name": f"vendor-{g}", "url": url, "resource": f"site-{g}"})
    client.run(_clear_transfer_logs)
    res = run_column_distributed_bce(
        holders, 3, client, server_resource="site-2", random_state=0, max_iter=ITERS, tol=0.0
    )
    gamma = res.site_gamma["server"].result()
    np.testing.assert_allclose(gamma / gamma.sum(axis=1, keepdims=True), reference.memberships_, rtol=1e-10)
    np.testing.assert_allclose(res.lower_bound_trace_, reference.lower_bound_trace_, rtol=1e-12)
    for b, rb in zip(res.beta_, reference.beta_, strict=True):
        np.testing.assert_allclose(b, rb, rtol=1e-10, atol=1e-14)
    # clients never send labels or beta mid-fit: only log-likelihoods, to the server. Checked on what
    # each worker fetched from the others (distributed's own transfer logs), not only on the protocol's
    # record of itself; the server's worker also holds vendor-2's columns, which need no transfer.
    by_site = {
        next(iter(w["resources"])): addr for addr, w in client.scheduler_info(n_workers=-1)["workers"].items()
    }
    fetched = client.run(_fetched_kinds)
    assert fetched[by_site["site-2"]] == {"loglik"}
    assert fetched[by_site["site-0"]] == fetched[by_site["site-1"]] == {"_phi_slice"}
    assert {m.kind for m in res.log.messages if m.receiver == "server"} == {"loglik"}


def _clear_transfer_logs(dask_worker):
    dask_worker.transfer_incoming_log.clear()


def _fetched_kinds(dask_worker):
    """The kinds of the results this worker fetched from other workers (``site-<name>-<kind>-<id>``
    keys of the clients' tasks; ``<function>-<token>`` of the server's)."""
    keys = {key for t in dask_worker.transfer_incoming_log for key in t["keys"]}
    return {k.rsplit("-", 2)[1] if k.startswith("site-") else k.split("-", 1)[0] for k in keys}


def test_block_statistics_are_summed_a_window_at_a_time(client):
    """From a security review: the blocks' statistics (K x G each, up to 128 MiB at a site) were all
    computed and held before a tree summed them (2.5 GB at 16 blocks). ``in_order`` holds at most ``window``
    blocks' results at once, and sums them in block order, as the in-memory backends do: KCC's statistics
    on 23 blocks are LocalBlocks' bit for bit."""
    from ensemble_dask.consensus.kcc._blocks import LocalBlocks, block_norms
    from ensemble_dask.rowblocks.blocks import DaskBlocks, in_order

    held, most = [0], [0]

    def submit(b):
        held[0] += 1
        most[0] = max(most[0], held[0])
        return client.submit(np.full, 3, float(b), pure=False)

    def combine(total, part):
        held[0] -= 1
        return total + part

    total = in_order(client, submit, 23, combine, window=3)
    assert most[0] <= 3 + 1 and total.tolist() == [253.0] * 3  # (+1: the first result, not combined)
    rng = np.random.default_rng(0)
    offsets = np.array([0, 7, 14, 21])  # three clusterings of 7 labels each
    gidx = [rng.integers(0, 7, size=(int(rng.integers(5, 40)), 3)) + offsets[:3] for _ in range(23)]
    gidx = [np.where(rng.random(g.shape) < 0.2, -1, g).astype(np.int64) for g in gidx]
    weight = [rng.random(g.shape[0]) + 0.5 for g in gidx]  # not integers: the order of the sums shows
    local = LocalBlocks(gidx, weight)
    dask = DaskBlocks(client, client.scatter(gidx), [g.shape[0] for g in gidx], client.scatter(weight))
    for got, want in zip(dask.sizes(21), local.sizes(21), strict=True):
        np.testing.assert_array_equal(got, want)
    chosen = [0, 3, 12]
    for got, want in zip(dask.cooccurrence(chosen, 21), local.cooccurrence(chosen, 21), strict=True):
        np.testing.assert_array_equal(got, want)
    MT = rng.random((21, 4))
    sq = block_norms(MT, offsets)
    got, want = dask.step(MT, sq, 4), local.step(MT, sq, 4)
    for key in ("counts", "sizes", "sse", "far_d", "far_rows"):
        np.testing.assert_array_equal(got[key], want[key])

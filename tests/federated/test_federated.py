"""Row-distributed BCE and KCC over real site agent processes (mutual TLS, SecAgg+), on 127.0.0.1.

Each site is its own agent process with its own config and keys (``tests/_sites.py``). The answers are
checked against centralised BCE / KCC on the pooled rows (of the survivors, when sites drop out), and
every reply the coordinator received against each site's statistics, replayed here with the sites' own
functions: none appears unmasked.
"""

from __future__ import annotations

import signal
import warnings
from types import SimpleNamespace

import numpy as np
import pytest
from sklearn.cluster import KMeans
from sklearn.datasets import load_iris
from sklearn.exceptions import ConvergenceWarning

from ensemble_dask import InputError
from ensemble_dask.consensus.bce import BCE
from ensemble_dask.consensus.kcc import KCC
from ensemble_dask.federated import (
    SiteLostError,
    SiteRefusedError,
    run_federated_bce,
    run_federated_kcc,
)
from ensemble_dask.federated.coordinator.link import SiteLink, SitesDroppedWarning
from ensemble_dask.federated.protocol.secure import decode_fixed
from ensemble_dask.federated.site import data as rows
from ensemble_dask.io.store import RunStore
from ensemble_dask.metrics import partition_scores
from ensemble_dask.stages.federated import StoreCheckpoint
from tests._sites import split_rows, start_sites

pytestmark = pytest.mark.slow

THREE = ["site-a", "site-b", "site-c"]
FIVE = ["site-a", "site-b", "site-c", "site-d", "site-e"]
ITERS = 15


def iris_ensemble(seed=0, n_clusterings=10, missing=0.15):
    """k-means labelings of shuffled iris (scikit-learn's copy), some entries missing: ``(labels, y)``."""
    X, y = load_iris(return_X_y=True)
    order = np.random.default_rng(seed).permutation(X.shape[0])  # iris rows are sorted by class
    X, y = X[order], y[order]
    L = np.column_stack(
        [KMeans(3, n_init=1, init="random", random_state=s).fit_predict(X) for s in range(n_clusterings)]
    ).astype(np.int32)
    L[np.random.default_rng(seed).random(L.shape) < missing] = -1
    return L, y


@pytest.fixture(scope="module")
def iris():
    return iris_ensemble(0)


@pytest.fixture(scope="module")
def three(iris, tmp_path_factory):
    L, y = iris
    parts, refs = split_rows(L, THREE, y)
    agents = start_sites(tmp_path_factory.mktemp("three"), parts, references=refs)
    yield agents
    agents.stop()


class Replies:
    """Every reply the coordinator received from the sites (``SiteLink.post`` results)."""

    def __init__(self, monkeypatch):
        self.results = []
        orig = SiteLink.post

        def post(link, op, message):
            out = orig(link, op, message)
            self.results.append(out)
            return out

        monkeypatch.setattr(SiteLink, "post", post)

    def arrays(self, raw=False):
        found, stack = [], list(self.results)
        while stack:
            obj = stack.pop()
            if isinstance(obj, dict):
                stack.extend(obj.values())
            elif isinstance(obj, (list, tuple)):
                stack.extend(obj)
            elif isinstance(obj, np.ndarray):
                if obj.dtype == np.uint64 and obj.ndim == 2 and obj.shape[0] == 2 and not raw:
                    found.append(decode_fixed(obj))
                else:
                    found.append(np.asarray(obj, dtype=np.float64).ravel())
        return found


def leaks(arrays, vectors):
    """Indices of ``vectors`` that appear (to 1e-6) among ``arrays``."""
    return [
        i for i, v in enumerate(vectors)
        if any(a.shape == v.shape and np.allclose(a, v, rtol=1e-6, atol=1e-6) for a in arrays)
    ]  # fmt: skip


def setup_vectors(parts):
    """What each site computes to fix the category space (label range, label counts), replayed here."""
    states = {n: SimpleNamespace(name=n, data={"labels": L}) for n, L in parts.items()}
    bits = {n: rows.bce_label_bits(st) for n, st in states.items()}
    N = next(iter(parts.values())).shape[1]
    onehot = np.sum(list(bits.values()), axis=0).reshape(N, 64)
    sizes = [1 << int(np.flatnonzero(row > 0.5).max()) for row in onehot]
    return [v for n, st in states.items() for v in (bits[n], rows.bce_label_counts(st, sizes))]


def memberships(agents, names):
    """The sites' own outputs (read here by the test; the coordinator never gets them)."""
    import zarr

    return np.vstack(
        [zarr.open_array(agents.configs[n].parent / "memberships.zarr", mode="r")[:] for n in names]
    )


def fit_bce(agents, **kw):
    kw = {"random_state": 0, "max_iter": ITERS, "tol": 0.0, "timeout": 60, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return run_federated_bce(agents.sites(), 3, agents.context(), **kw)


def central_bce(L, **kw):
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return BCE(3, init="random", random_state=0, max_iter=ITERS, tol=0.0, **kw).fit(L)


# --------------------------------------------------------------------------- BCE and KCC


def test_secure_bce_equals_centralised_and_the_coordinator_sees_only_masked_sums(three, iris, monkeypatch):
    L, y = iris
    rx = Replies(monkeypatch)
    res = fit_bce(three)
    ref = central_bce(L)
    assert res.rows_per_site == {"site-a": 50, "site-b": 50, "site-c": 50} and res.dropped == []
    np.testing.assert_allclose(res.alpha_, ref.alpha_, rtol=1e-9)
    # a site rounds each row's terms to 2**-32 before it sums them (exact sums, which the split of the rows
    # among sites cannot change): the bound differs from the centralised one's by up to 4e-10 relative
    np.testing.assert_allclose(res.lower_bound_trace_, ref.lower_bound_trace_, rtol=1e-9)
    np.testing.assert_allclose(memberships(three, THREE), ref.memberships_, rtol=1e-6, atol=1e-7)
    central = partition_scores(ref.labels_, y)
    for key in ("H", "ARI", "NMI"):
        assert res.scores[key] == pytest.approx(central[key], abs=1e-12)
    # what the coordinator received: no site's category-space vectors, though their sums are decoded
    parts, _ = split_rows(L, THREE)
    arrays = rx.arrays()
    assert leaks(arrays, setup_vectors(parts)) == []
    # each site's masked input alone decodes to noise spread over the whole fixed-point range
    words = [r["words"] for r in rx.results if isinstance(r, dict) and "words" in r]
    assert len(words) == 3 * (ITERS + 2 + 2)  # label range, label counts, E-steps, reference range, table
    assert all(np.median(np.abs(decode_fixed(w))) > 1e12 for w in words)
    assert not any(a.size == 3 * 50 for a in arrays)  # no per-row memberships of a site


def test_the_detector_sees_statistics_sent_in_clear(iris, tmp_path, monkeypatch):
    """Plain mode (which a site allows only in its own config) does reveal each site's vectors."""
    L, _ = iris
    parts, _ = split_rows(L, THREE)
    agents = start_sites(tmp_path, parts, allow_plain=True)
    try:
        rx = Replies(monkeypatch)
        res = fit_bce(agents, mode="plain", max_iter=3)
    finally:
        agents.stop()
    assert res.mode == "plain"
    setup = setup_vectors(parts)
    assert leaks(rx.arrays(), setup) == list(range(len(setup)))


def test_secure_kcc_equals_centralised(three, iris):
    L, y = iris
    res = run_federated_kcc(three.sites(), 3, three.context(), random_state=3, timeout=60)
    ref = KCC(3, init="clusters", n_init=1, random_state=3).fit(L)
    assert res.converged_ and ref.converged_ and res.n_iter_ == ref.n_iter_
    for c, rc in zip(res.cluster_centers_, ref.cluster_centers_, strict=True):
        np.testing.assert_allclose(c, rc, rtol=1e-12, atol=1e-15)
    assert res.objective_ == pytest.approx(ref.objective_, rel=1e-12)
    np.testing.assert_allclose(memberships(three, THREE), ref.memberships_, rtol=1e-6, atol=1e-7)
    assert res.scores["ARI"] == pytest.approx(partition_scores(ref.labels_, y)["ARI"], abs=1e-12)
    with pytest.raises(InputError, match="'init' parameter of federated KCC.*'k-means\\+\\+'"):
        run_federated_kcc(three.sites(), 3, three.context(), init="k-means++")


def test_bad_sites_are_named(three, tmp_path):
    sites = three.sites()
    with pytest.raises(InputError, match="address must be https://HOST:PORT"):
        run_federated_bce([{**sites[0], "address": "tcp://127.0.0.1:1"}, *sites[1:]], 3, three.context())
    swapped = [{**sites[0], "address": sites[1]["address"]}, *sites[1:]]
    with pytest.raises(SiteRefusedError, match="presents the certificate of 'site-b', not of site 'site-a'"):
        run_federated_bce(swapped, 3, three.context(), max_iter=1)
    with pytest.raises(SiteRefusedError, match="is not this site's federation"):
        run_federated_bce(sites[:2], 3, three.context(), max_iter=1)


# --------------------------------------------------------------------------- dropouts


@pytest.fixture
def five(iris, tmp_path):
    L, _ = iris
    parts, _ = split_rows(L, FIVE)
    agents = start_sites(tmp_path, parts, min_sites=4)
    yield agents, parts
    agents.stop()


def test_one_of_five_sites_killed_mid_run_the_fit_completes_over_the_survivors(five):
    agents, parts = five

    def kill_at_4(t, bound):
        if t == 3 and agents.procs["site-d"].poll() is None:
            agents.kill("site-d")

    with pytest.warns(SitesDroppedWarning, match=r"site\(s\) \['site-d'\] dropped out"):
        res = fit_bce(agents, progress=kill_at_4)
    survivors = [n for n in FIVE if n != "site-d"]
    assert res.dropped == ["site-d"] and sorted(res.rows_per_site) == survivors
    ref = central_bce(np.vstack([parts[n] for n in survivors]))
    np.testing.assert_allclose(res.alpha_, ref.alpha_, rtol=1e-9)
    np.testing.assert_allclose(res.lower_bound_trace_, ref.lower_bound_trace_, rtol=1e-9)
    np.testing.assert_allclose(memberships(agents, survivors), ref.memberships_, rtol=1e-6, atol=1e-7)


def test_two_of_five_killed_the_run_stops_naming_them_and_resumes(five, iris, tmp_path):
    agents, parts = five
    L, _ = iris
    checkpoint = StoreCheckpoint(RunStore(tmp_path / "coordinator.zarr"))

    def kill_two_at_6(t, bound):
        if t == 5:
            agents.kill("site-b")
            agents.kill("site-e")

    with pytest.raises(SiteLostError, match=r"\['site-b', 'site-e'\] lost in EM iteration 7.*at least 4"):
        fit_bce(agents, checkpoint=checkpoint, progress=kill_two_at_6)
    assert len(checkpoint.load()["trace"]) == 6  # (alpha, beta) after the 6th complete iteration
    for name in ("site-b", "site-e"):
        agents.start(name)
        agents.wait(name)
    res = fit_bce(agents, checkpoint=checkpoint)
    assert res.resumed_from == 6 and res.dropped == []
    ref = central_bce(L)
    np.testing.assert_allclose(res.lower_bound_trace_, ref.lower_bound_trace_, rtol=1e-9)
    np.testing.assert_allclose(memberships(agents, FIVE), ref.memberships_, rtol=1e-6, atol=1e-7)


def test_a_site_that_stops_answering_is_dropped_at_the_timeout(five):
    agents, parts = five

    def freeze_at_3(t, bound):
        if t == 2 and "frozen" not in agents.__dict__:
            agents.frozen = True
            agents.procs["site-a"].send_signal(signal.SIGSTOP)

    # Every agent's first session reads its rows and loads (on an empty numba cache: compiles) its kernels,
    # five processes at once on two cores: over 10 s in CI. A first run at the default timeout warms them,
    # so the 10 s below times out the frozen site only.
    fit_bce(agents, max_iter=1)
    try:
        with pytest.warns(SitesDroppedWarning, match=r"\['site-a'\] dropped out"):
            res = fit_bce(agents, timeout=10, max_iter=5, progress=freeze_at_3)
    finally:
        agents.procs["site-a"].send_signal(signal.SIGCONT)
    assert res.dropped == ["site-a"] and "site-a" not in res.rows_per_site


def test_idle_sessions_expire_at_the_site(three):
    """A session not called for longer than the site's ``idle_timeout`` is dropped."""
    import time

    from ensemble_dask.federated.site.agent import Session, SiteAgent
    from ensemble_dask.federated.site.config import load_config

    agent = SiteAgent(load_config(three.configs["site-a"]))
    agent.config.idle_timeout = 30.0
    live = Session("site-a", "a" * 16, "bce", "secure", THREE, 3, {})
    idle = Session("site-a", "b" * 16, "bce", "secure", THREE, 3, {})
    idle.last_used = time.monotonic() - 31.0
    agent.sessions.update({live.session: live, idle.session: idle})
    agent._expire()
    assert set(agent.sessions) == {live.session}

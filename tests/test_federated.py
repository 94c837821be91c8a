"""Row-distributed BCE with secure aggregation, on real processes over TLS.

A `dask scheduler` and three `dask worker --resources site-i=1` processes (no nanny, so a killed
worker stays dead) on 127.0.0.1, every connection TLS with certificates from ``make_certs``; each
worker loads its site's masking key and the pinned public keys with
``--preload ensemble_dask.federated.site``. The tests check the answer against centralised BCE and
what the client process actually receives on its connections.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
import warnings
from pathlib import Path
from types import SimpleNamespace

import numpy as np
import pytest
from distributed.diagnostics.plugin import WorkerPlugin
from sklearn.cluster import KMeans

from ensemble_dask import InputError
from ensemble_dask._validation import check_random_state
from ensemble_dask.consensus.bce import BCE, ConvergenceWarning, StatsLayout, _offsets, run_em
from ensemble_dask.federated import SiteLostError, rows, run_federated_bce
from ensemble_dask.federated.certs import load_mask_public, make_certs
from ensemble_dask.federated.dask import estep_task, prepare_block
from ensemble_dask.federated.secure import decode_fixed, sum_words
from ensemble_dask.federated.site import PLUGIN_NAME
from ensemble_dask.io.store import RunStore
from ensemble_dask.metrics import partition_scores
from ensemble_dask.stages.federated import StoreCheckpoint

from .conftest import REPO, _exe, _free_port, _stop, _wait_port

DATA = Path(__file__).resolve().parents[2] / "shared" / "data"
SITES = ["site-0", "site-1", "site-2"]
ITERS = 20


# --------------------------------------------------------------------------- a TLS cluster of processes


class TLSCluster:
    def __init__(self, root):
        self.root = root
        self.certs = root / "certs"
        make_certs(self.certs, ["coordinator", *SITES, "mallory"])
        self.port = _free_port()
        self.address = f"tls://127.0.0.1:{self.port}"
        self.env = {**os.environ, "PYTHONPATH": str(REPO), "DASK_DISTRIBUTED__WORKER__DAEMON": "False"}
        self.workers = {}

    def tls_args(self, name):
        c = self.certs
        return [
            "--tls-ca-file",
            str(c / "ca.pem"),
            "--tls-cert",
            str(c / f"{name}.pem"),
            "--tls-key",
            str(c / f"{name}-key.pem"),
        ]

    def start_scheduler(self):
        self.scheduler = subprocess.Popen(
            [_exe("dask"), "scheduler", "--host", "127.0.0.1", "--port", str(self.port), "--protocol", "tls",
             "--dashboard-address", ":0", *self.tls_args("coordinator")],
            cwd=self.root, env=self.env, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        _wait_port(self.port, self.scheduler)

    def start_worker(self, name):
        self.workers[name] = subprocess.Popen(
            [_exe("dask"), "worker", self.address, "--nthreads", "1", "--no-nanny", "--host", "127.0.0.1",
             "--no-dashboard", "--resources", f"{name}=1", *self.tls_args(name),
             "--preload", "ensemble_dask.federated.site", "--mask-key", str(self.certs / f"{name}-mask.key"),
             "--pins", str(self.certs), "--site-name", name],
            cwd=self.root, env=self.env, stdout=subprocess.DEVNULL, stderr=open(self.root / f"{name}.log", "ab"),
        )  # fmt: skip

    def kill_worker(self, name):
        self.workers[name].send_signal(signal.SIGKILL)
        self.workers[name].wait()

    def security(self):
        from distributed import Security

        c = self.certs
        return Security(
            tls_ca_file=str(c / "ca.pem"),
            tls_client_cert=str(c / "coordinator.pem"),
            tls_client_key=str(c / "coordinator-key.pem"),
            require_encryption=True,
        )

    def pins(self):
        return {n: load_mask_public(self.certs / f"{n}-mask.pub") for n in SITES}

    def stop(self):
        procs = [p for p in [*self.workers.values(), getattr(self, "scheduler", None)] if p is not None]
        for p in procs:  # all at once: each takes a while to close its comms
            if p.poll() is None:
                p.terminate()
        for p in procs:
            _stop(p)


def tls_cluster(tmp_path_factory, folder):
    """A TLS scheduler and one worker per site (real processes), with a connected client as ``.client``."""
    from distributed import Client

    tc = TLSCluster(tmp_path_factory.mktemp(folder))
    try:
        tc.start_scheduler()
        for name in SITES:
            tc.start_worker(name)
        with Client(tc.address, security=tc.security(), timeout="30s") as c:
            c.wait_for_workers(len(SITES), timeout=300)  # a loaded machine starts processes slowly
            tc.client = c
            yield tc
    finally:
        tc.stop()


class TaskResults(WorkerPlugin):
    """Every task result a worker holds: what a client could fetch from it by asking Dask for a key."""

    name = "test-task-results"

    def setup(self, worker):
        self.worker = worker
        self.values = []

    def transition(self, key, start, finish, **kwargs):
        if finish == "memory" and key in self.worker.data:
            self.values.append(self.worker.data[key])


def held_results(client):
    """The results the workers' recorders saw since the last call (then cleared)."""

    def take(dask_worker):
        plugin = dask_worker.plugins["test-task-results"]
        out, plugin.values = plugin.values, []
        return out

    return [v for values in client.run(take).values() for v in values]


@pytest.fixture(scope="module")
def cluster(tmp_path_factory):
    for tc in tls_cluster(tmp_path_factory, "tls"):
        tc.client.register_plugin(TaskResults())
        yield tc


def iris_ensemble(seed):
    """10 k-means labelings of shuffled iris (``seed``), 15% of the entries missing: ``(labels, y)``."""
    X = np.loadtxt(DATA / "uci" / "iris.data.gz")
    y = np.loadtxt(DATA / "uci" / "iris.labels0.gz").astype(int)
    order = np.random.default_rng(seed).permutation(X.shape[0])  # iris rows are sorted by class
    X, y = X[order], y[order]
    L = np.column_stack(
        [KMeans(3, n_init=1, init="random", random_state=s).fit_predict(X) for s in range(10)]
    )
    L = L.astype(np.int32)
    L[np.random.default_rng(seed).random(L.shape) < 0.15] = -1
    return L, y


@pytest.fixture(scope="module")
def iris():
    return iris_ensemble(0)


@pytest.fixture(scope="module")
def reference(iris):
    """Centralised BCE, and the parameters of each of its E-steps (to replay what each site computes)."""
    L, _ = iris
    with pytest.warns(ConvergenceWarning):
        ref = BCE(3, init="random", random_state=0, max_iter=ITERS, tol=0.0).fit(L)
    est = BCE(3, init="random", random_state=0, max_iter=ITERS, tol=0.0)
    est._check_params()
    cats = ref.categories_
    from ensemble_dask.consensus._bce_common import _InMemoryEStep, encode_labels

    gidx = encode_labels(L, cats)[0]
    estep = _InMemoryEStep(gidx, np.ones(L.shape[1]), np.empty((L.shape[0], 0)), np.empty(0), 3, 1e-4, 100)
    params_seen = []
    start = est._random_params(check_random_state(0), cats)
    run_em(
        estep, start, StatsLayout(3, int(_offsets(cats)[-1])), _offsets(cats), max_iter=ITERS, tol=0.0,
        callback=lambda t, p, s: params_seen.append(p.copy()),
    )  # fmt: skip
    return ref, params_seen


def make_sites(L, root, y=None, cuts=(40, 95)):
    bounds = [0, *cuts, L.shape[0]]
    sites = []
    for p, name in enumerate(SITES):
        a, b = bounds[p], bounds[p + 1]
        np.save(root / f"{name}.npy", L[a:b])
        site = {
            "name": name,
            "resource": name,
            "url": str(root / f"{name}.npy"),
            "output": str(root / f"{name}-memberships.npy"),
            "checkpoint": str(root / f"{name}-state"),
        }
        if y is not None:
            np.save(root / f"{name}-ref.npy", y[a:b])
            site["reference"] = str(root / f"{name}-ref.npy")
        sites.append(site)
    return sites, bounds


def site_vectors(L, bounds, categories, params_seq):
    """What each site computes round after round (its E-step, warm-started): replayed here."""
    out = []
    for p in range(len(SITES)):
        prep = prepare_block(L[bounds[p] : bounds[p + 1]], categories)
        gamma = np.full((prep["gidx"].shape[0], 3), -1.0)
        vecs = []
        for params in params_seq:
            vec, gamma = estep_task(prep, gamma, params, 1e-4, 100)
            vecs.append(vec)
        out.append(vecs)
    return out


def setup_vectors(L, bounds, y=None, labels=None):
    """What each site sends outside the EM rounds, replayed here with the sites' own functions: the
    label-range and label-count vectors that fix the category space and, with reference labels, the
    reference range and the contingency table of ``labels`` (the consensus) against them."""
    states = [
        SimpleNamespace(name=name, data={"labels": L[a:b]})
        for name, a, b in zip(SITES, bounds[:-1], bounds[1:], strict=True)
    ]
    bits = [rows.bce_label_bits(st) for st in states]
    onehot = np.sum(bits, axis=0).reshape(L.shape[1], 64)
    sizes = [1 << int(np.flatnonzero(row > 0.5).max()) for row in onehot]
    out = [[b, rows.bce_label_counts(st, sizes)] for b, st in zip(bits, states, strict=True)]
    if y is not None:
        for st, a, b in zip(states, bounds[:-1], bounds[1:], strict=True):
            st.data.update(reference=y[a:b], labels_=labels[a:b], k=3)
        ref_bits = [rows.bce_reference_bits(st) for st in states]
        n_classes = 1 << int(np.flatnonzero(np.sum(ref_bits, axis=0) > 0.5).max())
        for vecs, st, rb in zip(out, states, ref_bits, strict=True):
            vecs += [rb, rows.bce_contingency(st, n_classes)]
    return out


class Received:
    """Every message the client process reads from its (TLS) connections, deserialised."""

    def __init__(self):
        self.messages = []

    def __enter__(self):
        from distributed.comm import tcp

        self._orig = tcp.TCP.read
        rec = self.messages

        async def read(comm, deserializers=None):
            msg = await self._orig(comm, deserializers)
            rec.append(msg)
            return msg

        tcp.TCP.read = read
        return self

    def __exit__(self, *exc):
        from distributed.comm import tcp

        tcp.TCP.read = self._orig

    def arrays(self, raw=False):
        """Every NumPy array inside the received messages (two-word fixed point decoded, unless ``raw``)."""
        return arrays_in(self.messages, raw)


def arrays_in(objects, raw=False):
    """Every NumPy array inside ``objects`` (messages, task results; two-word fixed point decoded unless ``raw``)."""
    from distributed.protocol import Serialized, deserialize

    found, stack = [], list(objects)
    while stack:
        obj = stack.pop()
        if isinstance(obj, Serialized):
            obj = deserialize(obj.header, obj.frames)
        if isinstance(obj, dict):
            stack.extend(obj.values())
        elif isinstance(obj, (list, tuple, set)):
            stack.extend(obj)
        elif isinstance(obj, np.ndarray) and obj.dtype.kind in "fiu":
            if obj.dtype == np.uint64 and obj.ndim == 2 and obj.shape[0] == 2:
                found.append(obj if raw else decode_fixed(obj))
            else:
                found.append(np.asarray(obj, dtype=np.float64).ravel())
    return found


def leaks(arrays, per_site):
    """(site, round) whose unmasked statistics vector appears among ``arrays``."""
    hits = []
    for p, vecs in enumerate(per_site):
        for r, v in enumerate(vecs):
            if any(a.shape == v.shape and np.allclose(a, v, rtol=1e-6, atol=1e-6) for a in arrays):
                hits.append((SITES[p], r))
    return hits


def fit(cluster, sites, **kw):
    kw = {"random_state": 0, "max_iter": ITERS, "tol": 0.0, "pins": cluster.pins(), "timeout": 180, **kw}
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", ConvergenceWarning)
        return run_federated_bce(sites, 3, cluster.client, **kw)


def open_sessions(client):
    """``{worker: sessions}`` of the site workers still holding a session's state."""

    def count(dask_worker):
        return len(dask_worker.plugins[PLUGIN_NAME].sessions)

    return {addr: n for addr, n in client.run(count).items() if n}


def memberships(sites):
    """The sites' own outputs (read here by the test; the coordinator never gets them)."""
    return np.vstack([np.load(s["output"]) for s in sites])


# --------------------------------------------------------------------------- tests


def test_secure_equals_centralised_and_the_client_never_receives_a_sites_statistics(
    cluster, iris, reference, tmp_path
):
    L, y = iris
    ref, params_seen = reference
    sites, bounds = make_sites(L, tmp_path, y)
    held_results(cluster.client)  # what earlier tests left in the recorders
    with Received() as rx:
        res = fit(cluster, sites)
    # the answer: centralised BCE on the pooled rows
    assert res.n_iter_ == ITERS and res.rows_per_site == {"site-0": 40, "site-1": 55, "site-2": 55}
    assert res.converged_ is False and ref.converged_ is False  # tol=0: stopped at the cap, and says so
    np.testing.assert_allclose(res.alpha_, ref.alpha_, rtol=1e-9)
    for b, rb in zip(res.beta_, ref.beta_, strict=True):
        np.testing.assert_allclose(b, rb, rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(res.lower_bound_trace_, ref.lower_bound_trace_, rtol=1e-10)
    np.testing.assert_allclose(memberships(sites), ref.memberships_, rtol=1e-6, atol=1e-7)  # float32 files
    # the federation's scores, from the securely summed contingency tables
    central = partition_scores(ref.labels_, y)
    for key in ("H", "ARI", "NMI"):
        assert res.scores[key] == pytest.approx(central[key], abs=1e-12)
    # what the client process received: never one site's unmasked statistics, nor the total alone
    per_site = site_vectors(L, bounds, ref.categories_, params_seen)
    arrays = rx.arrays()
    assert leaks(arrays, per_site) == []
    totals = [np.sum([per_site[p][r] for p in range(3)], axis=0) for r in range(ITERS)]
    assert leaks(arrays, [totals]) == []
    # nor which labels a site holds (the category space), its reference classes or its contingency table
    setup = setup_vectors(L, bounds, y, ref.labels_)
    assert leaks(arrays, setup) == []
    # ... but masked vectors that add up to the totals (so the check above looked at the right data)
    words = [w for w in rx.arrays(raw=True) if w.ndim == 2 and w.shape == (2, totals[0].size)]
    assert len(words) == 3 * ITERS
    np.testing.assert_allclose(decode_fixed(sum_words(words)), np.sum(totals, axis=0), rtol=1e-9)
    # and no rows' parameters (gamma or memberships: k values per row or per distinct row of a site)
    blocks = [L[a:b] for a, b in zip(bounds[:-1], bounds[1:], strict=True)]
    row_counts = {len(b) for b in blocks} | {L.shape[0]}
    row_counts |= {prepare_block(b, ref.categories_)["gidx"].shape[0] for b in blocks}
    assert not any(a.size in {3 * r for r in row_counts} for a in arrays)
    # asking Dask would not give more: every result any task left on the site workers (what the client
    # could fetch by its key) is masked as well; the recorders did see the masked vectors
    held = held_results(cluster.client)
    assert leaks(arrays_in(held), per_site) == [] and leaks(arrays_in(held), setup) == []
    assert len([w for w in arrays_in(held, raw=True) if w.shape == (2, totals[0].size)]) == 3 * ITERS
    assert not any(a.size in {3 * r for r in row_counts} for a in arrays_in(held))


def test_detector_finds_statistics_sent_in_clear(cluster, iris, reference, tmp_path):
    """The same checks, on a plain run, do see each site's vectors (so the test above can fail)."""
    L, y = iris
    ref, params_seen = reference
    sites, bounds = make_sites(L, tmp_path, y)
    held_results(cluster.client)
    with Received() as rx:
        fit(cluster, sites, mode="plain", max_iter=4)
    per_site = site_vectors(L, bounds, ref.categories_, params_seen[:4])
    every = sorted((s, r) for s in SITES for r in range(4))
    assert sorted(leaks(rx.arrays(), per_site)) == every
    assert sorted(leaks(arrays_in(held_results(cluster.client)), per_site)) == every
    setup = setup_vectors(L, bounds, y, np.argmax(memberships(sites), axis=1))
    assert sorted(leaks(rx.arrays(), setup)) == every  # label range, label counts, reference range, table


def test_a_swapped_public_key_is_detected(cluster, iris, tmp_path):
    L, _ = iris
    sites, _ = make_sites(L, tmp_path)
    pins = cluster.pins()
    pins["site-1"] = load_mask_public(cluster.certs / "mallory-mask.pub")  # the coordinator's own key
    with pytest.raises(InputError, match="relayed for site 'site-1' is not the key pinned"):
        fit(cluster, sites, pins=pins, max_iter=2)
    with pytest.raises(InputError, match="no pinned public key"):
        fit(cluster, sites, pins={"site-0": pins["site-0"]}, max_iter=2)


def test_lost_site_stops_the_run_and_the_run_resumes(cluster, iris, reference, tmp_path):
    L, _ = iris
    ref, _ = reference
    sites, _ = make_sites(L, tmp_path)
    store = RunStore(tmp_path / "coordinator.zarr")
    checkpoint = StoreCheckpoint(store)

    def kill_at_6(t, bound):
        if t == 5:
            cluster.kill_worker("site-1")

    with pytest.raises(SiteLostError, match=r"site 'site-1'.*EM iteration 7"):
        fit(cluster, sites, checkpoint=checkpoint, progress=kill_at_6)
    state = checkpoint.load()
    assert len(state["trace"]) == 6  # (alpha, beta) after the 6th complete iteration
    cluster.start_worker("site-1")
    cluster.client.wait_for_workers(len(SITES), timeout=300)
    res = fit(cluster, sites, checkpoint=checkpoint)
    assert res.resumed_from == 6
    np.testing.assert_allclose(res.lower_bound_trace_, ref.lower_bound_trace_, rtol=1e-10)
    np.testing.assert_allclose(res.alpha_, ref.alpha_, rtol=1e-9)
    np.testing.assert_allclose(memberships(sites), ref.memberships_, rtol=1e-6, atol=1e-7)


def test_bad_sites_are_named(cluster, iris, tmp_path):
    L, _ = iris
    sites, _ = make_sites(L, tmp_path)
    bad = [dict(s) for s in sites]
    bad[1]["url"] = str(tmp_path / "nowhere.npy")
    with pytest.raises(InputError, match="site 'site-1': cannot read labels"):
        fit(cluster, bad, max_iter=2)
    bad = [dict(s) for s in sites]
    bad[2]["resource"] = "site-mars"
    with pytest.raises(InputError, match="site 'site-2' is unreachable.*'site-mars'"):
        fit(cluster, bad, max_iter=2)
    np.save(tmp_path / "narrow.npy", L[:10, :5])
    bad = [dict(s) for s in sites]
    bad[2]["url"] = str(tmp_path / "narrow.npy")
    with pytest.raises(InputError, match="site 'site-2' has 5 clusterings but site 'site-0' has 10"):
        fit(cluster, bad, max_iter=2)
    with pytest.raises(InputError, match="'mode'"):
        fit(cluster, sites, mode="gossip")
    bad = [dict(s) for s in sites]
    bad[0]["resource"] = "site-1"  # site-1's worker holds site-1's key, not site-0's
    with pytest.raises(InputError, match="belongs to site 'site-1', not to site 'site-0'"):
        fit(cluster, bad, max_iter=2)
    assert open_sessions(cluster.client) == {}  # the sites that had joined dropped the session again


def test_the_command_names_a_lost_site_without_a_traceback(cluster, iris, tmp_path):
    """`ensemble-dask federated --scheduler tls://...` with a site that does not answer: one error line
    naming it, the resume hint, exit status 3, no traceback (also not from closing the connections)."""
    import sys

    import yaml

    L, _ = iris
    sites, _ = make_sites(L, tmp_path)
    spec = {
        "name": "lost-site",
        "store": str(tmp_path / "coordinator.zarr"),
        "federated": {"n_clusters": 3, "certs": str(cluster.certs), "timeout": 4, "sites": sites},
    }
    (tmp_path / "wf.yaml").write_text(yaml.safe_dump(spec))
    worker = cluster.workers["site-2"]
    worker.send_signal(signal.SIGSTOP)
    try:
        proc = subprocess.run(
            [sys.executable, "-m", "ensemble_dask.cli", "federated", str(tmp_path / "wf.yaml"),
             "--scheduler", cluster.address, "--no-progress"],
            cwd=tmp_path, env=cluster.env, capture_output=True, text=True, timeout=300,
        )  # fmt: skip
    finally:
        worker.send_signal(signal.SIGCONT)
    assert proc.returncode == 3, proc.stderr
    assert "error: site 'site-2' did not answer in joining the session within 4 s" in proc.stderr
    assert "run the same command to resume" in proc.stderr
    assert "Traceback" not in proc.stderr and "CommClosedError" not in proc.stderr, proc.stderr
    # the site first runs what was sent to it while it was stopped (the join, then the close): a task sent
    # now runs after them (before it, the join's session could appear after a first empty look)
    cluster.client.submit(time.sleep, 0, resources={"site-2": 1}, pure=False).result(timeout=60)
    deadline = time.monotonic() + 60
    while open_sessions(cluster.client) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert open_sessions(cluster.client) == {}


def test_a_join_that_arrives_after_its_close_leaves_no_session(cluster):
    """A frozen site may run the coordinator's join after its fire-and-forget close: no state is left."""
    from ensemble_dask.federated.site import site_close, site_join

    addr = sorted(cluster.client.scheduler_info()["workers"])[0]
    run = lambda f, *a: cluster.client.submit(f, *a, workers=[addr], pure=False).result()  # noqa: E731
    run(site_close, "closed-first")
    run(site_join, "closed-first", "site-0", {"site-0": b""}, False)
    assert addr not in open_sessions(cluster.client)
    run(site_join, "joined", "site-0", {"site-0": b""}, False)  # an open session is kept until its close
    assert open_sessions(cluster.client).get(addr) == 1
    run(site_close, "joined")
    assert addr not in open_sessions(cluster.client)


def test_a_close_before_any_join_is_remembered_on_a_worker_without_the_plugin(client):
    """A plain (non-secure) site's worker gets the plugin only when first used: a close that comes first
    must create it and be remembered, so the late join leaves nothing."""
    from ensemble_dask.federated.site import site_close, site_join

    addr = sorted(client.scheduler_info()["workers"])[0]
    client.run(lambda dask_worker: dask_worker.plugins.pop(PLUGIN_NAME, None), workers=[addr])
    run = lambda f, *a: client.submit(f, *a, workers=[addr], pure=False).result()  # noqa: E731
    run(site_close, "fresh-worker")
    run(site_join, "fresh-worker", "site-0", {"site-0": b""}, False)
    held = client.run(lambda dask_worker: len(dask_worker.plugins[PLUGIN_NAME].sessions), workers=[addr])
    assert held == {addr: 0}
    # a secure session of one site masks nothing: it joins without a key (was an AttributeError)
    client.run(lambda dask_worker: dask_worker.plugins.pop(PLUGIN_NAME, None), workers=[addr])
    run(site_join, "one-site", "site-0", {"site-0": b""}, True)
    run(site_close, "one-site")


def test_a_site_that_stops_answering_ends_the_run_at_the_timeout(cluster, iris, tmp_path):
    """A site whose worker hangs (still in the cluster) ends the round at ``timeout``, named; closing the
    session does not wait for it again, and once it answers again it drops the session's state."""
    L, _ = iris
    sites, _ = make_sites(L, tmp_path)
    worker = cluster.workers["site-2"]

    def freeze_at_3(t, bound):
        if t == 2:
            worker.send_signal(signal.SIGSTOP)

    try:
        with pytest.raises(SiteLostError, match=r"site 'site-2' did not answer in EM iteration 4 within 8 s"):
            fit(cluster, sites, timeout=8, progress=freeze_at_3)
    finally:
        worker.send_signal(signal.SIGCONT)

    deadline = time.monotonic() + 60
    while open_sessions(cluster.client) and time.monotonic() < deadline:
        time.sleep(0.2)
    assert open_sessions(cluster.client) == {}


def test_idle_sessions_expire_on_the_site():
    """A session not called for longer than its idle limit is dropped (and remembered as closed): a site that
    comes back after the coordinator gave up on it keeps no session state, even if no close reaches it."""
    from ensemble_dask.federated.site import SitePlugin, SiteSession

    plugin = SitePlugin()
    live, idle = (
        SiteSession(name="site-0", session=s, secure=False, n_sites=1, idle_limit=30.0) for s in "ab"
    )
    forever = SiteSession(name="site-0", session="c", secure=False, n_sites=1)
    plugin.sessions.update(a=live, b=idle, c=forever)
    now = live.last_used
    idle.last_used = now - 31.0
    forever.last_used = now - 1e6
    assert plugin.expire(now + 1.0) == 1
    assert set(plugin.sessions) == {"a", "c"} and "b" in plugin.closed

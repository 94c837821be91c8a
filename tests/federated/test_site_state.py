"""A site's BCE state against a malicious coordinator (real site agents on 127.0.0.1), from a review.

F24: a site without a ``checkpoint`` directory accepted a ``prepare`` that resumes (and started from fresh
``gamma``) while its peers that keep checkpoints loaded theirs. One complete, consistent session then summed
the checkpointing site's statistics apart from the others': its label counts through an E-step, its
reference classes through promote, finish and the contingency round. Such a site now refuses to resume, and
an honest coordinator whose resume a site refuses starts the fit afresh.

F25: the state a site keeps per session (``gamma`` of its rows, the best start, their checkpoint files, the
memberships it writes) is rows x k entries, with k up to min(10,000, rows): unbounded (4,200 rows at
k = 4,200 left 135 MiB of checkpoints after one E-step). It is now bounded by the site's
``max_state_entries``.
"""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_dask.federated.coordinator.link import Federation, SiteRefusedError
from tests._sites import Crash, CrashingCheckpoint, start_sites, towards

pytestmark = pytest.mark.slow

N = 4
NAMES = ["site-a", "site-b", "site-c"]
CATS = [np.arange(3, dtype=np.int64)] * N
G = 3 * N


def _checkpoints_at_a_only(name, spec):
    if name != "site-a":
        spec.pop("checkpoint")  # optional in a site's config
    return spec


@pytest.fixture(scope="module")
def mixed(tmp_path_factory):
    rng = np.random.default_rng(24)
    labels = {s: rng.integers(0, 3, size=(30 + 7 * i, N)) for i, s in enumerate(NAMES)}
    refs = {s: rng.integers(0, 4, size=30 + 7 * i) for i, s in enumerate(NAMES)}
    agents = start_sites(
        tmp_path_factory.mktemp("mixed"), labels, references=refs, config=_checkpoints_at_a_only
    )
    agents.labels, agents.refs = labels, refs
    yield agents
    agents.stop()


def _federation(agents, names=NAMES):
    sites = [{"name": n, "address": agents.addresses[n]} for n in names]
    return Federation(sites, "bce", agents.context(), timeout=120).open()


FLAT = {"alpha": np.ones(2), "beta": np.ones((2, G))}


def _counts(labels):
    return np.concatenate([np.bincount(labels[:, j], minlength=3) for j in range(labels.shape[1])])


def _honest_round_towards(agents, run, h):
    """An ordinary session: every site computes one complete E-step round; returns the round's tag."""
    fed = _federation(agents)
    try:
        fed.call("prepare", (CATS, 2, run, None), what="prepare")
        fed.sum("estep", (towards(G, h), 0, 0, 1e-12, 5), what="E-step")
        return f"{fed.session}-{fed.round}"
    finally:
        fed.close()


def test_a_site_without_checkpoints_refuses_to_resume_so_no_sum_holds_site_a_apart(mixed):
    run = "00000000f24f2400"
    tag = _honest_round_towards(mixed, run, 0)  # every row of every site on cluster 0; only site-a keeps it
    fed = _federation(mixed)
    try:
        with pytest.raises(SiteRefusedError, match="keeps no checkpoints") as info:
            fed.call("prepare", (CATS, 2, run, [0, 0, tag, None, None]), what="prepare (resume)")
        assert info.value.code == "cannot-resume"  # the coordinator fits afresh on this code alone
    finally:
        fed.close()
    # before: the E-step that followed (flat parameters, one sweep) left site-b's and site-c's fresh rows
    # half and half on the two clusters and site-a's on cluster 0, so that counts[0] - counts[1] of the
    # complete, consistent round was exactly site-a's label counts


def test_nor_one_that_holds_site_a_reference_classes_apart(mixed):
    run = "00000000f24f2401"
    tag = _honest_round_towards(mixed, run, 1)  # every row on cluster 1; only site-a keeps it
    fed = _federation(mixed)
    try:
        with pytest.raises(SiteRefusedError, match="keeps no checkpoints"):
            fed.call("prepare", (CATS, 2, run, [0, 0, tag, None, None]), what="prepare (resume)")
    finally:
        fed.close()
    # before: promote, finish (site-a's rows from its loaded gamma, the others' fresh: argmax 0) and the
    # contingency round gave a row of the table equal to site-a's reference classes


@pytest.mark.filterwarnings("ignore:federated BCE did not converge")
def test_an_honest_run_that_a_site_cannot_resume_starts_afresh(mixed):
    """Before, the sites without checkpoints took the resume with fresh rows: a run of mixed states. Now they
    refuse it, and the coordinator says so and fits afresh: the uninterrupted run's result."""
    from ensemble_dask.federated.coordinator.bce import ResumeRefusedWarning, run_federated_bce

    kw = {"n_init": 2, "max_iter": 3, "tol": 1e-12, "e_step_max_iter": 5, "random_state": 3, "n_labels": 3}
    ref = run_federated_bce(mixed.sites(), 2, mixed.context(), checkpoint=CrashingCheckpoint(), **kw)
    checkpoint = CrashingCheckpoint(crash_at=2)
    with pytest.raises(Crash):
        run_federated_bce(mixed.sites(), 2, mixed.context(), checkpoint=checkpoint, **kw)
    checkpoint.crash_at = None
    with pytest.warns(ResumeRefusedWarning, match="keeps no checkpoints.*starts afresh"):
        res = run_federated_bce(mixed.sites(), 2, mixed.context(), checkpoint=checkpoint, **kw)
    assert res.resumed_from is None
    np.testing.assert_allclose(res.lower_bound_trace_, ref.lower_bound_trace_, rtol=1e-12)
    np.testing.assert_allclose(res.alpha_, ref.alpha_, rtol=1e-12)


# ----------------------------------------------------------------------------- F25: state of rows x k


def _small_state(name, spec):
    return {**spec, "max_state_entries": 50 * 20, "audit_max_bytes": 4096}


@pytest.fixture(scope="module")
def wide(tmp_path_factory):
    rng = np.random.default_rng(25)
    labels = {s: rng.integers(0, 50, size=(50, 6)) for s in ("site-a", "site-b")}
    agents = start_sites(tmp_path_factory.mktemp("wide"), labels, config=_small_state)
    yield agents
    agents.stop()


def test_a_site_bounds_the_rows_x_k_it_keeps_by_its_own_config(wide):
    cats = [np.arange(50, dtype=np.int64)] * 6
    fed = _federation(wide, ["site-a", "site-b"])
    try:
        resume = [0, 0, "ab" * 16 + "-1", None, None]
        with pytest.raises(SiteRefusedError, match=r"rows x k = 50 x 21 is over this site's max") as info:
            fed.call("prepare", (cats, 21, "00000000f25f2500", resume), what="prepare")
        # a review: a coordinator that resumed fitted afresh on any refusal of its prepare; only a site that
        # cannot resume sends this code, and any other refusal stops the run
        assert info.value.code is None
    finally:
        fed.close()
    fed = _federation(wide, ["site-a", "site-b"])  # at the bound: taken
    try:
        fed.call("prepare", (cats, 20, "00000000f25f2501", None), what="prepare")
        fed.sum("estep", ({"alpha": np.ones(20), "beta": np.full((20, 300), 0.02)}, 0, 0, 1.0, 1), what="E")
    finally:
        fed.close()


def test_a_kcc_session_is_bounded_by_it_too(wide):
    """A review (2026-12-06): only BCE's prepare applied max_state_entries; a KCC session of K = 1,000 on
    10,000 rows (a cap of 10^6) was taken, and its finish wrote 10^7 memberships (the agent's memory from 186
    to 393 MB)."""
    cats = [np.arange(50, dtype=np.int64)] * 6
    sites = [{"name": n, "address": wide.addresses[n]} for n in ("site-a", "site-b")]
    fed = Federation(sites, "kcc", wide.context(), timeout=120).open()
    try:
        with pytest.raises(SiteRefusedError, match=r"rows x k = 50 x 21 is over this site's max"):
            fed.call("prepare", (cats, 21), what="prepare")
    finally:
        fed.close()
    fed = Federation(sites, "kcc", wide.context(), timeout=120).open()
    try:
        fed.call("prepare", (cats, 20), what="prepare")  # at the bound: taken
    finally:
        fed.close()


def test_the_audit_log_is_bounded_by_the_sites_config(wide):
    """Found by the same review: every request, refused or not, was a line appended to ``state/audit.log``
    for good, a slow way to fill a site's disk. At ``audit_max_bytes`` the log is renamed ``audit.log.1``
    (replacing the one before): two files at most."""
    from ensemble_dask.federated.coordinator.link import SiteLink

    state = wide.configs["site-a"].parent / "state"
    lk = SiteLink("site-a", wide.addresses["site-a"], wide.context(), 60)
    try:
        for r in range(120):  # ~200 bytes a line
            with pytest.raises(SiteRefusedError):
                lk.post("keys", {"session": "f" * 64, "round": r})
    finally:
        lk.close()
    logs = sorted(p.name for p in state.glob("audit.log*"))
    assert logs == ["audit.log", "audit.log.1"]
    assert all((state / name).stat().st_size < 4096 + 1024 for name in logs)
    assert '"op": "keys"' in (state / "audit.log").read_text().splitlines()[-1]  # the newest line kept


def test_two_threads_that_rotate_the_audit_log_at_once_lose_none_of_it(wide, tmp_path, monkeypatch):
    """A review of the rotation: audit() runs on the agent's worker thread and on its IO loop (refusals before
    a request is parsed). Two that both found the log full renamed it in turn: the second renamed the new,
    one-line log over the full one, which was lost. Widened here by a slow rename."""
    import pathlib
    import threading
    import time

    from ensemble_dask.federated.site.agent import SiteAgent
    from ensemble_dask.federated.site.config import load_config

    config = load_config(wide.configs["site-a"])
    config.state = tmp_path / "state"  # (not the running agent's)
    agent = SiteAgent(config)
    try:
        log = config.state / "audit.log"
        log.write_text("x" * config.audit_max_bytes + "\n")  # full: the next line rotates it
        replace = pathlib.Path.replace

        def slow(self, target):
            time.sleep(0.2)
            return replace(self, target)

        monkeypatch.setattr(pathlib.Path, "replace", slow)
        args = ("coordinator", "keys", {}, "refused")
        threads = [threading.Thread(target=agent.audit, args=args) for _ in "ab"]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        old = (config.state / "audit.log.1").read_text()
        assert old.startswith("x" * 100), "the full log was renamed over by the new one"
        assert log.read_text().count("\n") == 2  # both lines kept
    finally:
        agent.executor.shutdown()

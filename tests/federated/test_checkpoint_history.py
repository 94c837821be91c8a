"""A site's E-step checkpoints outlive a session: a malicious coordinator must not carry one site's state
apart from its peers' into a later session (F21), nor fill a site's disk with them (F22). Real site agents
on 127.0.0.1, three sites with the default policy (every sum over all three).

F21, found by a review: a site saved ``gamma`` in ``masked`` and ``best`` at ``promote``, named by run key,
start and iteration only. In one session the coordinator had only site-a compute a round (its rows pushed
to cluster 0), in another only site-b and site-c (to cluster 1), then resumed all three from those files in
a third, honest-looking session: its complete, consistent rounds summed site-a's label counts (or, through
``best`` and ``finish``, its reference classes) apart from the others'.
"""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_dask.federated.coordinator import Federation, SiteRefusedError
from tests._sites import start_sites

pytestmark = pytest.mark.slow

N = 4  # clusterings
NAMES = ["site-a", "site-b", "site-c"]
CATS = [np.arange(3, dtype=np.int64)] * N
G = 3 * N


def _counts(labels, size=3):
    return np.concatenate([np.bincount(labels[:, j], minlength=size) for j in range(labels.shape[1])])


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    rng = np.random.default_rng(11)
    labels = {s: rng.integers(0, 3, size=(40 + 5 * i, N)) for i, s in enumerate(NAMES)}
    refs = {s: rng.integers(0, 4, size=40 + 5 * i) for i, s in enumerate(NAMES)}
    agents = start_sites(tmp_path_factory.mktemp("three"), labels, references=refs)
    agents.labels, agents.refs = labels, refs
    yield agents
    agents.stop()


def _federation(agents):
    sites = [{"name": n, "address": agents.addresses[n]} for n in NAMES]
    return Federation(sites, "bce", agents.context(), timeout=120).open()


def _towards(h):
    """Parameters whose E-step puts every row's gamma on cluster ``h``."""
    alpha = np.full(2, 1e-10)
    alpha[h] = 1e12
    return {"alpha": alpha, "beta": np.ones((2, G))}


def _computed_at(agents, only, run, params, t, promote=None):
    """A session whose round ``estep(params, 0, t)`` is computed by the sites in ``only`` alone (the others
    are never sent ``masked``), then ``promote(promote)`` at those sites; abandoned. Returns the tag a
    resume would name: ``<session>-<round>``."""
    fed = _federation(agents)
    try:
        fed.call("prepare", (CATS, 2, run, None), what="prepare")
        args = [params, 0, t, 1e-12, 5]
        fed.round += 1
        base = {"session": fed.session, "round": fed.round}
        adv = {n: fed.links[n].post("keys", {**base, "op": "estep", "args": args}) for n in NAMES}
        for me in only:
            fed.links[me].post(
                "masked",
                {**base, "op": "estep", "args": args, "keys": {n: adv[n]["public"] for n in adv},
                 "shares": {u: adv[u]["shares"][me] for u in adv if u != me}},
            )  # fmt: skip
            if promote is not None:
                fed.links[me].post("call", {"session": fed.session, "op": "promote", "args": [promote]})
        return f"{fed.session}-{fed.round}"
    finally:
        fed.close()


def _resumed_sums(agents, run, resumes, then):
    """For each candidate ``resume`` of ``prepare``: a new session that resumes run ``run`` from it and runs
    ``then(fed)``; the results of the sessions the sites accepted (a refusal ends the attempt)."""
    out = []
    for resume in resumes:
        fed = _federation(agents)
        try:
            fed.call("prepare", (CATS, 2, run, resume), what="prepare (resume)")
            out.append((resume, then(fed)))
        except SiteRefusedError:
            continue
        finally:
            fed.close()
    return out


def test_a_gamma_computed_apart_is_not_resumed_beside_its_peers(three):
    """F21 through ``gamma``: no resume the coordinator can name sums site-a's label counts apart."""
    run = "00000000c0ffee00"
    tag_a = _computed_at(three, ["site-a"], run, _towards(0), t=2)
    tag_bc = _computed_at(three, ["site-b", "site-c"], run, _towards(1), t=2)
    flat = {"alpha": np.ones(2), "beta": np.ones((2, G))}
    resumes = [[0, 2, None]] + [[0, 2, tag, None, None] for tag in (tag_a, tag_bc)]  # (the former format too)
    sums = _resumed_sums(
        three, run, resumes, lambda fed: fed.sum("estep", (flat, 0, 3, 1e-12, 1), what="E-step")
    )
    site_a = _counts(three.labels["site-a"]).astype(float)
    for resume, total in sums:
        counts = total[: 2 * G].reshape(2, G)
        assert not any(np.array_equal(row, site_a) for row in counts), (
            f"site-a's counts apart, resume {resume}"
        )


def test_a_best_promoted_apart_is_not_resumed_beside_its_peers(three):
    """F21 through ``best``: no resume sums site-a's reference classes apart in the contingency round."""
    run = "00000000c0ffee01"
    tag_a = _computed_at(three, ["site-a"], run, _towards(0), t=0, promote=9)
    tag_bc = _computed_at(three, ["site-b", "site-c"], run, _towards(1), t=0, promote=9)

    def contingency(fed):
        fed.call("finish", what="finish")
        return fed.sum("contingency", (4,), what="contingency")

    resumes = [[0, None, 9]] + [[0, None, None, 9, tag] for tag in (tag_a, tag_bc)]
    sums = _resumed_sums(three, run, resumes, contingency)
    site_a = np.bincount(three.refs["site-a"], minlength=4).astype(float)
    for resume, table in sums:
        rows = table[:-1].reshape(2, 4)
        assert not any(np.array_equal(row, site_a) for row in rows), (
            f"site-a's classes apart, resume {resume}"
        )


def test_an_honest_resume_names_the_round_that_made_the_checkpoint(three):
    """The sites' checkpoint of a round computed by all of them is resumed by its tag, and only by it."""
    run = "00000000c0ffee02"
    params = {"alpha": np.array([0.5, 2.0]), "beta": np.random.default_rng(0).uniform(0.1, 1.0, (2, G))}
    fed = _federation(three)
    try:
        fed.call("prepare", (CATS, 2, run, None), what="prepare")
        first = fed.sum("estep", (params, 0, 0, 1e-12, 1), what="E-step")
        tag = f"{fed.session}-{fed.round}"
        again = fed.sum("estep", (params, 0, 1, 1e-12, 1), what="E-step")
    finally:
        fed.close()
    assert not np.array_equal(first, again)  # a second sweep from the first round's gamma moved it
    fed = _federation(three)
    try:
        fed.call("prepare", (CATS, 2, run, [0, 0, tag, None, None]), what="prepare (resume)")
        resumed = fed.sum("estep", (params, 0, 1, 1e-12, 1), what="E-step")
    finally:
        fed.close()
    np.testing.assert_array_equal(resumed, again)  # from the first round's gamma, exactly
    for wrong in (f"{tag[:-1]}9", "0" * 16 + "-1"):
        fed = _federation(three)
        try:
            with pytest.raises(SiteRefusedError):
                fed.call("prepare", (CATS, 2, run, [0, 0, wrong, None, None]), what="prepare (resume)")
        finally:
            fed.close()


def test_checkpoints_do_not_pile_up_under_one_run_key(three):
    """F22 (what F16 left): the sites kept the checkpoints of their last runs by run key only, and each k or
    set of categories under one run key left its own files for good. Six sessions of one run key, k = 2..7:
    the checkpoints of at most ``max_sessions`` (4) runs remain."""
    run = "00000000000f1600"
    gdir = three.configs["site-a"].parent / "state" / "gamma"
    for k in range(2, 8):
        fed = _federation(three)
        try:
            fed.call("prepare", (CATS, k, run, None), what="prepare")
            fed.sum("estep", ({"alpha": np.ones(k), "beta": np.ones((k, G))}, 0, 0, 1e-4, 1), what="E-step")
        finally:
            fed.close()
    files = sorted(f.name for f in gdir.glob(f"{run}-*-gamma-*.npy"))
    assert len(files) <= 4, files

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

from ensemble_dask.federated.coordinator.link import Federation, SiteRefusedError
from tests._sites import Crash, CrashingCheckpoint, start_sites, towards

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
            if promote is not None:  # (refused inside the open round since F23: nothing is saved then)
                _calls(fed, [me], ("promote", [promote]))()
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
    tag_a = _computed_at(three, ["site-a"], run, towards(G, 0), t=2)
    tag_bc = _computed_at(three, ["site-b", "site-c"], run, towards(G, 1), t=2)
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
    tag_a = _computed_at(three, ["site-a"], run, towards(G, 0), t=0, promote=9)
    tag_bc = _computed_at(three, ["site-b", "site-c"], run, towards(G, 1), t=0, promote=9)

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


def _resumed_estep(three, run, tag, params):
    """The E-step sum of a session that resumes the run ``run`` from the checkpoint ``tag``."""
    fed = _federation(three)
    try:
        fed.call("prepare", (CATS, 2, run, [0, 0, tag, None, None]), what="prepare (resume)")
        return fed.sum("estep", (params, 0, 1, 1e-12, 1), what="E-step")
    finally:
        fed.close()


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
    np.testing.assert_array_equal(_resumed_estep(three, run, tag, params), again)  # from that gamma, exactly
    for wrong in (f"{tag[:-1]}9", "0" * 16 + "-1"):
        fed = _federation(three)
        try:
            with pytest.raises(SiteRefusedError):
                fed.call("prepare", (CATS, 2, run, [0, 0, wrong, None, None]), what="prepare (resume)")
        finally:
            fed.close()


def test_a_checkpoint_of_any_round_the_site_took_can_be_resumed(three):
    """A site takes any round above its last (up to msgpack's 2^64 - 1), but a resume could name a
    checkpoint's round by at most 10 digits: a checkpoint made at round 10^10 or later was written and never
    resumable (noticed in earlier reviews; 2026-12-06). Now a resume can name every tag the site writes."""
    run = "00000000c0ffee0b"
    params = {"alpha": np.array([0.5, 2.0]), "beta": np.random.default_rng(1).uniform(0.1, 1.0, (2, G))}
    fed = _federation(three)
    try:
        fed.call("prepare", (CATS, 2, run, None), what="prepare")
        fed.round = 2**64 - 2  # the coordinator numbers the rounds: the next is msgpack's largest int
        first = fed.sum("estep", (params, 0, 0, 1e-12, 1), what="E-step")
        tag = f"{fed.session}-{fed.round}"
    finally:
        fed.close()
    assert tag.endswith("-18446744073709551615")
    assert not np.array_equal(_resumed_estep(three, run, tag, params), first)  # a sweep from its gamma


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


# ------------------------------------------------------------------------- a call inside an open round (F23)
# Found by a review of the F21 fix: a round's shares are bound to the transcript at its keys, and a call
# between its keys and its computation (a reset at site-a alone) changed site-a's state after that. The round
# completed over all sites with site-a's statistics apart, and its checkpoints, under one tag, held different
# histories at different sites.

TINY = {"alpha": np.full(2, 1e-10), "beta": np.ones((2, G))}


def _round_with(fed, op, args, between):
    """One secure round of ``op(*args)`` at every site with ``between()`` run after its keys: the sum, or None
    when a site refused a step of it."""
    from ensemble_dask.federated.protocol import secagg
    from ensemble_dask.federated.protocol.secure import decode_fixed, sum_words

    fed.round += 1
    base = {"session": fed.session, "round": fed.round}
    post = {n: fed.links[n].post for n in NAMES}
    try:
        adv = {n: post[n]("keys", {**base, "op": op, "args": list(args)}) for n in NAMES}
        between()
        keys = {n: a["public"] for n, a in adv.items()}
        masked = {
            n: post[n]("masked", {**base, "op": op, "args": list(args), "keys": keys,
                                  "shares": {u: adv[u]["shares"][n] for u in adv if u != n}})
            for n in NAMES
        }  # fmt: skip
        conf = {n: post[n]("confirm", {**base, "survivors": NAMES}) for n in NAMES}
        tags = {n: {u: conf[u]["tags"][n] for u in NAMES if u != n} for n in NAMES}
        shares = {n: post[n]("unmask", {**base, "tags": tags[n]})["shares"] for n in NAMES}
    except SiteRefusedError:
        return None
    words = sum_words([masked[n]["words"] for n in NAMES])
    total = secagg.unmask_words(words, fed.roster, keys, NAMES, shares, fed.session, fed.round, fed.threshold)
    return decode_fixed(total)


def _calls(fed, names, *calls):
    """The calls at the sites ``names``, a refusal ignored (the attack goes on), as a function (``between``
    for :func:`_round_with`)."""

    def run():
        for op, args in calls:
            for n in names:
                try:
                    fed.links[n].post("call", {"session": fed.session, "op": op, "args": list(args)})
                except SiteRefusedError:
                    pass

    return run


def test_a_call_inside_an_open_round_is_refused_and_so_is_the_round(three):
    fed = _federation(three)
    try:
        fed.call("prepare", (CATS, 2, "00000000deadbe02", None), what="prepare")
        fed.round += 1
        base = {"session": fed.session, "round": fed.round}
        args = [TINY, 0, 0, 1e-12, 1]
        adv = {n: fed.links[n].post("keys", {**base, "op": "estep", "args": args}) for n in NAMES}
        with pytest.raises(SiteRefusedError, match="is open"):
            fed.links["site-a"].post("call", {"session": fed.session, "op": "reset", "args": []})
        keys = {n: a["public"] for n, a in adv.items()}
        shares = {u: adv[u]["shares"]["site-a"] for u in adv if u != "site-a"}
        with pytest.raises(SiteRefusedError, match="took requests since"):
            fed.links["site-a"].post(
                "masked", {**base, "op": "estep", "args": args, "keys": keys, "shares": shares}
            )
    finally:
        fed.close()


def test_a_reset_after_the_keys_does_not_single_out_a_site(three):
    """Within the session, and in a later one resumed from the tag of that round."""
    run = "00000000deadbe00"
    site_a = _counts(three.labels["site-a"]).astype(float)
    fed = _federation(three)
    try:
        fed.call("prepare", (CATS, 2, run, None), what="prepare")
        fed.sum("estep", (towards(G, 1), 0, 0, 1e-12, 5), what="E-step")  # every row on cluster 1
        sums = [_round_with(fed, "estep", (TINY, 0, 1, 1e-12, 1), _calls(fed, ["site-a"], ("reset", ())))]
        tag = f"{fed.session}-{fed.round}"
    finally:
        fed.close()
    flat = {"alpha": np.ones(2), "beta": np.ones((2, G))}
    sums += [t for _, t in _resumed_sums(three, run, [[0, 1, tag, None, None]], lambda fed: fed.sum(
        "estep", (flat, 0, 2, 1e-12, 1), what="E-step"))]  # fmt: skip
    for total in filter(lambda t: t is not None, sums):
        assert not np.allclose(2 * total[:G], site_a), "site-a's label counts apart"


def test_a_best_changed_after_the_keys_does_not_single_out_a_site(three):
    """Site-a's memberships from a fresh gamma, the others' from cluster 1: within the session (a reset,
    promote and finish at site-a between the keys and the computation of the contingency round), and in a
    later one resumed from a best promoted under one tag after a reset at site-a inside a round."""
    run = "00000000deadbe01"
    site_a = np.bincount(three.refs["site-a"], minlength=4).astype(float)
    fed = _federation(three)
    try:
        fed.call("prepare", (CATS, 2, run, None), what="prepare")
        fed.sum("estep", (towards(G, 1), 0, 0, 1e-12, 5), what="E-step")
        fed.call("promote", (0,), what="promote")
        fed.call("finish", what="finish")
        between = _calls(fed, ["site-a"], ("reset", ()), ("promote", (0,)), ("finish", ()))
        tables = [_round_with(fed, "contingency", (4,), between)]
    finally:
        fed.close()
    fed = _federation(three)
    try:
        fed.call("prepare", (CATS, 2, run, None), what="prepare")
        fed.sum("estep", (towards(G, 1), 0, 0, 1e-12, 5), what="E-step")
        _round_with(fed, "estep", (TINY, 0, 1, 1e-12, 1), _calls(fed, ["site-a"], ("reset", ())))
        tag = f"{fed.session}-{fed.round}"
        _calls(fed, NAMES, ("promote", (7,)))()
    finally:
        fed.close()

    def contingency(fed):
        fed.call("finish", what="finish")
        return fed.sum("contingency", (4,), what="contingency")

    tables += [t for _, t in _resumed_sums(three, run, [[0, None, None, 7, tag]], contingency)]
    for table in filter(lambda t: t is not None, tables):
        rows = table[:-1].reshape(2, 4)
        assert not any(np.array_equal(row, site_a) for row in rows), "site-a's reference classes apart"


# ----------------------------------------------------------------------- an honest run resumes from any crash


@pytest.mark.filterwarnings("ignore:federated BCE did not converge")
def test_an_honest_run_resumes_after_a_crash_before_any_of_its_saves(three):
    """Found by the same review: ``promote`` removed the best before it at once, while the coordinator's
    checkpoint named that one until its next save; a crash between the two left a run that no rerun could
    resume. Each save in turn: the run stops there, and the same run resumes to the uninterrupted result."""
    from ensemble_dask.federated.coordinator.bce import run_federated_bce

    kw = {"n_init": 3, "max_iter": 3, "tol": 1e-12, "e_step_max_iter": 5, "random_state": 3, "n_labels": 3}
    whole = CrashingCheckpoint()
    ref = run_federated_bce(three.sites(), 2, three.context(), checkpoint=whole, **kw)
    for crash_at in range(1, whole.saves + 1):
        checkpoint = CrashingCheckpoint(crash_at)
        with pytest.raises(Crash):
            run_federated_bce(three.sites(), 2, three.context(), checkpoint=checkpoint, **kw)
        checkpoint.crash_at = None
        res = run_federated_bce(three.sites(), 2, three.context(), checkpoint=checkpoint, **kw)
        assert res.resumed_from is not None or crash_at == 1
        np.testing.assert_allclose(res.lower_bound_trace_, ref.lower_bound_trace_, rtol=1e-12)
        np.testing.assert_allclose(res.alpha_, ref.alpha_, rtol=1e-12)

"""The threat model's promises against a malicious coordinator and real site agents on 127.0.0.1.

Every test is one attack and asserts what the threat model promises (DESIGN.md, "Sites and privacy"):
the site refuses, or the coordinator learns nothing about one site alone. The ``test_refused_*`` tests
are attacks the sites refuse outright (others are in test_malicious_coordinator.py).
"""

from __future__ import annotations

import json
import re
import socket
import ssl

import numpy as np
import pytest

from ensemble_dask.federated.coordinator.link import (
    Federation,
    SiteLink,
    SiteLostError,
    SiteRefusedError,
)
from ensemble_dask.federated.protocol import secagg
from ensemble_dask.federated.protocol.secure import add_words, decode_fixed, neg_words
from tests._sites import start_sites, towards

pytestmark = pytest.mark.slow

N_CLUSTERINGS = 4
FEDS = []  # Federations opened by a test: closed after it (a site holds at most 4 sessions)


def _labels(names, seed, n=40):
    rng = np.random.default_rng(seed)
    return {s: rng.integers(0, 3, size=(n, N_CLUSTERINGS)) for s in names}


def _start(root, names, seed, **kw):
    labels = _labels(names, seed)
    rng = np.random.default_rng(seed + 100)
    refs = {s: rng.integers(0, 2, size=40) for s in names}
    agents = start_sites(root, labels, references=refs, **kw)
    agents.labels, agents.names = labels, sorted(names)
    return agents


@pytest.fixture(scope="module")
def three(tmp_path_factory):
    """Three sites with the default policy: min_sites = the whole federation (3)."""
    a = _start(tmp_path_factory.mktemp("three"), ["site-a", "site-b", "site-c"], 0)
    yield a
    a.stop()


@pytest.fixture(scope="module")
def five(tmp_path_factory):
    """Five sites with min_sites 3 (= n // 2 + 1, the smallest threshold the sites allow)."""
    names = ["site-a", "site-b", "site-c", "site-d", "site-e"]
    a = _start(tmp_path_factory.mktemp("five"), names, 2, min_sites=3)
    yield a
    a.stop()


@pytest.fixture(autouse=True)
def close_feds():
    yield
    while FEDS:
        try:
            FEDS.pop().close()
        except Exception:  # noqa: BLE001 - an agent a test broke
            pass


def federation(agents, method="bce", exclude=()):
    sites = [{"name": n, "address": agents.addresses[n]} for n in agents.names]
    fed = Federation(sites, method, agents.context(), timeout=60, exclude=exclude)
    FEDS.append(fed)
    return fed.open()


def counts_of(labels, size=3):
    """What a site's ``label_counts([size] * N)`` is: per clustering, the count of each label."""
    return np.concatenate([np.bincount(labels[:, j], minlength=size) for j in range(labels.shape[1])])


def advertise(fed, op="label_bits", args=(), names=None):
    """One new round of ``op(*args)``: every site of ``names`` advertises; returns (base message, answers)."""
    fed.round += 1
    base = {"session": fed.session, "round": fed.round}
    keyed = {**base, "op": op, "args": list(args)}
    return base, {n: fed.links[n].post("keys", keyed) for n in (names or fed.alive)}


def masked(fed, base, adv, me, op, args, keys_of=None):
    keys_of = list(keys_of or adv)
    msg = {**base, "op": op, "args": list(args), "keys": {n: adv[n]["public"] for n in keys_of},
           "shares": {u: adv[u]["shares"][me] for u in keys_of if u != me}}  # fmt: skip
    return fed.links[me].post("masked", msg)


def audit(agents, name):
    path = agents.configs[name].parent / "state" / "audit.log"
    return path


# =========================================================================== findings


def test_different_arguments_per_site_do_not_isolate_one_site(three):
    """F1. All sites need not get the same arguments: ``call`` (and ``masked``) messages are per site,
    and the honest Federation even offers ``per_site``. With the default policy (every sum over all 3
    sites), site-a prepares the real categories and sites b and c categories that match none of their
    labels: their rows encode as all-missing, their category counts are zeros, and the secure sum of
    ``kcc_sizes`` is site-a's own per-category counts."""
    fed = federation(three, "kcc")
    real = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    foreign = [np.arange(1000, 1003, dtype=np.int64)] * N_CLUSTERINGS
    truth = counts_of(three.labels["site-a"])
    try:
        fed.call("prepare", per_site={"site-a": (real, 2), "site-b": (foreign, 2), "site-c": (foreign, 2)},
                 what="divergent prepare")  # fmt: skip
        total = fed.sum("kcc_sizes", (3 * N_CLUSTERINGS,), what="the category-count round")
    except SiteRefusedError:
        return  # a site noticed that its peers were not given the same prepare
    assert not np.array_equal(np.rint(total[:-1]), truth), "the sum is site-a's own category counts"


def test_inconsistent_survivor_lists_do_not_unmask_one_site(five):
    """F2. No consistency check of the survivor list or of the round's key set (SecAgg's ConsistencyCheck).
    5 sites, threshold 3. site-a is given the keys of {a, b, c} only (3 >= t: accepted), so its input is
    masked with b and c only. At unmasking, b is told survivors {a, b, d}, c {a, c, d}, d and e
    {a, d, e}: each list is a valid subset (>= 3, contains the site, within its last survivors), but
    together they hand out 3 shares of a's self-mask seed, 3 of b's round key and 3 of c's round key.
    The coordinator removes every mask from a's masked input: site-a's vector alone."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    fed = federation(five)
    names = fed.roster
    a, b, c, d, e = names
    sizes = [3] * N_CLUSTERINGS
    base, adv = advertise(fed, "label_counts", (sizes,))
    y_a = masked(fed, base, adv, a, "label_counts", (sizes,), keys_of=[a, b, c])["words"]
    for n in (b, c, d, e):
        masked(fed, base, adv, n, "label_counts", (sizes,))
    views = {a: [a, b, c], b: [a, b, d], c: [a, c, d], d: [a, d, e], e: [a, d, e]}
    tags = {n: fed.links[n].post("confirm", {**base, "survivors": views[n]})["tags"] for n in names}
    reveals = {}
    for n in names:  # the coordinator relays to each site the tags addressed to it
        got = {u: tags[u][n] for u in names if u != n and n in tags[u]}
        try:
            reveals[n] = fed.links[n].post("unmask", {**base, "tags": got})["shares"]
        except SiteRefusedError as exc:
            assert "confirm" in str(exc), exc  # the consistency check
    if len(reveals) < 3:
        return  # the sites noticed that they were not told the same round: too few shares to unmask
    index = {n: i + 1 for i, n in enumerate(names)}

    def secret(of, lo, hi):
        got = [(index[r], bytes(rev[of])[lo:hi]) for r, rev in sorted(reveals.items()) if of in rev]
        got = [g for g in got if len(g[1]) == hi - lo][:3]
        return secagg._combine(got, 3)

    size = np.asarray(y_a).shape[1]
    x = np.array(y_a, dtype=np.uint64)
    x = add_words(x, neg_words(secagg._self_mask(secret(a, 0, 16), fed.session, base["round"], size)))
    for v in (b, c):  # the dropped-by-some sites: their round keys from 3 shares each
        shares = [(index[r], bytes(rev[v])) for r, rev in sorted(reveals.items()) if v in rev]
        s_shares = [(i, s) for i, s in shares if len(s) == 32][:3]
        raw = secagg._combine([(i, s[:16]) for i, s in s_shares], 3) + secagg._combine(
            [(i, s[16:]) for i, s in s_shares], 3
        )
        m = secagg._pair_mask(X25519PrivateKey.from_private_bytes(raw), adv[a]["public"], v, a,
                              fed.session, base["round"], size)  # fmt: skip
        x = add_words(x, neg_words(m))  # a < v: a added +m
    recovered = np.rint(decode_fixed(x))
    assert not np.array_equal(recovered, counts_of(five.labels[a])), "site-a's vector, unmasked alone"


def test_two_survivor_sets_in_one_session_do_not_isolate_a_site(three):
    """F3a. A round over {a, b, c} then one over {a, b} (c 'dropped') give c's vector by difference. With
    the default policy (min_sites = the whole federation) the second round is refused. (With min_sites
    below it, dropouts are allowed and such a difference over at most n - min_sites sites is the stated
    limit of the guarantee: README, deploy/README.md.)"""
    fed = federation(three)
    sizes = [3] * N_CLUSTERINGS
    s1 = fed.sum("label_counts", (sizes,), what="round over all")
    fed.alive = ["site-a", "site-b"]  # the coordinator says site-c dropped
    try:
        s2 = fed.sum("label_counts", (sizes,), what="round over a and b")
    except SiteRefusedError:
        return
    assert not np.array_equal(np.rint(s1 - s2), counts_of(three.labels["site-c"])), "site-c alone"


def test_a_new_session_does_not_isolate_a_site_by_difference(three):
    """F3b. A second session over {a, b} (what the honest driver's restart over the survivors does) and
    the same deterministic round give site-c's counts by difference: refused under the default policy
    (the stated limit with min_sites below the federation's size, as above)."""
    sizes = [3] * N_CLUSTERINGS
    s1 = federation(three).sum("label_counts", (sizes,), what="session 1")
    try:
        s2 = federation(three, exclude=["site-c"]).sum("label_counts", (sizes,), what="session 2")
    except SiteRefusedError:
        return
    assert not np.array_equal(np.rint(s1 - s2), counts_of(three.labels["site-c"])), "site-c alone"


def test_a_refusal_does_not_carry_a_statistic_in_clear(three):
    """F4. A statistic outside the fixed-point range is refused with its value in the message
    (``encode_fixed``: "value ... outside the fixed-point range"), and the coordinator chose the
    centroids and the block norms ``sq`` freely (nothing tied ``sq`` to ``MT``). With sq = 2**62 on one
    block and MT = 2**20 on one category g, site-a's squared error was n * 2**62 - 2**21 * count_g, out
    of range: the refusal sent to the coordinator was site-a's count of category g, in clear. A site now
    takes the centroids alone (in [0, 1]) and computes their norms itself: the call with ``sq`` is refused."""
    fed = federation(three, "kcc")
    real = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    fed.call("prepare", (real, 2), what="prepare")
    G, g = 3 * N_CLUSTERINGS, 4  # category 4: label 1 of clustering 1
    MT = np.zeros((G, 2))
    MT[g] = 2.0**20
    sq = np.zeros((2, N_CLUSTERINGS))
    sq[:, 0] = 2.0**62
    n_a = fed.infos["site-a"]["n_rows"]
    truth = int(np.sum(three.labels["site-a"][:, 1] == 1))
    base, adv = advertise(fed, "kcc_step", (MT, sq))
    try:
        masked(fed, base, adv, "site-a", "kcc_step", (MT, sq))
    except SiteRefusedError as exc:
        found = re.search(r"value (?:np\.float64\()?([-+0-9.e]+)", str(exc))
        if found:
            leaked = (n_a * 2.0**62 - float(found.group(1))) / 2.0**21
            assert leaked != truth, f"the refusal carries site-a's count of category {g}: {exc}"
        return
    pytest.fail("an out-of-range statistic was masked and sent")


def test_refusals_do_not_depend_on_one_sites_labels(three):
    """F5. An error oracle: ``label_counts`` with sizes below a site's largest label is refused, naming the
    site and the clustering ("site 'site-a': clustering 0 has labels >= n_labels=2"); a refused round
    costs nothing, so a binary search gives each site's largest label per clustering (``contingency``
    likewise gives its largest reference class). The outcome must not depend on the site's rows. (A
    round computed at site-a alone now leaves its transcript apart from its peers': a session a probe.)"""
    outcomes = []
    for m in (1, 2, 3, 4):
        if FEDS:
            FEDS.pop().close()
        fed = federation(three)
        base, adv = advertise(fed, "label_counts", ([m] * N_CLUSTERINGS,))
        try:
            masked(fed, base, adv, "site-a", "label_counts", ([m] * N_CLUSTERINGS,))
            outcomes.append("answered")
        except SiteRefusedError as exc:
            outcomes.append(re.sub(r"\d+", "#", str(exc)))
    assert len(set(outcomes)) == 1, f"site-a's largest labels leak through its refusals: {outcomes}"


def test_a_checkpoint_of_another_shape_is_refused(tmp_path):
    """F6. Memory safety: ``resume`` loads ``{run_key}-gamma-{init}-{t}`` for any run key the coordinator
    names, with no check of its shape against the session's rows and k. A gamma of shape (3, 2), written
    by an earlier session whose categories matched the labels of one clustering only (3 distinct rows)
    and k = 2, is loaded into a session of ~40 distinct rows and k = 16; the numba E-step (no bounds
    checks) then reads and writes gamma[i, h] far past the end of the array, writing values the
    coordinator chose (alpha)."""
    agents = _start(tmp_path, ["site-a", "site-b", "site-c"], 3)
    try:
        fed = federation(agents)
        one = [np.arange(3, dtype=np.int64)] + [np.arange(1000, 1003, dtype=np.int64)] * (N_CLUSTERINGS - 1)
        run_key = "00000000deadbeef"
        fed.call("prepare", (one, 2, run_key, None), what="prepare")
        params = {"alpha": np.ones(2), "beta": np.full((2, 3 * N_CLUSTERINGS), 0.5)}
        base, adv = advertise(fed, "estep", (params, 0, 0, 1e-4, 5))
        masked(fed, base, adv, "site-a", "estep", (params, 0, 0, 1e-4, 5))
        ckpt = sorted(
            (agents.configs["site-a"].parent / "state" / "gamma").glob(f"{run_key}-*gamma-0-0*.npy")
        )
        assert ckpt and np.load(ckpt[0]).shape == (3, 2)
        tag = f"{fed.session}-{fed.round}"  # (F21: a checkpoint is resumed by the round that made it)
        fed.close()
        fed = federation(agents)
        real = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
        k = 16
        try:
            with pytest.raises(SiteRefusedError):
                fed.call("prepare", (real, k, run_key, [0, 0, tag, None, None]), what="prepare")
                params = {"alpha": np.full(k, 1e6), "beta": np.full((k, 3 * N_CLUSTERINGS), 0.5)}
                base, adv = advertise(fed, "estep", (params, 0, 1, 1e-4, 5))
                masked(fed, base, adv, "site-a", "estep", (params, 0, 1, 1e-4, 5))
        except (SiteLostError, OSError) as exc:  # the kernel ran on the wrong-shaped gamma
            pytest.fail(f"a gamma of the wrong shape reached the E-step kernel: {exc}")
        assert agents.procs["site-a"].poll() is None
    finally:
        agents.stop()


def test_checkpoint_files_do_not_accumulate(three):
    """F7. Disk exhaustion: the E-step saves ``gamma-{init}-{t}`` and deletes only ``t - 2``; ``t``, ``init``
    and the run key come from the coordinator, so t = 0, 3, 6, ... (or a new run key per session, or
    ``promote`` with init 0, 1, 2, ...) leaves one gamma file (rows x k floats, k up to 10,000) per round."""
    fed = federation(three)
    real = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    run_key = "0123456789abcdee"
    fed.call("prepare", (real, 2, run_key, None), what="prepare")
    params = {"alpha": np.ones(2), "beta": np.full((2, 3 * N_CLUSTERINGS), 0.5)}
    for t in (0, 3, 6, 9):
        fed.sum("estep", (params, 0, t, 1e-4, 5), what="E-step")
    for init in range(4):
        fed.call("promote", (init,), what="promote")
    files = list((three.configs["site-a"].parent / "state" / "gamma").glob(f"{run_key}-*.npy"))  # per block
    # the last two gammas and the last two bests (the coordinator's checkpoint names the one before until it
    # saves the new one)
    assert len(files) <= 4, f"{len(files)} checkpoint files for one run: {sorted(f.name for f in files)}"


def test_a_refused_request_does_not_grow_the_audit_log_by_its_size(three):
    """F8. Disk exhaustion through the audit log: a refused request's ``session`` (any value, any size up
    to the 2 GiB body limit) is written into the line twice, in the field and in the reason."""
    path = audit(three, "site-a")
    before = path.stat().st_size if path.exists() else 0  # (no line yet when this test is the agent's first)
    lk = SiteLink("site-a", three.addresses["site-a"], three.context(), 60)
    with pytest.raises(SiteRefusedError):
        lk.post("keys", {"session": "f" * 4_000_000, "round": 1})
    lk.close()
    grown = path.stat().st_size - before
    assert grown < 65536, f"one refused 4 MB request wrote {grown} bytes to the audit log"


def test_a_body_larger_than_any_message_is_refused_before_it_is_read(three):
    """F9. Memory exhaustion: the agent buffers bodies of up to 2 GiB (``wire.MAX_BYTES``) per request, on
    as many connections as the coordinator opens, before decoding. A declared 1 GiB body must be refused
    at once (no legitimate message is near that size)."""
    host, port = three.addresses["site-a"].removeprefix("https://").rsplit(":", 1)
    ctx = three.context()
    with socket.create_connection((host, int(port)), timeout=10) as raw:
        with ctx.wrap_socket(raw, server_hostname=host) as s:
            s.sendall(b"POST /v1/join HTTP/1.1\r\nHost: site\r\nContent-Type: application/msgpack\r\n"
                      b"Content-Length: 1073741824\r\n\r\n")  # fmt: skip
            s.settimeout(3)
            try:
                first = s.recv(64)
            except TimeoutError:
                pytest.fail("the site waits to buffer a 1 GiB body")
            except (ssl.SSLError, ConnectionError):
                first = b""
    assert first == b"" or first.startswith(b"HTTP/1.1 4")


def test_a_small_request_cannot_make_a_huge_vector(three):
    """F10. Memory amplification: ``contingency`` checks k <= 10,000 and n_classes <= 65,536 but not their
    product; a ~100-byte request makes the site allocate k * n_classes floats and several fixed-point
    copies of them (k = 10,000: ~5 GB per copy, the agent is killed). Shown here just over the
    2**24-entry cap that label_counts has (k = 257, n_classes = 65,536)."""
    fed = federation(three)
    lk = fed.links["site-a"]
    real = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    with pytest.raises(SiteRefusedError, match="k must be an integer in"):  # k above the site's rows
        lk.post(
            "call", {"session": fed.session, "op": "prepare", "args": [real, 257, "0123456789abcdef", None]}
        )
    fed = federation(three)
    fed.call("prepare", (real, 40, "0123456789abcdef", None), what="prepare")
    fed.call("promote", (0,), what="promote")
    fed.call("finish", what="finish")
    with pytest.raises(SiteRefusedError, match="n_classes must be an integer in"):
        base, adv = advertise(fed, "contingency", (1 << 17,))
        masked(fed, base, adv, "site-a", "contingency", (1 << 17,))


def test_unsigned_categories_do_not_pass_the_sorted_check(three):
    """F11. ``_categories`` checks ``min >= 0`` and ``diff > 0`` on the array as sent: uint64 values above
    2**63 pass both (unsigned differences wrap), then ``astype(int64)`` makes them negative / unsorted
    (here -1, which the encoder's table then writes at index -1: another clustering's label)."""
    fed = federation(three)
    cats = [np.array([2**64 - 1], dtype=np.uint64)] + [np.array([0, 1, 2], dtype=np.uint64)] * (
        N_CLUSTERINGS - 1
    )
    with pytest.raises(SiteRefusedError):
        fed.links["site-a"].post(
            "call", {"session": fed.session, "op": "prepare", "args": [cats, 2, "0123456789abcdef", None]}
        )


# =========================================================================== attacks correctly refused


def test_refused_phases_out_of_order(three):
    fed = federation(three)
    lk = fed.links["site-a"]
    with pytest.raises(SiteRefusedError, match="not in phase 'confirmed'"):  # unmask before any round
        lk.post("unmask", {"session": fed.session, "round": 0, "tags": {}})
    base, adv = advertise(fed)
    with pytest.raises(SiteRefusedError, match="not in phase 'masked'"):  # confirm before masked
        lk.post("confirm", {**base, "survivors": fed.roster})
    with pytest.raises(SiteRefusedError, match="not in phase 'confirmed'"):  # unmask before confirm
        lk.post("unmask", {**base, "tags": {}})
    # (those refusals, at site-a alone, left its transcript apart: its next round would not verify)
    FEDS.pop().close()
    fed = federation(three)
    lk = fed.links["site-a"]
    base, adv = advertise(fed)
    masked(fed, base, adv, "site-a", "label_bits", ())
    with pytest.raises(SiteRefusedError, match="not in phase 'keys'"):  # masked twice in one round
        masked(fed, base, adv, "site-a", "label_counts", ([3] * N_CLUSTERINGS,))
    with pytest.raises(SiteRefusedError, match="answered once"):  # keys again for the same round
        lk.post("keys", {**base, "op": "label_bits", "args": []})


def test_refused_shares_replayed_from_another_round_or_session(three):
    fed = federation(three)
    base1, adv1 = advertise(fed)
    base2, adv2 = advertise(fed)
    mixed = {n: {**adv2[n], "shares": adv1[n]["shares"]} if n == "site-b" else adv2[n] for n in adv2}
    with pytest.raises(SiteRefusedError, match="do not verify"):
        masked(fed, base2, mixed, "site-a", "label_bits", ())
    other = federation(three)
    base3, adv3 = advertise(other)
    mixed = {n: adv3[n] if n == "site-b" else {**adv3[n]} for n in adv3}
    mixed["site-b"] = adv2["site-b"]  # a round key and shares of another session
    with pytest.raises(SiteRefusedError, match="do not verify"):
        masked(other, base3, mixed, "site-a", "label_bits", ())


def test_refused_survivors_outside_the_round(three):
    """A survivor that never advertised (or is no member) gets no share revealed."""
    fed = federation(three)
    base, adv = advertise(fed)
    masked(fed, base, adv, "site-a", "label_bits", ())
    with pytest.raises(SiteRefusedError, match="not among the session's last survivors"):
        fed.links["site-a"].post("confirm", {**base, "survivors": [*fed.roster, "mallory"]})


def test_refused_wire_tricks(three):
    """msgpack nesting bombs, unknown extension types, non-string keys, array headers whose size
    overflows, and arrays of other dtypes: 403, the agent alive."""
    import msgpack

    lk = SiteLink("site-a", three.addresses["site-a"], three.context(), 30)
    bodies = [
        b"\x81\xa7session" + b"\x91" * 100_000 + b"\xc0",
        msgpack.packb({"session": msgpack.ExtType(7, b"x")}),
        msgpack.packb({1: 2}, strict_types=False),
        msgpack.packb({"a": msgpack.ExtType(1, msgpack.packb(["f8", [1 << 62, 4]]))}),
        msgpack.packb({"a": msgpack.ExtType(1, msgpack.packb(["O", [1]]) + b"\0" * 8)}),
        msgpack.packb([1, 2]),
    ]
    for body in bodies:
        lk._connect()
        lk.conn.request("POST", "/v1/join", body, {"Content-Type": "application/msgpack"})
        resp = lk.conn.getresponse()
        assert resp.status == 403, resp.read()[:200]
        resp.read()
        lk.close()
    assert three.procs["site-a"].poll() is None


def test_refused_audit_log_line_injection(three):
    """A session id with newlines and JSON stays inside one JSON line of the audit log."""
    path = audit(three, "site-a")
    n = len(path.read_text().splitlines())
    lk = SiteLink("site-a", three.addresses["site-a"], three.context(), 30)
    forged = 'x"}\n{"outcome": "ok", "op": "join", "peer": "coordinator"}\n'
    with pytest.raises(SiteRefusedError):
        lk.post("join", {"session": forged, "roster": three.names, "mode": "secure", "method": "bce"})
    lines = path.read_text().splitlines()
    assert len(lines) == n + 1 and json.loads(lines[-1])["outcome"] == "refused"


def test_refused_resume_and_run_key_that_name_other_files(three):
    real = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    tag = "ab" * 8 + "-1"
    for resume in (
        ["../x", None, None, None, None],
        [-1, 0, tag, None, None],
        [0, "../../etc/passwd", tag, None, None],
        [None, 0, tag, 0, tag],
        [0, 0, "../" + tag, None, None],  # a tag is <session>-<round>: no path
        [0, 0, None, None, None],  # an iteration without its tag
        [0, None, None, 0, None],  # a best start without its tag
        [0, 0, None],  # the former format
    ):
        fed = federation(three)  # (a refused call ends its session: one session each)
        with pytest.raises(SiteRefusedError, match="resume.*closed at site 'site-a'"):
            fed.links["site-a"].post("call", {"session": fed.session, "op": "prepare",
                                              "args": [real, 2, "0123456789abcdef", resume]})  # fmt: skip
        fed.close()


def test_refused_a_site_left_out_of_the_masked_round(three):
    """Keys relayed without site-a's own (or without a peer whose shares are relayed) are refused, and a
    member asked to sum with a site it never heard from is refused."""
    fed = federation(three)
    base, adv = advertise(fed)
    with pytest.raises(SiteRefusedError, match="leave out this site"):
        masked(fed, base, adv, "site-a", "label_bits", (), keys_of=["site-b", "site-c"])
    base, adv = advertise(fed)  # (a new round: that refusal moved site-a's transcript since the keys)
    msg = {**base, "op": "label_bits", "args": [], "keys": {n: adv[n]["public"] for n in adv},
           "shares": {"site-b": adv["site-b"]["shares"]["site-a"]}}  # fmt: skip
    with pytest.raises(SiteRefusedError, match="do not match the keys"):
        fed.links["site-a"].post("masked", msg)


def test_refused_seen_session_after_a_restart(tmp_path):
    """A session joined before a restart is refused after it (state/sessions)."""
    agents = _start(tmp_path, ["site-a", "site-b"], 4)
    try:
        fed = federation(agents)
        fed.close()
        agents.stop()
        agents.__enter__()
        lk = SiteLink("site-a", agents.addresses["site-a"], agents.context(), 30)
        with pytest.raises(SiteRefusedError, match="joined before"):
            lk.post(
                "join", {"session": fed.session, "roster": agents.names, "mode": "secure", "method": "bce"}
            )
    finally:
        agents.stop()


def test_a_session_id_ending_in_a_newline_is_refused(tmp_path):
    """A review (2026-12-06): the id's pattern ended in ``$``, which also matches before a final
    newline, so ``X\\n`` was joined, and kept as ``X`` in state/sessions after a restart: ``X\\n`` could be
    joined again, with the same channel keys and share nonces. A coordinator that declared a site dropped
    in the first session (its peers revealed their shares of its round key) read the keystream of those
    shares, and in the second recovered the site's round key and unmasked its vector (min_sites below the
    federation's size). Now the id must be exactly 16-64 hex digits; a session of another type is refused,
    not a fault of the site."""
    agents = _start(tmp_path, ["site-a", "site-b"], 4)
    try:
        lk = SiteLink("site-a", agents.addresses["site-a"], agents.context(), 30)
        join = {"roster": agents.names, "mode": "secure", "method": "bce"}
        sid = "0123456789abcdef" * 2
        for bad in (sid + "\n", "\n" + sid, sid + "\r"):
            with pytest.raises(SiteRefusedError, match="16-64 lowercase hex digits"):
                lk.post("join", {**join, "session": bad})
        for op in ("call", "keys", "close"):  # (a list is no key of the site's sessions: it answered 500)
            if op == "close":
                assert lk.post(op, {"session": [sid]}) is None
            else:
                with pytest.raises(SiteRefusedError, match="holds no session"):
                    lk.post(op, {"session": [sid], "op": "label_counts", "args": []})
        assert lk.post("join", {**join, "session": sid})["threshold"] == 2  # an exact id is joined
        lk.post("close", {"session": sid})
        agents.stop()
        agents.__enter__()  # after a restart, neither it nor a spelling of it joins again
        lk = SiteLink("site-a", agents.addresses["site-a"], agents.context(), 30)
        for again in (sid, sid + "\n"):
            with pytest.raises(SiteRefusedError, match="joined before|16-64 lowercase hex digits"):
                lk.post("join", {**join, "session": again})
    finally:
        agents.stop()


def test_a_sessions_line_cut_short_by_a_crash_does_not_swallow_the_next(three, tmp_path):
    """A review (2026-12-06): state/sessions alone keeps an id from being joined twice. A line cut short (a
    crash, a full disk) ran into the next id appended, which was then never read back as joined."""
    import yaml

    from ensemble_dask.federated.site.agent import SiteAgent
    from ensemble_dask.federated.site.config import load_config

    spec = yaml.safe_load(three.configs["site-a"].read_text())
    cfg = three.configs["site-a"].parent / "cut.yaml"
    cfg.write_text(yaml.safe_dump({**spec, "state": str(tmp_path / "state")}))
    (tmp_path / "state").mkdir()
    (tmp_path / "state" / "sessions").write_text("0123456789abcdef\nfedcba98")  # the last line cut short
    agent = SiteAgent(load_config(cfg))
    assert agent.seen == {"0123456789abcdef", "fedcba98"}
    assert (tmp_path / "state" / "sessions").read_text() == "0123456789abcdef\nfedcba98\n"  # next: own line


def test_fields_of_another_type_are_refused_not_a_fault_of_the_site(three):
    """A review (2026-12-06): an 'op' that was a list, a 'mode' or 'method' that was an array, a 'round' that
    was an array raised inside the site (TypeError: unhashable; ValueError: ambiguous truth value), which
    answered 500 as for a fault of its own."""
    fed = federation(three)
    lk, join = fed.links["site-a"], {"roster": three.names, "session": "f" * 32}
    with pytest.raises(SiteRefusedError, match="mode must be"):
        lk.post("join", {**join, "mode": np.array([1, 2]), "method": "bce"})
    with pytest.raises(SiteRefusedError, match="method must be"):
        lk.post("join", {**join, "mode": "secure", "method": np.array([1, 2])})
    with pytest.raises(SiteRefusedError, match="has no call"):
        lk.post("call", {"session": fed.session, "op": ["prepare"], "args": []})
    fed = federation(three)  # (a call that stops ends its session)
    base, _ = advertise(fed)
    with pytest.raises(SiteRefusedError, match="is not in phase 'keys'"):
        fed.links["site-a"].post("masked", {**base, "round": np.array([base["round"]]), "op": "label_bits"})
    fed = federation(three)
    with pytest.raises(SiteRefusedError, match="has no sum"):
        fed.links["site-a"].post("keys", {"session": fed.session, "round": 1, "op": {"a": 1}, "args": []})


def test_an_unmask_refused_at_any_check_answers_no_second_one(three):
    """A review (2026-12-06): an unmask whose tags were no map was refused before the round's phase
    moved on, one whose tags did not verify after it: under one recorded outcome, site-a could still reveal
    its shares and its peers not. Every refused unmask now ends the round's phase."""
    fed = federation(three)
    base, adv = advertise(fed)
    names = three.names
    for me in names:
        masked(fed, base, adv, me, "label_bits", [])
    conf = {n: fed.links[n].post("confirm", {**base, "survivors": names}) for n in names}
    good = {n: {u: conf[u]["tags"][n] for u in names if u != n} for n in names}
    with pytest.raises(SiteRefusedError, match="needs the other survivors' confirmations"):
        fed.links["site-a"].post("unmask", {**base, "tags": "x"})
    with pytest.raises(SiteRefusedError, match="is not in phase 'confirmed'"):
        fed.links["site-a"].post("unmask", {**base, "tags": good["site-a"]})


def test_a_refused_resume_names_the_checkpoint_not_its_file(three):
    """A review (2026-12-06): a resume refused for a missing checkpoint named its file, whose fit key hashes
    the site's number of row blocks: its block_rows, a setting of its own config, could be read back."""
    fed = federation(three)
    real = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    resume = [0, None, None, 0, "ab" * 8 + "-1"]
    with pytest.raises(SiteRefusedError, match="no checkpoint best-0-(ab)+-1 at this site") as info:
        fed.links["site-a"].post("call", {"session": fed.session, "op": "prepare",
                                          "args": [real, 2, "0123456789abcdef", resume]})  # fmt: skip
    assert ".npy" not in str(info.value) and "-b0" not in str(info.value)


def test_a_call_that_stops_after_changing_state_ends_the_session(tmp_path):
    """A review (2026-12-06): a refusal read the same whether the call stopped before or after it
    changed the site's state. Site-a (2 clusterings) refused a prepare on its peers' shape at once, which
    they took (their rows encoded, a fresh gamma) before refusing it for a missing checkpoint; then a prepare
    on site-a's shape went the other way. Every transcript read the same, and a complete E-step sum gave
    site-a's own label counts. Now a call that stops ends its session, and the sites' clusterings are in the
    transcript."""
    rng = np.random.default_rng(5)
    labels = {
        "site-a": rng.integers(0, 6, size=(50, 2)),  # 2 clusterings of 6 labels: 12 categories
        "site-b": rng.integers(0, 3, size=(50, 4)),  # 4 of 3: 12 too
        "site-c": rng.integers(0, 3, size=(50, 4)),
    }
    agents = start_sites(tmp_path, labels)
    try:
        fed = Federation(agents.sites(), "bce", agents.context(), timeout=120).open()
        missing = [0, None, None, 0, "ab" * 8 + "-1"]  # a best start no site holds: refused after the rows
        for cats in ([np.arange(1000, 1003, dtype=np.int64)] * 4, [np.arange(6, dtype=np.int64)] * 2):
            msg = {"session": fed.session, "op": "prepare", "args": [cats, 2, "0123456789abcdef", missing]}
            for name in sorted(labels):  # the same message to every site, each time
                with pytest.raises(SiteRefusedError, match=f"is closed at site '{name}'|holds no session"):
                    fed.links[name].post("call", msg)
        with pytest.raises(SiteRefusedError, match="holds no session"):
            fed.sum("estep", (towards(12, 0), 0, 0, 1e-4, 100), what="E-step")
    finally:
        agents.stop()


def test_refused_plain_vectors_in_a_secure_session(three):
    """A secure session never answers a vector in clear (no 'vector' without masks), nor keys in plain."""
    fed = federation(three)
    base, _ = advertise(fed)
    with pytest.raises(SiteRefusedError, match="round keys and shares"):
        fed.links["site-a"].post("masked", {**base, "op": "label_bits", "args": []})


# =========================================================================== a third review (2026-11-26)
# A site's state follows what it computed, while its transcript (to which every round's shares are bound)
# followed only what it was asked; and a site refused a sum because of its own values. Each test below is
# an attack that worked on the code before it (a helper's review, scripts run against real agents).


@pytest.fixture(scope="module")
def uneven(tmp_path_factory):
    """Three sites of 30, 40 and 45 rows (each row count is told at join), min_sites 3."""
    names = ["site-a", "site-b", "site-c"]
    rng = np.random.default_rng(7)
    labels = {
        n: rng.integers(0, 3, size=(m, N_CLUSTERINGS)) for n, m in zip(names, (30, 40, 45), strict=True)
    }
    a = start_sites(tmp_path_factory.mktemp("uneven"), labels)
    a.labels, a.names = labels, names
    yield a
    a.stop()


def _centroids(split, g=4):
    """KCC centroids over 3 labels of each clustering, K = 2: every row nearer cluster 0; with ``split``,
    the rows of category g (label 1 of clustering 1) nearer cluster 1."""
    MT = np.full((3 * N_CLUSTERINGS, 2), 1 / 3)
    MT[:, 1] = 0.0
    if split:
        MT[:, 1] = 1 / 3
        MT[3:6, 1] = 0.0
        MT[g, 1] = 1.0
    return MT


def test_a_round_computed_at_one_site_only_does_not_single_it_out(three):
    """F12. ``masked`` changes a site's state (KCC's assignment) but did not enter its transcript. Round 2
    is advertised by all and computed by site-a alone, then abandoned; round 3, over all three sites with
    round 1's centroids, moves back site-a's rows only: its 'changed' entry was site-a's count of
    category g, out of a complete secure sum. Now the outcome enters the transcript: round 3 is refused."""
    fed = federation(three, "kcc")
    fed.call("prepare", ([np.arange(3, dtype=np.int64)] * N_CLUSTERINGS, 2), what="prepare")
    fed.sum("kcc_step", (_centroids(False),), what="round 1")
    base, adv = advertise(fed, "kcc_step", (_centroids(True),))
    masked(fed, base, adv, "site-a", "kcc_step", (_centroids(True),))  # site-a alone
    try:
        total = fed.sum("kcc_step", (_centroids(False),), what="round 3")
    except SiteRefusedError:
        return
    truth = int(np.sum(three.labels["site-a"][:, 1] == 1))
    assert int(np.rint(total[-1])) != truth, "round 3's 'changed' is site-a's count of category 4"


def test_a_call_refused_at_one_site_does_not_leave_it_apart(uneven):
    """F13. A refused call entered the transcript as if it ran, and KCC's ``prepare`` kept the categories
    it was sent before it checked k against the site's rows. The same two calls to every site: prepare
    with foreign categories and k = site-a's rows + 1 (site-a refuses, b and c prepare with categories no
    row has), then with the real ones and k = 2 (site-a prepares, b and c refuse: already prepared). The
    transcripts agreed and the complete secure sum of ``kcc_sizes`` was site-a's counts alone."""
    fed = federation(uneven, "kcc")
    n_a = fed.infos["site-a"]["n_rows"]
    real = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    foreign = [np.arange(1000, 1003, dtype=np.int64)] * N_CLUSTERINGS
    outcomes = []
    for cats, k in ((foreign, n_a + 1), (real, 2)):
        for n in fed.alive:  # the same message to every site
            try:
                fed.links[n].post("call", {"session": fed.session, "op": "prepare", "args": [cats, k]})
                outcomes.append((n, k, "ok"))
            except SiteRefusedError:
                outcomes.append((n, k, "refused"))
    assert ("site-a", n_a + 1, "refused") in outcomes and ("site-b", n_a + 1, "ok") in outcomes
    try:
        total = fed.sum("kcc_sizes", (3 * N_CLUSTERINGS,), what="sizes")
    except SiteRefusedError:
        return
    assert not np.array_equal(np.rint(total[:-1]), counts_of(uneven.labels["site-a"])), "site-a alone"


def _oracle_params(eps, G=3 * N_CLUSTERINGS, g=4):
    """BCE parameters under which site-a's E-step statistic of cluster 1 is -(rows without category g) /
    eps (digamma(eps) ~ -1 / eps): whether it is in the fixed-point range tells that count's size."""
    beta = np.ones((2, G))
    beta[1, 3:6], beta[0, 3:6] = 0.0, 1e12  # in clustering 1 cluster 0 takes every label but g ...
    beta[1, g], beta[0, g] = 1e12, 0.0  # ... which only cluster 1 takes
    return {"alpha": np.array([1e12, eps]), "beta": beta}


def test_a_statistic_out_of_range_is_not_a_refusal_that_tells_its_size(three):
    """F14. With alpha near 0 the coordinator sets where the range's end lies on a count of site-a's rows,
    asks site-a alone to compute (keys from all), and reads one bit per session from the refusal: six
    sessions give site-a's count of category g. A site must answer alike on either side of that threshold.
    It does: each row's E-step terms are clipped (ROW_TERM_LIMIT), so no sum leaves the range."""
    cats = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    answers = []
    for eps in (1e-300, 1.0):  # out of range, then in range, whatever site-a's count: a session each
        fed = federation(three)
        fed.call("prepare", (cats, 2, "0123456789abcdef", None), what="prepare")
        args = (_oracle_params(eps), 0, 1, 1e-12, 200)  # (the sweeps the default limits allow)
        base, adv = advertise(fed, "estep", args)
        try:
            masked(fed, base, adv, "site-a", "estep", args)
            answers.append("masked")
        except SiteRefusedError as exc:
            answers.append(str(exc))
        FEDS.remove(fed)
        fed.close()
    assert answers == ["masked", "masked"], f"site-a answered {answers}"


def test_centroids_that_are_not_label_distributions_are_refused(three):
    """F18 (what F14's fix leans on). Centroid entries in [0, 1] could still sum to a clustering's whole
    label count per block, so a row's squared error reached the clusterings plus every category (2**24),
    past the bound that keeps a site's sums in range. A block summing to more than 1 is refused now (a
    test on the centroids alone)."""
    fed = federation(three, "kcc")
    fed.call("prepare", ([np.arange(3, dtype=np.int64)] * N_CLUSTERINGS, 2), what="prepare")
    with pytest.raises(SiteRefusedError, match="sum to at most 1"):
        fed.sum("kcc_step", (np.ones((3 * N_CLUSTERINGS, 2)),), what="centroids of ones")


def test_a_caller_that_is_not_the_coordinator_is_refused_before_its_message_is_parsed(three):
    """F15. The body was parsed before the caller was checked: any certificate of the CA ('mallory') could
    make a site build 80 bytes of lists per byte sent. Now a stranger's body is never parsed."""
    import http.client

    host, port = three.addresses["site-a"].removeprefix("https://").rsplit(":", 1)
    conn = http.client.HTTPSConnection(host, int(port), context=three.context("mallory"), timeout=30)
    try:
        conn.request("POST", "/v1/join", b"\xc1", {"Content-Type": "application/msgpack"})  # not msgpack
        resp = conn.getresponse()
        reply = resp.read()
    finally:
        conn.close()
    assert resp.status == 403 and b"answers only 'coordinator'" in reply, reply[:200]


def test_checkpoints_of_old_runs_do_not_pile_up(three):
    """F16 (what F7 left). A site kept the E-step checkpoints of every run key the coordinator named, one
    ``gamma`` per block each: a new run key per session filled the site's disk. It now keeps those of its
    last ``max_sessions`` runs (4 here)."""
    gdir = three.configs["site-a"].parent / "state" / "gamma"
    gdir.mkdir(parents=True, exist_ok=True)
    np.save(gdir / "labels.npy", np.zeros(3))  # the site's own file there: not a checkpoint, never pruned
    cats = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    params = {"alpha": np.ones(2), "beta": np.full((2, 3 * N_CLUSTERINGS), 0.5)}
    held = federation(three)  # a session that stays open through the others: its run is never pruned
    held.call("prepare", (cats, 2, "00000000000000aa", None), what="prepare")
    held.sum("estep", (params, 0, 0, 1e-4, 1), what="E-step")
    for i in range(6):
        fed = federation(three)
        fed.call("prepare", (cats, 2, f"{i + 1:016x}", None), what="prepare")
        fed.sum("estep", (params, 0, 0, 1e-4, 1), what="E-step")
        FEDS.remove(fed)
        fed.close()
    runs = {f.name.split("-", 1)[0] for f in gdir.glob("*-*.npy")}
    assert len(runs) <= 4, sorted(runs)
    assert f"{6:016x}" in runs and "00000000000000aa" in runs and (gdir / "labels.npy").exists()


def test_a_site_that_cannot_open_its_data_tells_the_coordinator_no_path(three):
    """F17. A join that failed to read the site's labels answered with the site's path (and whatever the
    reader quoted); that stays in the site's audit log now."""
    import shutil

    import yaml

    cfg = three.configs["site-a"]
    url = cfg.parent / yaml.safe_load(cfg.read_text())["data"]["labels"]
    moved = url.with_name(url.name + ".away")
    shutil.move(url, moved)
    try:
        lk = SiteLink("site-a", three.addresses["site-a"], three.context(), 30)
        with pytest.raises(SiteRefusedError, match="cannot open its data") as exc:
            lk.post("join", {"session": "ab" * 16, "roster": three.names, "mode": "secure", "method": "bce"})
        lk.close()
    finally:
        shutil.move(moved, url)
    assert url.name not in str(exc.value) and str(cfg.parent) not in str(exc.value), exc.value
    last = json.loads(audit(three, "site-a").read_text().splitlines()[-1])
    assert last["outcome"] == "refused" and url.name in last["reason"], last


def test_a_site_lost_at_confirm_is_dropped_not_taken_for_an_attack(five):
    """A review of the transcript's outcomes: an honest coordinator whose 'confirm' answer from one site is
    lost (a timeout) kept that site in the session, and since its transcript now differs from the others'
    (no unmask), the next round was refused as 'altered or forged'. The site is dropped instead, as a site
    lost in the masked phase is, and the driver restarts over the survivors."""
    from ensemble_dask.federated.coordinator.link import SitesDropped

    fed = federation(five)
    ask = fed._ask

    def lose_one_confirm(names, op, messages, what):  # the coordinator's side: the reply never arrives
        results, failed = ask(names, op, messages, what)
        if op == "confirm" and "site-e" in results and not hasattr(fed, "_lost"):
            fed._lost = results.pop("site-e")
            failed["site-e"] = SiteLostError("site 'site-e' did not answer (the reply was lost)")
        return results, failed

    fed._ask = lose_one_confirm
    with pytest.raises(SitesDropped) as exc:
        fed.sum("label_bits", what="round 1")
    assert exc.value.dropped == ["site-e"] and "site-e" not in fed.alive
    fed.sum("label_bits", what="round 2")  # over the four that finished round 1 alike


# =========================================================================== F20: empty category blocks


def test_kcc_centroids_with_no_categories_are_not_read_out_of_bounds(three):
    """F20. KCC's ``prepare`` took empty category arrays, and with none at all (G = 0) the kernels went past
    their arrays' ends (numba checks no bounds): the block norms of the (0 x K) centroids were K x 0 and the
    Lloyd kernel read N entries beyond them into the summed squared error (whatever lay in the site's
    memory: 4 per row here, or a NaN, a refusal that depends on it), and ``kcc_sizes`` added 0 at category
    0 of a 0-entry vector (a write past its end). Every row is all-missing under no categories: its squared
    error is 0. Now a prepare without a single category is refused (a test on the arguments alone)."""
    fed = federation(three, "kcc")
    try:
        fed.call("prepare", ([np.zeros(0, dtype=np.int64)] * N_CLUSTERINGS, 2), what="prepare")
    except SiteRefusedError as exc:
        assert "at least one label" in str(exc)
        return
    total = fed.sum("kcc_step", (np.zeros((0, 2)),), what="no categories")
    n = sum(lab.shape[0] for lab in three.labels.values())
    assert total.tolist() == [n, 0.0, n], total  # sizes, every row moved (from -1)


def test_kcc_centroids_with_an_empty_last_clustering_are_checked(three):
    """F20 (its other end). With the last clustering's categories empty, the centroid check and the block
    norms (``np.add.reduceat`` at offset G) failed at the site with an IndexError (a fault, not a refusal);
    an empty block between others took the next block's first entry as its sum. Empty blocks sum to 0."""
    fed = federation(three, "kcc")
    cats = [np.arange(3, dtype=np.int64)] * (N_CLUSTERINGS - 1) + [np.zeros(0, dtype=np.int64)]
    fed.call("prepare", (cats, 2), what="prepare")
    MT = np.full((3 * (N_CLUSTERINGS - 1), 2), 1 / 3)
    total = fed.sum("kcc_step", (MT,), what="an empty last clustering")
    n = sum(lab.shape[0] for lab in three.labels.values())
    # every row at distance (N - 1) (1 - 2/3 + 1/3) = 2 from both centroids: all in cluster 0
    assert np.allclose(total[-3:], [n, 0.0, n]), total[-3:]  # sizes, every row moved
    from ensemble_dask.consensus.kcc._blocks import block_norms
    from ensemble_dask.federated.coordinator.kcc import pooled_sse

    offsets = np.array([3 * i for i in range(N_CLUSTERINGS)] + [MT.shape[0]])
    counts = total[: 2 * MT.shape[0]].reshape(2, MT.shape[0])
    assert pooled_sse(counts, MT, block_norms(MT, offsets), offsets) == pytest.approx(2.0 * n)


def test_a_kcc_step_sums_integers_only(three):
    """A review (2026-12-06, the fourth): each site summed its rows' squared errors in float64, whose
    roundings the exact fixed point kept, so a round's total told how the rows were split among the sites
    (as BCE's statistics did: ``test_pooled_sums.py``). A site now sends its counts, sizes and rows moved,
    integers, and the coordinator has the squared errors from the counts (``pooled_sse``)."""
    fed = federation(three, "kcc")
    cats = [np.arange(3, dtype=np.int64)] * N_CLUSTERINGS
    fed.call("prepare", (cats, 2), what="prepare")
    MT = np.random.default_rng(7).dirichlet(np.ones(3), size=(2, N_CLUSTERINGS)).reshape(2, -1).T / 1.1
    total = fed.sum("kcc_step", (MT,), what="a step")
    np.testing.assert_array_equal(total, np.rint(total))


def _signed_context(three, path, names, ca=False):
    """A client TLS context with a certificate of the federation's CA (``certs sign`` makes none such):
    common names ``names``, a CA's when ``ca``."""
    import datetime
    import ssl

    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    from ensemble_dask.federated.protocol.certs import _load_ca, _private_pem

    ca_cert, ca_key = _load_ca(three.certs)
    now, day = datetime.datetime.now(datetime.UTC), datetime.timedelta(days=1)
    key = ec.generate_private_key(ec.SECP256R1())
    subject = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, n) for n in names])
    cert = (
        x509.CertificateBuilder().subject_name(subject).issuer_name(ca_cert.subject)
        .public_key(key.public_key()).serial_number(x509.random_serial_number())
        .not_valid_before(now - day).not_valid_after(now + day)
        .add_extension(x509.BasicConstraints(ca=ca, path_length=None), critical=True)
        .add_extension(x509.ExtendedKeyUsage([ExtendedKeyUsageOID.CLIENT_AUTH]), critical=False)
        .sign(ca_key, hashes.SHA256())
    )  # fmt: skip
    (path / "c.pem").write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    (path / "c-key.pem").write_bytes(_private_pem(key))
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(three.certs / "ca.pem"))
    ctx.check_hostname = False
    ctx.load_cert_chain(str(path / "c.pem"), str(path / "c-key.pem"))
    return ctx


@pytest.mark.parametrize("names, ca", [(("coordinator", "site-a"), False), (("coordinator",), True)])
def test_a_certificate_of_two_names_or_a_cas_is_no_ones(three, tmp_path, names, ca):
    """Attacker reviews (2026-12-06): a certificate of the federation's CA with the common names
    'coordinator' and 'site-a' was taken for the coordinator's (the first name read), and so was a CA's
    certificate named 'coordinator'. The CA's ``certs sign`` makes neither, but a party's certificate has
    one name and is no CA's: any other is nobody's."""
    from ensemble_dask.federated.coordinator.link import SiteLink

    link = SiteLink("site-a", three.addresses["site-a"], _signed_context(three, tmp_path, names, ca), 10)
    try:
        with pytest.raises(SiteRefusedError, match="coordinator"):
            link.post("close", {"session": "0" * 16})
    finally:
        link.close()

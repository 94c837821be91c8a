"""Secure-aggregation primitives on their own: two-word fixed point, pair keys, ChaCha20 masks."""

import math
import struct
from fractions import Fraction

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey
from hypothesis import example, given, settings
from hypothesis import strategies as st

from ensemble_dask import InputError
from ensemble_dask.federated.protocol import secagg
from ensemble_dask.federated.protocol.secure import (
    add_words,
    decode_fixed,
    encode_fixed,
    fixed_point_limit,
    keystream_words,
    neg_words,
    sum_words,
)

# values the float64 arithmetic of the old encoder got wrong (issue 25): small negatives whose low word
# rounded up to 2**64 (decoded as -1.0), negatives in (-0.5, 0) that are not multiples of 2**-53, ties
# (half a unit: to even), subnormals, values next to the range's ends and exact multiples of 2**-64
EDGE_VALUES = [
    -1e-18,
    -(2.0**-60),
    -(2.0**-65),
    -(2.0**-66),
    -1.5 * 2.0**-64,
    -2.5 * 2.0**-64,
    -(2.0**-54),
    -(2.0**-53) - 2.0**-64,
    -0.1,
    -(0.5 - 2.0**-54),
    -(1 - 2.0**-53),
    5e-324,
    -5e-324,
    -2.2250738585072014e-308,
    2.0**-65,
    3 * 2.0**-65,
    -3 * 2.0**-64,
    (2.0**52 + 1) * 2.0**-64,
    -(2.0**52 + 1) * 2.0**-64,
    2.0**40 + 2.0**-12,
    -(2.0**10) - 2.0**-42,
    np.nextafter(2.0**63, 0),
    -np.nextafter(2.0**63, 0),
    -0.0,
]


def _ints(words):
    """The signed integers (units of 2**-64) held by two-word vectors."""
    return [((int(h) << 64 | int(lo)) + 2**127) % 2**128 - 2**127 for h, lo in zip(*words, strict=True)]


def _words(ints):
    u = [v % 2**128 for v in ints]
    return np.array([[v >> 64 for v in u], [v & (2**64 - 1) for v in u]], dtype=np.uint64)


def _exact(x):
    """The integer nearest x * 2**64, ties to even (Python's round of a Fraction)."""
    return round(Fraction(float(x)) * 2**64)


def _in_range(n_sites):
    limit = fixed_point_limit(n_sites)
    return st.floats(
        min_value=-limit,
        max_value=limit,
        exclude_min=True,
        exclude_max=True,
        allow_nan=False,
        allow_infinity=False,
    )


def test_fixed_point_at_ten_million_rows_and_200_clusterings():
    """Statistics of 10M rows x 200 clusterings (k=50) from 3 sites sum exactly, where 64 bits overflow."""
    n, N, k = 10_000_000, 200, 50
    rng = np.random.default_rng(0)
    shares = rng.dirichlet(np.ones(3), size=1)[0]
    sites = []
    for share in shares:
        rows = share * n
        counts = rng.uniform(
            0, rows, size=k * N * 10
        )  # beta counts (k x R, 10 labels per clustering) <= rows
        ss = -rows * rng.uniform(1, 300, size=k)  # alpha's digamma sums: rows x |digamma| up to 300
        bound = -rows * N * 40.0  # bound terms: rows x clusterings x log-likelihoods
        sites.append(np.concatenate([counts, ss, [bound, rows]]))
    words = [encode_fixed(v, n_sites=3) for v in sites]
    total = decode_fixed(sum_words(words))
    exact = np.array([math.fsum(col) for col in zip(*sites, strict=True)])
    np.testing.assert_allclose(total, exact, rtol=2**-52, atol=2**-60)
    assert abs(exact[-2]) > 2**36  # the old 64-bit word with 32 fraction bits held |x| < 2**31 only
    # one site's words decode to its own vector; the range check names the culprit
    np.testing.assert_array_equal(decode_fixed(words[0]), sites[0])
    with pytest.raises(InputError, match="site 'x'.*outside the fixed-point range"):
        encode_fixed([2.0**62], n_sites=3, name="site 'x'")
    with pytest.raises(InputError, match="nan"):
        encode_fixed([np.nan])


def test_two_word_arithmetic_by_hand():
    w = encode_fixed([-0.5, 0.5, -1.0, 2.0**-64, -(2.0**62)])
    # -0.5 is -2**63 in units of 2**-64: high word all ones, low word 2**63
    assert w[0, 0] == np.uint64(2**64 - 1) and w[1, 0] == np.uint64(2**63)
    assert w[0, 1] == 0 and w[1, 1] == np.uint64(2**63)
    assert w[1, 3] == 1 and w[0, 3] == 0
    np.testing.assert_array_equal(decode_fixed(add_words(w, neg_words(w))), 0.0)
    np.testing.assert_array_equal(decode_fixed(neg_words(w)), -decode_fixed(w))
    carry = add_words(encode_fixed([0.75]), encode_fixed([0.5]))  # low words overflow into the high word
    assert decode_fixed(carry)[0] == 1.25


def _round(names, t, x, session="s1", round_id=1, drop=()):
    """One SecAgg+ round among ``names`` in this process: the survivors' decoded sum and the masked words."""
    lt = {n: X25519PrivateKey.generate() for n in names}
    pins = {n: k.public_key().public_bytes_raw() for n, k in lt.items()}
    ch = {n: secagg.channel_keys(lt[n], n, pins, session) for n in names}
    adv = {n: secagg.advertise(n, names, ch[n], session, round_id, t) for n in names}
    keys = {n: a[1] for n, a in adv.items()}
    masked = {}
    for v in names:
        secagg.receive_shares(v, adv[v][0], keys, {u: adv[u][2][v] for u in names if u != v}, ch[v], session)
        masked[v] = secagg.masked_input(x[v], v, adv[v][0], session, n_sites=len(names))
    surv = [n for n in names if n not in drop]
    reveals = {v: secagg.reveal(adv[v][0], surv) for v in surv}
    total = secagg.unmask_words(
        sum_words([masked[v] for v in surv]), names, keys, surv, reveals, session, round_id, t
    )
    return decode_fixed(total), masked, adv, ch, keys


def test_a_secagg_round_sums_the_survivors_and_hides_each_site():
    names = ["a", "b", "c", "d", "e"]
    rng = np.random.default_rng(1)
    x = {n: rng.normal(0, 1e3, 200) for n in names}
    t = secagg.threshold(5, 4)
    assert t == 4 and secagg.threshold(5, 2) == 3  # more than half, whatever the minimum
    total, masked, *_ = _round(names, t, x)
    np.testing.assert_allclose(total, sum(x.values()), rtol=1e-12, atol=1e-9)
    for n in names:  # a masked vector alone is noise over the whole 128-bit range
        assert np.mean(np.abs(decode_fixed(masked[n]) - x[n]) < 1e6) < 0.01
    total, *_ = _round(names, t, x, drop=("c",))  # c's input never arrived: the others' sum
    np.testing.assert_allclose(total, sum(x[n] for n in names if n != "c"), rtol=1e-12, atol=1e-9)
    with pytest.raises(InputError, match="only 3 shares of a secret that needs 4"):
        _round(names, t, x, drop=("c", "d"))


def test_a_keystream_window_is_those_columns_of_the_whole_stream():
    """A site masks a long vector a piece at a time (its memory: a round of 2**24 entries peaked at 1.48 GB):
    each piece's keystream enters the stream at the block (8 words) that holds it."""
    key = b"k" * 32
    for size in (1, 7, 8, 9, 37, 200):
        whole = keystream_words(key, 3, size)
        for start, stop in [(0, size), (0, 0), (size, size), (1, size), (size // 3, size - 1), (5, 6)]:
            if start <= stop <= size:
                window = keystream_words(key, 3, size, start, stop)
                np.testing.assert_array_equal(window, whole[:, start:stop])
    with pytest.raises(ValueError, match="outside a keystream of 5"):
        keystream_words(key, 3, 5, 2, 6)
    # the words themselves, which every site and the coordinator must compute alike: ChaCha20 of the key from
    # block 0 with the round in the nonce, the stream's first half the high words
    from cryptography.hazmat.primitives.ciphers import Cipher, algorithms

    nonce = struct.pack("<IQI", 0, 3, 0)
    raw = Cipher(algorithms.ChaCha20(key, nonce), mode=None).encryptor().update(bytes(16 * 37))
    np.testing.assert_array_equal(keystream_words(key, 3, 37), np.frombuffer(raw, np.uint64).reshape(2, 37))


def test_a_masked_input_computed_in_pieces_is_the_same_words():
    """``masked_input`` a chunk at a time gives, for any chunk, the words of the whole vector masked at once
    (the fixed point plus the self mask plus and minus the pair masks), which the unmasking takes away."""
    names = ["a", "b", "c"]
    rng = np.random.default_rng(2)
    x = {n: rng.normal(0, 1e3, 101) for n in names}
    total, masked, adv, _, keys = _round(names, 3, x)
    np.testing.assert_allclose(total, sum(x.values()), rtol=1e-12, atol=1e-9)
    secrets = adv["b"][0]
    whole = encode_fixed(x["b"], n_sites=3)
    whole = add_words(whole, secagg._self_mask(secrets.seed, "s1", 1, 101))
    for other, sign in (("a", -1), ("c", 1)):  # b adds the mask it shares with c, subtracts a's
        m = secagg._pair_mask(secrets.private, keys[other], "b", other, "s1", 1, 101)
        whole = add_words(whole, m if sign > 0 else neg_words(m))
    np.testing.assert_array_equal(masked["b"], whole)
    for chunk in (1, 7, 8, 37, 100, 101, 1000):
        got = secagg.masked_input(x["b"], "b", secrets, "s1", n_sites=3, chunk=chunk)
        np.testing.assert_array_equal(got, whole, err_msg=f"chunk={chunk}")
    bad = x["b"].copy()
    bad[[40, 90]] = [np.inf, np.nan]  # in the second and the third chunk: the first of them is named
    with pytest.raises(InputError, match="site 'b': value inf outside the fixed-point range"):
        secagg.masked_input(bad, "b", secrets, "s1", n_sites=3, chunk=37)
    for chunk in (0, -1):  # never words left unwritten
        with pytest.raises(ValueError, match="chunk must be a positive number of entries"):
            secagg.masked_input(x["b"], "b", secrets, "s1", n_sites=3, chunk=chunk)


def test_shares_sent_twice_under_one_channel_key_share_no_keystream():
    """A review (2026-12-06): the shares' nonce was the round and the direction, so a session id
    joined twice (one the sites' check read two ways) encrypted new shares under the old keystream: shares
    revealed in clear in the first run (their site declared dropped) XOR their ciphertexts gave the stream,
    which decrypted the same site's shares of its new round key in the second. Each ciphertext now has a
    fresh random nonce: two rounds of one (session, round) under one channel key XOR to no XOR of shares."""
    names = ["a", "b", "c"]
    lt = {n: X25519PrivateKey.generate() for n in names}
    pins = {n: k.public_key().public_bytes_raw() for n, k in lt.items()}
    ch = {n: secagg.channel_keys(lt[n], n, pins, "s1") for n in names}
    runs = []
    for _ in range(2):  # the same session and round twice: what a session joined again would send
        adv = {n: secagg.advertise(n, names, ch[n], "s1", 1, 2) for n in names}
        keys = {n: a[1] for n, a in adv.items()}
        secagg.receive_shares("a", adv["a"][0], keys, {u: adv[u][2]["a"] for u in "bc"}, ch["a"], "s1")
        plain = b"".join(adv["a"][0].held["b"])  # b's shares for a, as a decrypted them
        runs.append((plain, adv["b"][2]["a"]))  # and the ciphertext: [nonce,] the shares encrypted, the tag
    (p1, c1), (p2, c2) = runs
    assert p1 != p2
    xor = lambda u, v: bytes(i ^ j for i, j in zip(u, v, strict=True))  # noqa: E731
    body = slice(-len(p1) - 16, -16)
    assert xor(c1[body], c2[body]) != xor(p1, p2)  # no keystream in common
    assert c1[:12] != c2[:12]  # each its own nonce


def test_shares_sent_back_to_their_sender_or_into_another_round_do_not_verify():
    """A review (2026-12-06): with the direction gone from the nonce, the associated data joined by "|" read
    the same for sites named ``a`` and ``a|a`` either way, and a's shares for a|a, relayed back to a as a|a's
    (with a's own key as a|a's), verified. Each field now goes after its length."""
    names = ["a", "a|a"]
    lt = {n: X25519PrivateKey.generate() for n in names}
    pins = {n: k.public_key().public_bytes_raw() for n, k in lt.items()}
    ch = {n: secagg.channel_keys(lt[n], n, pins, "s1") for n in names}
    mine, public, cts = secagg.advertise("a", names, ch["a"], "s1", 1, 2)
    with pytest.raises(InputError, match=r"relayed for site 'a\|a' do not verify"):
        secagg.receive_shares("a", mine, {"a": public, "a|a": public}, {"a|a": cts["a|a"]}, ch["a"], "s1")
    # and a peer's key and shares of round 1, relayed in round 2
    old = secagg.advertise("a|a", names, ch["a|a"], "s1", 1, 2)
    now = secagg.advertise("a", names, ch["a"], "s1", 2, 2)[0]
    with pytest.raises(InputError, match="do not verify"):
        secagg.receive_shares("a", now, {"a": now.public, "a|a": old[1]}, {"a|a": old[2]["a"]}, ch["a"], "s1")


def test_a_relayed_key_or_share_that_was_altered_does_not_verify():
    names = ["a", "b", "c"]
    x = {n: np.ones(3) for n in names}
    _, _, adv, ch, keys = _round(names, 3, x)
    fresh = secagg.advertise("a", names, ch["a"], "s1", 2, 3)[0]
    forged = {**keys, "a": fresh.public, "b": X25519PrivateKey.generate().public_key().public_bytes_raw()}
    cts = {u: adv[u][2]["a"] for u in ("b", "c")}
    with pytest.raises(InputError, match="relayed for site 'b' do not verify"):
        secagg.receive_shares("a", fresh, forged, cts, ch["a"], "s1")
    with pytest.raises(InputError, match="is not the one it advertised"):
        secagg.receive_shares("a", fresh, keys, cts, ch["a"], "s1")
    ks = keystream_words(b"k" * 32, 7, 5)
    assert ks.shape == (2, 5) and ks.dtype == np.uint64
    assert not np.array_equal(ks, keystream_words(b"k" * 32, 8, 5))  # another round, another stream


@settings(deadline=None)
@given(values=st.lists(_in_range(1) | st.sampled_from(EDGE_VALUES), max_size=30))
@example(values=EDGE_VALUES)
def test_encode_is_the_nearest_integer_and_decode_rounds_it_correctly(values):
    """encode(x) is round(x * 2**64) exactly; decode(encode(x)) is the float nearest that over 2**64."""
    words = encode_fixed(values)
    exact = [_exact(x) for x in values]
    assert _ints(words) == exact
    assert decode_fixed(words).tolist() == [v / 2**64 for v in exact]  # int / int: correctly rounded


@settings(deadline=None)
@given(m=st.integers(-(2**53) + 1, 2**53 - 1), e=st.integers(-64, 9))
@example(m=-3, e=-64)
@example(m=-(2**52) - 1, e=-64)
@example(m=2**53 - 1, e=9)
def test_multiples_of_two_to_the_minus_64_round_trip_exactly(m, e):
    x = math.ldexp(m, e)  # exact: m has at most 53 bits
    assert decode_fixed(encode_fixed([x, -x])).tolist() == [x, -x]


@settings(deadline=None)
@given(ints=st.lists(st.integers(-(2**127) + 1, 2**127 - 1), min_size=1, max_size=30))
@example(ints=[(2**53 + 1) * 2**64 + 1, -((2**53 + 1) * 2**64 + 1)])  # the float of the high word rounds
@example(ints=[2**64 + 2**63 + 2**11 + 1, 2**117 + 2**64 - 1, 2**127 - 1, -(2**127) + 1, 1, -1, 0])
def test_decode_is_correctly_rounded(ints):
    """Any two-word value of magnitude < 2**127 decodes to the float nearest to it over 2**64."""
    assert decode_fixed(_words(ints)).tolist() == [v / 2**64 for v in ints]


@settings(deadline=None)
@given(data=st.data(), n_sites=st.integers(2, 8), size=st.integers(1, 12))
def test_sums_of_up_to_8_sites_are_exact(data, n_sites, size):
    """The decoded sum of n_sites encodings within the limit is the correctly rounded exact sum."""
    element = _in_range(n_sites) | st.sampled_from([v for v in EDGE_VALUES if abs(v) < 2**60])
    vectors = [data.draw(st.lists(element, min_size=size, max_size=size)) for _ in range(n_sites)]
    words = sum_words(encode_fixed(v, n_sites=n_sites) for v in vectors)
    exact = [sum(_exact(x) for x in col) for col in zip(*vectors, strict=True)]
    assert _ints(words) == exact  # no wrap
    assert decode_fixed(words).tolist() == [v / 2**64 for v in exact]
    reference = [Fraction(sum(map(Fraction, col))) for col in zip(*vectors, strict=True)]
    assert all(
        abs(Fraction(v, 2**64) - r) <= Fraction(n_sites, 2**65) for v, r in zip(exact, reference, strict=True)
    )


def test_issue_25_a_tiny_negative_summed_over_three_sites():
    """[1, -1e-18] + [2, 0] + [3, 0] was [6, -1]: the low word of -1e-18 rounded up to 2**64 and wrapped."""
    total = decode_fixed(sum_words([encode_fixed(v, n_sites=3) for v in ([1, -1e-18], [2, 0], [3, 0])]))
    assert total[0] == 6.0 and total[1] == -18 * 2.0**-64
    np.testing.assert_allclose(total, [6.0, -1e-18], rtol=0, atol=2.0**-65)
    for x in (-1e-18, -(2.0**-60), -(2.0**-54), -1.5 * 2.0**-64):  # each alone, never off by a power of two
        assert abs(decode_fixed(encode_fixed([x]))[0] - x) <= 2.0**-65


def _site_estep(labels, alpha, beta, clip):
    from ensemble_dask.consensus.bce._em import Params, encode_labels, estep_stats, label_categories

    cats = label_categories(labels)
    gidx, _ = encode_labels(labels, cats)
    k = alpha.size
    params = Params(alpha, beta, np.zeros((k, 0)), np.ones((k, 0)))
    gamma = np.full((labels.shape[0], k), -1.0)
    N = labels.shape[1]
    return estep_stats(gidx, np.ones(N), np.empty((labels.shape[0], 0)), np.empty(0), params, gamma, 1e-4, 50,
                       clip=clip)  # fmt: skip


@settings(deadline=None, max_examples=60)
@given(
    seed=st.integers(0, 2**31 - 1),
    log_alpha=st.lists(st.floats(-300, 12), min_size=2, max_size=4),
    log_beta=st.floats(-300, 12),
)
def test_a_site_s_e_step_stays_in_range_whatever_parameters_it_is_sent(seed, log_alpha, log_beta):
    """F14: the coordinator chose alpha near 0 (digamma ~ -1/alpha) so that a site's E-step sum left the
    fixed-point range exactly when a count of its rows passed a threshold it set, and read that bit from the
    refusal. Each row's terms are now clipped to ROW_TERM_LIMIT, so every entry is at most the rows times it,
    whatever alpha and beta (in the site's accepted [0, 1e12]) and whatever the rows."""
    from ensemble_dask.federated.protocol.secure import ROW_TERM_LIMIT

    rng = np.random.default_rng(seed)
    n, N = 40, 3
    labels = rng.integers(0, 3, size=(n, N))
    labels[rng.random((n, N)) < 0.2] = -1
    alpha = 10.0 ** np.array(log_alpha)
    beta = rng.random((alpha.size, 3 * N)) ** 3
    beta[rng.integers(alpha.size), rng.integers(3 * N)] = 10.0**log_beta
    vec = _site_estep(labels, alpha, beta, ROW_TERM_LIMIT)
    assert np.isfinite(vec).all()
    assert np.abs(vec).max() <= n * ROW_TERM_LIMIT
    assert 0 <= vec[-1] <= n  # the rows clipped


def test_a_fit_s_parameters_are_never_clipped():
    """With the parameters of a fit, a site's clipped E-step is the pooled fit's exactly (and says so)."""
    from ensemble_dask.federated.protocol.secure import ROW_TERM_LIMIT

    rng = np.random.default_rng(0)
    labels = rng.integers(0, 4, size=(300, 20))
    labels[rng.random(labels.shape) < 0.3] = -1
    alpha = np.array([0.05, 1.0, 30.0])
    beta = rng.dirichlet(np.ones(4), size=(3, 20)).reshape(3, 80)
    beta[0, :4] = [1e-300, 0.0, 0.5, 0.5]
    clipped = _site_estep(labels, alpha, beta, ROW_TERM_LIMIT)
    assert clipped[-1] == 0
    assert clipped[:-1].tolist() == _site_estep(labels, alpha, beta, None).tolist()


def test_a_site_joins_only_when_its_rows_fit_the_range():
    """The test on public counts (the rows and clusterings a join tells) that makes the clipping enough."""
    from ensemble_dask.federated.protocol.secure import ROW_TERM_LIMIT, rows_in_range

    assert rows_in_range(10**9, 200, 100)
    limit = fixed_point_limit(3000) / ROW_TERM_LIMIT
    assert rows_in_range(int(limit) - 1, 200, 3000) and not rows_in_range(int(limit) + 1, 200, 3000)
    # and an exact sum's units (2**32 a row at most) fit int64
    assert rows_in_range(2**31 - 1, 200, 3) and not rows_in_range(2**31, 200, 3)
    assert not rows_in_range(10**6, 2**45, 3)  # KCC's squared errors: twice the clusterings a row

"""Secure-aggregation primitives on their own: two-word fixed point, pair keys, ChaCha20 masks."""

import math

import numpy as np
import pytest
from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

from ensemble_dask import InputError
from ensemble_dask.federated.secure import (
    add_words,
    decode_fixed,
    derive_pair_keys,
    encode_fixed,
    keystream_words,
    mask_vector,
    neg_words,
    sum_words,
)
from ensemble_dask.federated.site import SitePlugin, load_pins


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


def test_pairwise_masks_cancel_and_hide():
    names = ["a", "b", "c", "d"]
    keys = {n: X25519PrivateKey.generate() for n in names}
    roster = {n: k.public_key().public_bytes_raw() for n, k in keys.items()}
    pair = {n: derive_pair_keys(keys[n], n, roster, "session-1") for n in names}
    assert pair["a"]["c"] == pair["c"]["a"] and pair["a"]["b"] != pair["a"]["c"]
    assert derive_pair_keys(keys["a"], "a", roster, "session-2")["c"] != pair["a"]["c"]  # fresh per session
    rng = np.random.default_rng(1)
    vecs = {n: rng.normal(0, 1e3, 200) for n in names}
    masked = {n: mask_vector(vecs[n], n, pair[n], 7, n_sites=4) for n in names}
    np.testing.assert_allclose(decode_fixed(sum_words(masked.values())), sum(vecs.values()), rtol=1e-12)
    for n in names:  # a masked vector alone is noise over the whole 128-bit range
        assert np.mean(np.abs(decode_fixed(masked[n]) - vecs[n]) < 1e6) < 0.01
    # another round, another mask
    again = mask_vector(vecs["a"], "a", pair["a"], 8, n_sites=4)
    assert not np.any(again == masked["a"])
    ks = keystream_words(pair["a"]["b"], 7, 5)
    assert ks.shape == (2, 5) and ks.dtype == np.uint64
    np.testing.assert_array_equal(ks, keystream_words(pair["b"]["a"], 7, 5))


def test_pins_from_a_workflow_and_a_directory(tmp_path):
    from ensemble_dask.federated.certs import make_certs

    make_certs(tmp_path, ["s1", "s2"])
    by_dir = load_pins(tmp_path)
    assert set(by_dir) == {"s1", "s2"}
    wf = tmp_path / "wf.yaml"
    wf.write_text(
        "federated:\n  sites:\n"
        f"    - {{name: s1, mask_key: {tmp_path / 's1-mask.pub'}}}\n"
        f"    - {{name: s2, mask_key: {tmp_path / 's2-mask.pub'}}}\n"
    )
    assert load_pins(wf) == by_dir
    plugin = SitePlugin(mask_key=str(tmp_path / "s1-mask.key"), pins=str(wf))
    plugin.setup()
    assert plugin.public_key == by_dir["s1"]
    with pytest.raises(InputError, match="cannot read the masking key"):
        SitePlugin(mask_key=str(tmp_path / "none.key")).setup()

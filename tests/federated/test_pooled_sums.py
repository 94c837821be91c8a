"""What a round's total may depend on: the pooled rows only, never how they are split among the sites.

A review (2026-12-06, the fourth attacker pass) read each site's label counts out of complete secure rounds
of the default policy. The sites summed their E-step statistics in float64, and the exact fixed point kept
each site's roundings: with categories that leave every row of a site one of two kinds, the site's total is
``fl(c * phi)`` for its count ``c`` of one kind, and the coordinator, which knows ``phi`` and the pooled
count, found the one split whose encodings add up to the round's words. A site now rounds each row's terms
to ``2**-32`` on their own and sums them as integers
(:func:`~ensemble_dask.federated.protocol.secure.encode_exact`).
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np
import pytest

from ensemble_dask.federated.protocol.messages import params_from_message as _params_from
from ensemble_dask.federated.protocol.secure import ROW_TERM_LIMIT, decode_fixed, encode_exact, sum_words
from ensemble_dask.federated.site.data import bce_label_bits, bce_reference_bits
from ensemble_dask.rowblocks.bce import estep_task, fresh_gamma_like, prepare_block

K, N = 12, 4
#: the attack's categories: label 0 of clustering 0 and nothing else, so a site's rows are of two kinds
CATS = [np.array([0])] + [np.array([], dtype=np.int64)] * (N - 1)


def _params(seed, n_categories=1):
    rng = np.random.default_rng(seed)
    beta = rng.uniform(0.1, 1, (K, n_categories))
    return _params_from({"alpha": rng.uniform(0.5, 2, K), "beta": beta}, K)


def site_words(n_label, n_rows, params, n_sites):
    """What a site masks for one E-step round: ``n_label`` of its ``n_rows`` rows carry label 0."""
    labels = np.ones((n_rows, N), dtype=np.int64)
    labels[:n_label, 0] = 0
    block = prepare_block(labels, CATS)
    vec, _ = estep_task(block, fresh_gamma_like(block, K), params, 1e-4, 100, ROW_TERM_LIMIT, True)
    return encode_exact(vec, n_sites=n_sites)


@pytest.mark.parametrize("seed", [1, 2, 3])
def test_a_rounds_total_does_not_tell_two_splits_of_the_same_rows_apart(seed):
    params = _params(seed)
    one = sum_words([site_words(53, 200, params, 2), site_words(74, 200, params, 2)])
    other = sum_words([site_words(64, 200, params, 2), site_words(63, 200, params, 2)])
    np.testing.assert_array_equal(one, other)
    # nor a site's own total its blocks: 127 rows of the label in one block or in three
    three = [site_words(c, n, params, 1) for c, n in ((40, 100), (50, 150), (37, 150))]
    np.testing.assert_array_equal(sum_words(three), site_words(127, 400, params, 1))


def test_the_exact_sums_are_the_float_sums_to_2_to_the_minus_32_a_row():
    labels = np.random.default_rng(0).integers(-1, 3, (300, N))
    cats = [np.unique(col[col >= 0]) for col in labels.T]
    params = _params(1, sum(c.size for c in cats))
    block = prepare_block(labels, cats)
    exact, _ = estep_task(block, fresh_gamma_like(block, K), params, 1e-4, 100, ROW_TERM_LIMIT, True)
    floats, _ = estep_task(block, fresh_gamma_like(block, K), params, 1e-4, 100, ROW_TERM_LIMIT)
    assert exact.dtype == np.int64 and exact.shape == (2, floats.size)
    np.testing.assert_allclose(decode_fixed(encode_exact(exact)), floats, rtol=0, atol=300 * 2.0**-32)


#: six rows of two clusterings (and their reference classes), split among two sites three ways
POOLED = np.array([[0, -1], [1, -1], [2, -1], [900, 5], [3, 6], [4, 7]])
REFERENCE = np.array([0, 1, 1, 2, 70, 3])
SPLITS = ([slice(0, 3), slice(3, 6)], [[0, 3, 4], [1, 2, 5]], [slice(0, 6), slice(0, 0)])


@pytest.mark.parametrize(
    "round_, key, rows", [(bce_label_bits, "labels", POOLED), (bce_reference_bits, "reference", REFERENCE)]
)
def test_the_label_range_rounds_do_not_tell_two_splits_of_the_same_rows_apart(round_, key, rows):
    """The same review: the label-range rounds of a fit without ``n_labels`` (and of the reference classes)
    summed a one-hot of each site's largest label's bit length, so they counted the sites per bit length
    (which site holds no label of a clustering, whose labels are all small). Each site now counts its labels
    of each bit length; the coordinator reads the largest bit length with a count, as before."""
    totals = [sum(round_(SimpleNamespace(data={key: rows[part]})) for part in split) for split in SPLITS]
    for total in totals[1:]:
        np.testing.assert_array_equal(total, totals[0])
    largest = [int(np.flatnonzero(row > 0.5).max()) for row in totals[0].reshape(-1, 64)]
    assert largest == ([10, 3] if key == "labels" else [7])

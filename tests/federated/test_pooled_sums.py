"""What a round's total may depend on: the pooled rows only, never how they are split among the sites.

A review (2026-12-06, the fourth attacker pass) read each site's label counts out of complete secure rounds
of the default policy. The sites summed their E-step statistics in float64, and the exact fixed point kept
each site's roundings: with categories that leave every row of a site one of two kinds, the site's total is
``fl(c * phi)`` for its count ``c`` of one kind, and the coordinator, which knows ``phi`` and the pooled
count, found the one split whose encodings add up to the round's words. A site now rounds each row's terms
to ``2**-32`` on their own and sums them as integers (:func:`~ensemble_dask.federated.secure.encode_exact`).
"""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_dask.federated.rows import _params_from
from ensemble_dask.federated.secure import ROW_TERM_LIMIT, decode_fixed, encode_exact, sum_words
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

"""PCC's memberships of new rows (``consensus/pcc/_predict.py``): each row's own problem against fitted
partners drawn from the seed and its base labels alone."""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_dask.consensus.pcc import DIVERGENCES
from ensemble_dask.consensus.pcc._predict import new_row_memberships


@pytest.fixture(scope="module")
def fitted():
    """Fitted memberships of 900 rows in 3 groups, and their base labels (half of each clustering absent)."""
    rng = np.random.default_rng(0)
    y = np.repeat(np.arange(3), 300)
    labels = np.stack(
        [
            np.where(rng.random(900) < 0.5, -1, (y + (rng.random(900) < 0.1)) % 3 + 3 * (j % 2))
            for j in range(10)
        ],
        axis=1,
    ).astype(np.int32)
    Y = np.full((900, 3), 0.02)
    Y[np.arange(900), y] = 0.96
    new = np.stack([(y + (rng.random(900) < 0.1)) % 3 + 3 * (j % 2) for j in range(10)], axis=1)
    return Y, labels, new.astype(np.int32), y


def _memberships(fitted, base, seed=0):
    Y, labels, _, _ = fitted
    code, closed = DIVERGENCES["kl"]
    return new_row_memberships(Y, labels, base, code=code, closed_form=closed, seed=seed)


def test_new_rows_take_their_groups(fitted):
    *_, new, y = fitted
    M = _memberships(fitted, new)
    np.testing.assert_allclose(M.sum(axis=1), 1.0)
    assert np.mean(M.argmax(axis=1) == y) >= 0.97


def test_a_row_s_memberships_do_not_depend_on_the_other_rows(fitted):
    """The same row, in any block, at any position, with a twin beside it: the same memberships (its partners
    are drawn from the seed and its base labels; on the old code, from the block's generator)."""
    *_, new, _ = fitted
    whole = _memberships(fitted, new)
    perm = np.random.default_rng(1).permutation(new.shape[0])
    np.testing.assert_array_equal(_memberships(fitted, new[perm]), whole[perm])
    parts = np.concatenate([_memberships(fitted, new[a : a + 100]) for a in range(0, new.shape[0], 100)])
    np.testing.assert_array_equal(parts, whole)
    twins = _memberships(fitted, np.repeat(new[:5], 2, axis=0))
    np.testing.assert_array_equal(twins[0::2], twins[1::2])
    assert not np.array_equal(_memberships(fitted, new[:50], seed=1), whole[:50])  # the seed draws them

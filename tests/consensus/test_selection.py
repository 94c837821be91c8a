"""``auto``: the consensus result of highest ANMI with the ensemble (issue 28)."""

from __future__ import annotations

import numpy as np
import pytest
from sklearn.metrics import normalized_mutual_info_score

from ensemble_dask._validation import InputError
from ensemble_dask.coassoc.counting import coassociation
from ensemble_dask.consensus import HBGF, KCC
from ensemble_dask.consensus.pcc import PCC
from ensemble_dask.consensus.selection import AutoConsensus, anmi


@pytest.fixture(scope="module")
def labels():
    """12 clusterings of 400 points in 4 groups, some noisy, a third of each clustering absent."""
    rng = np.random.default_rng(3)
    y = np.repeat(np.arange(4), 100)
    cols = []
    for j in range(12):
        lab = (y + (rng.random(400) < 0.15 * (j % 3)) * rng.integers(1, 4, 400)) % 4 + 4 * (j % 2)
        cols.append(np.where(rng.random(400) < 0.33, -1, lab))
    return np.stack(cols, axis=1)


def test_anmi_is_the_mean_nmi_over_the_rows_each_clustering_labels(labels):
    consensus = np.random.default_rng(0).integers(0, 3, labels.shape[0])
    want = np.mean(
        [
            normalized_mutual_info_score(labels[col >= 0, j], consensus[col >= 0], average_method="geometric")
            for j, col in enumerate(labels.T)
        ]
    )
    assert anmi(consensus, labels) == pytest.approx(want, abs=1e-12)
    assert anmi(consensus, labels, block_rows=37) == pytest.approx(want, abs=1e-12)
    assert anmi(np.zeros(labels.shape[0], dtype=int), labels) == 0.0  # one cluster: no information


def test_auto_keeps_the_candidate_of_highest_anmi(labels):
    pairs = coassociation(labels, strategy="cocluster", seed=0, l=10)
    auto = AutoConsensus(4, candidates=["pcc-kl", "kcc", "hbgf"], random_state=0).fit(labels, pairs)
    assert sorted(auto.scores_) == ["hbgf", "kcc", "pcc-kl"]
    assert auto.scores_[auto.chosen_] == max(auto.scores_.values())
    own = {
        "kcc": lambda: KCC(4, random_state=0).fit(labels),
        "hbgf": lambda: HBGF(4, random_state=0).fit(labels),
        "pcc-kl": lambda: PCC(4, divergence="kl", random_state=0).fit(pairs),
    }
    for name, fit in own.items():  # each score is of the candidate's own result, as fitted alone
        assert auto.scores_[name] == pytest.approx(anmi(fit().labels_, labels))
    np.testing.assert_array_equal(auto.labels_, own[auto.chosen_]().labels_)
    assert auto.memberships_.shape == (400, 4) and auto.effective_k_ == 4


def test_auto_refuses_what_it_cannot_fit(labels):
    with pytest.raises(InputError, match="'candidates' parameter of AutoConsensus names consensus methods"):
        AutoConsensus(4, candidates=["kcc", "kmeans"]).fit(labels)
    with pytest.raises(InputError, match="each once"):
        AutoConsensus(4, candidates=["kcc", "kcc"]).fit(labels)
    with pytest.raises(InputError, match="candidate 'pcc-kl' fits on pairs: give pairs"):
        AutoConsensus(4, candidates=["kcc", "pcc-kl"]).fit(labels)
    with pytest.raises(InputError, match="'n_clusters' parameter of AutoConsensus"):
        AutoConsensus(1).fit(labels)

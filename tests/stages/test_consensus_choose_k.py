"""K chosen in a workflow, by the estimator and on the command line (issue 59): one run, the consensus at
every K of the range on the same base clusterings, every K's scores recorded, the ensemble past k_max."""

from __future__ import annotations

import pytest

from ensemble_dask._validation import InputError
from ensemble_dask.cli._options import print_summary
from ensemble_dask.cli.consensus import n_clusters as cli_n_clusters
from ensemble_dask.io.store import RunStore
from ensemble_dask.pipeline import run_workflow
from ensemble_dask.stages.consensus import check_consensus_params

BLOBS = "synthetic:blobs?n=600&d=5&centers=4&seed=2"


def test_a_range_is_taken_by_the_methods_that_choose_k_only():
    assert check_consensus_params("graph", {"n_clusters": "2:6"})[1]["n_clusters"] == [2, 6]
    assert check_consensus_params("graph", {"n_clusters": "auto"})[1]["n_clusters"] == "auto"
    assert check_consensus_params("graph", {"n_clusters": (3, 5)})[1]["n_clusters"] == [3, 5]
    with pytest.raises(
        InputError, match=r"'pcc-kl': n_clusters=\[2, 6\] asks for K to be chosen.*\['graph'\]"
    ):
        check_consensus_params("pcc-kl", {"n_clusters": [2, 6]})
    with pytest.raises(
        InputError, match=r"'graph': The 'n_clusters' parameter must be an integer >= 2, 'auto'"
    ):
        check_consensus_params("graph", {"n_clusters": [6, 2]})
    with pytest.raises(
        InputError, match=r"of GraphConsensus must be an integer >= 2 or 'auto' or a list or a tuple"
    ):
        check_consensus_params("graph", {"n_clusters": 1.5})


def test_the_command_line_takes_auto_and_a_range():
    import argparse

    assert cli_n_clusters("auto") == "auto" and cli_n_clusters("2:20") == [2, 20] and cli_n_clusters("7") == 7
    with pytest.raises(argparse.ArgumentTypeError, match="K_MIN:K_MAX such as 2:20; got '2-20'"):
        cli_n_clusters("2-20")


@pytest.mark.slow  # a whole workflow on a (threads) cluster
def test_a_workflow_chooses_k_and_records_every_k(capsys):
    url = "memory://choose-k-stage"
    spec = {
        "seed": 1,
        "store": url,
        "data": {"url": BLOBS},
        "generate": {"n_clusterings": 12, "rate": 0.5},
        "consensus": {"graph": {"n_clusters": [2, 7]}},
    }
    metrics = run_workflow(spec, report=False)["methods"]["graph"]
    store = RunStore(url, mode="r")
    # the ensemble reaches past k_max: the generate stage's k range starts at it
    ks = [p["k"] for p in store["labels"].attrs["partitions"]]
    assert min(ks) >= 7
    assert sorted(int(k) for k in metrics["k_scores"]) == list(range(2, 8))
    K = metrics["n_clusters"]
    assert store["consensus/graph/Y"].shape == (600, K) and f"K={K}" in metrics["k_reason"]
    assert metrics["k_criterion"] == "stability" and len(metrics["k_cdf"][str(K)]) == 21
    assert metrics["ARI"] > 0.9 and K == 4
    assert store["consensus/graph"].attrs["metrics"]["n_clusters"] == K
    print_summary({"dataset": {"n": 600}, "methods": {"graph": metrics}})
    assert f"graph: K={K} chosen in [2, 7] by stability" in capsys.readouterr().out


@pytest.mark.slow  # a fit on a (threads) cluster
def test_the_estimator_keeps_the_k_chosen_and_every_k_scores():
    from sklearn.datasets import make_blobs

    from ensemble_dask import ConsensusClustering

    X, y = make_blobs(500, centers=[[0, 0], [8, 0], [0, 8]], random_state=0)
    model = ConsensusClustering((2, 6), n_clusterings=12, random_state=0).fit(X)
    assert model.n_clusters_ == 3 and model.memberships_.shape == (500, 3)
    assert sorted(model.k_scores_) == [2, 3, 4, 5, 6] and "stability" in model.k_scores_[3]
    assert model.predict(X[:20]).shape == (20,)
    refit = model.set_params(n_clusters=3).fit(X)  # a fixed K: no scores of a range left behind
    assert refit.n_clusters_ == 3 and not hasattr(refit, "k_scores_")
    with pytest.raises(InputError, match="asks for K to be chosen"):
        ConsensusClustering("auto", method="kcc", n_clusterings=4).fit(X)

"""The report's figure of a result that chose K: the criteria against K (the K chosen marked) and the
consensus CDF per K, as ConsensusClusterPlus draws them."""

import numpy as np

from ensemble_dask.report import plots


def test_a_result_that_chose_k_draws_the_criteria_and_the_cdfs():
    scores = {
        str(k): {"eigengap": 0.1 * k, "lifetime": float(k == 3), "pac": 0.0, "stability": 1.0 / k,
                 "candidate": "genie-ca", "cut": 0.01 * k}
        for k in range(2, 6)
    }  # fmt: skip
    cdf = {str(k): np.linspace(0.5, 1.0, 21).tolist() for k in range(2, 6)}
    fig = plots.method_figure("graph", Y=np.full((10, 3), 1 / 3), k_scores=scores, k_cdf=cdf, k_chosen=3,
                              k_criterion="lifetime")  # fmt: skip
    titles = [ax.get_title() for ax in fig.axes]
    assert "K chosen: 3 (by lifetime, dashed)" in titles and "consensus CDF per K" in titles
    ax = next(a for a in fig.axes if a.get_title().startswith("K chosen"))
    drawn = {line.get_label(): line for line in ax.get_lines()}
    assert set(drawn) >= {"eigengap", "lifetime", "pac", "stability"} and "cut" not in drawn
    assert drawn["lifetime"].get_linewidth() > drawn["pac"].get_linewidth()
    assert list(drawn["lifetime"].get_ydata()) == [0.0, 1.0, 0.0, 0.0]  # scaled to [0, 1]
    assert any(list(line.get_xdata()) == [3, 3] for line in ax.get_lines())  # the K chosen, marked
    assert len(plots.figure_bytes(fig)) > 1000
    # a result at a fixed K keeps its trace and its pairs' panel
    titles = [ax.get_title() for ax in plots.method_figure("graph", Y=np.full((10, 3), 1 / 3)).axes]
    assert not any(t.startswith("K chosen") or t == "consensus CDF per K" for t in titles)

"""One registry of consensus methods: a method added with one registry line appears in the command line's
help, passes the workflow checks, runs in a workflow and is on the report (issue 26)."""

from __future__ import annotations

from numbers import Integral

import fsspec
import numpy as np
import pytest

from ensemble_dask.consensus import registry
from ensemble_dask.consensus._common.params import Interval, ParamsMixin
from ensemble_dask.consensus.registry import Method


class Toy(ParamsMixin):
    """Cluster ``first base label mod K`` (a point missing from it: cluster 0)."""

    _parameter_constraints = {"n_clusters": [Interval(Integral, 1, None)]}

    def __init__(self, n_clusters=2):
        self.n_clusters = n_clusters

    def fit(self, labels):
        lab = np.maximum(np.asarray(labels)[:, 0], 0) % self.n_clusters
        self.memberships_ = np.eye(self.n_clusters)[lab]
        self.labels_ = lab
        self.uncertainty_ = np.zeros(len(lab))
        self.effective_k_ = len(np.unique(lab))
        return self


@pytest.fixture
def toy():
    method = registry.register(Method("toy", f"{__name__}:Toy", "labels", "a toy method of a test"))
    yield method
    registry.unregister("toy")


@pytest.mark.slow
def test_a_registered_method_is_in_the_help_the_checks_a_workflow_and_the_report(toy, capsys, figures_on):
    from ensemble_dask import pipeline
    from ensemble_dask._workflow_checks import validate_workflow
    from ensemble_dask.cli import main
    from ensemble_dask.io.store import RunStore

    with pytest.raises(SystemExit):
        main(["consensus", "--help"])
    assert "toy      a toy method of a test (labels)" in capsys.readouterr().out

    spec = {
        "seed": 0,
        "store": "memory://registry-toy.zarr",
        "data": {"url": "synthetic:kdd99?n=600&seed=0"},
        "generate": {"n_clusterings": 4, "k_min": 2, "k_max": 4},
        "consensus": {"toy": {"n_clusters": 3}, "other": {"method": "toy", "n_clusters": 2}},
    }
    validate_workflow(spec)
    with pytest.raises(Exception, match=r"toy.*unknown parameter\(s\) \['tol'\]; Toy takes \['n_clusters'\]"):
        validate_workflow({**spec, "consensus": {"toy": {"n_clusters": 3, "tol": 1.0}}})
    with pytest.raises(
        Exception, match=r"'toy': The 'n_clusters' parameter of Toy must be an integer >= 1; got 0"
    ):
        validate_workflow({**spec, "consensus": {"toy": {"n_clusters": 0}}})
    report = pipeline.run_workflow(spec)
    assert set(report["methods"]) == {"toy", "other"}
    store = RunStore(spec["store"], mode="r")
    labels = store["labels"][:, 0]
    np.testing.assert_array_equal(store["consensus/toy/labels"][:], np.maximum(labels, 0) % 3)
    with fsspec.open(report["html"], "r") as fh:
        page = fh.read()
    assert "<td>toy</td>" in page.replace(" ", "") or ">toy<" in page, report["html"]
    # a third-party method's figure, on a store without pairs (figures are on in this test)
    assert "<img src='fig-method-toy.png'" in page and "<img src='fig-method-other.png'" in page
    fs = fsspec.filesystem("memory")
    assert fs.exists("registry-toy.zarr/report/fig-method-toy.png")


def test_an_unknown_method_lists_the_registry():
    with pytest.raises(Exception, match=r"unknown consensus method 'nope'; known: \['auto', 'bce', 'cspa'"):
        registry.get("nope")


def test_a_name_is_registered_once(toy):
    with pytest.raises(ValueError, match="registered already"):
        registry.register(toy)


@pytest.mark.parametrize(
    "fields, message",
    [
        ({"fits_on": "rows"}, "fits_on must be one of"),
        ({"row_blocks": True}, "row_blocks needs a fitter"),
        ({"starts": ("random", "auto")}, "starts are 'auto'"),
    ],
)
def test_a_method_the_stage_cannot_run_is_refused_at_registration(fields, message):
    """Review of issue 26: a plugin's ``row_blocks=True`` was fitted as BCE, and a first start other than
    'auto' was read as 'auto'."""
    entry = {"name": "toy2", "estimator": f"{__name__}:Toy", "fits_on": "labels", "summary": "t", **fields}
    with pytest.raises(ValueError, match=message):
        registry.register(Method(**entry))
    assert "toy2" not in registry.names()

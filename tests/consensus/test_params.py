"""The estimators' declared parameter checks (consensus/_common/params.py): what each accepts is what its
hand-written checks accepted before, and a refusal names the estimator, the parameter and the value."""

from __future__ import annotations

import numpy as np
import pandas as pd
import pytest

from ensemble_dask._validation import InputError
from ensemble_dask.consensus import BCE, GBCE, GKCC, KCC, MM, PCC, PPC, registry

PART = [0, 0, 1, 1, 0, 1]


@pytest.mark.parametrize(
    "est",
    [
        KCC(2, init=pd.DataFrame(np.full((2, 4), 0.5))),  # any array-like, pandas' included
        PCC(2, init=pd.Series(PART)),
        BCE(2, init=pd.Series(PART)),
        MM(2, init=np.str_("spectral")),  # NumPy's strings and integers are strings and integers
        GKCC(2, n_jobs=np.int64(-1)),
        GKCC(2, n_jobs=None),
        BCE(2, warm_start=1),  # never checked: what it was given is what it holds
        BCE(2, tol=float("inf"), e_step_tol=0.0, alpha_init=float("inf")),  # >= 0 as before: inf too
        KCC(2, tol=10**20),  # an int too large for a float is still a number
        GBCE(2, label_weight=pd.Series([1.0, 2.0]), feature_weight=0.5, reg_covar=0.0),
        PPC(3, tol="auto", max_iter=0),
    ],
    ids=lambda est: type(est).__name__,
)
def test_accepted_as_before(est):
    est._validate_params()


@pytest.mark.parametrize(
    "est, message",
    [
        (PCC(2, tol=float("nan")), "The 'tol' parameter of PCC must be 'auto' or a number > 0; got nan"),
        (PCC(2, tol=float("inf")), "The 'tol' parameter of PCC must be 'auto' or a number > 0; got inf"),
        (MM(2, tol=True), "The 'tol' parameter of MM must be a number >= 0; got True"),
        (KCC(1), "The 'n_clusters' parameter of KCC must be an integer >= 2; got 1"),
        (BCE(2, init="kmeans"), "'init' parameter of BCE must be one of 'spectral', 'k-means++', 'random'"),
        (GKCC(2, n_jobs=-2), "'n_jobs' parameter of GKCC must be None or -1 or an integer >= 1; got -2"),
        (PCC(2, random_state=-1), "The 'random_state' parameter of PCC must be None, a non-negative integer"),
        (
            PPC(2, algorithm="em"),
            "'algorithm' parameter of PPC must be one of 'rows', 'baum-eagon'; got 'em'",
        ),
    ],
    ids=lambda v: type(v).__name__ if not isinstance(v, str) else "",
)
def test_refused_naming_the_estimator(est, message):
    with pytest.raises(InputError, match=message.replace("(", r"\(").replace("+", r"\+")):
        est._validate_params()


def test_an_array_is_shown_by_its_shape():
    with pytest.raises(
        InputError, match=r"'n_clusters' parameter of KCC .*got an array of shape \(2,\) and dtype"
    ):
        KCC(np.array([2, 3]))._validate_params()


def test_every_registered_estimator_declares_its_parameters():
    """One validator for all: every parameter of every method's ``__init__`` is declared (warm_start aside,
    which was never checked)."""
    import inspect

    for name in registry.names():
        cls = registry.get(name).estimator_class()
        params = set(inspect.signature(cls.__init__).parameters) - {"self", "warm_start"}
        assert params == set(cls._parameter_constraints), (name, params ^ set(cls._parameter_constraints))


@pytest.mark.parametrize("name", registry.names())
def test_every_estimator_takes_scikit_learns_parameter_protocol(name):
    """``sklearn.base.clone`` (hence grid searches and pipelines) needs ``get_params``; the docs say the
    estimators follow scikit-learn's conventions, and ``clone(BCE(n_clusters=10))`` raised TypeError."""
    from sklearn.base import clone

    cls = registry.get(name).estimator_class()
    est = cls(n_clusters=3, **({"random_state": 7} if "random_state" in cls._get_param_names() else {}))
    copy = clone(est)
    assert copy is not est and copy.get_params() == est.get_params()
    assert repr(copy).startswith(f"{cls.__name__}(n_clusters=3")
    assert copy.set_params(n_clusters=4) is copy and copy.n_clusters == 4 and est.n_clusters == 3
    with pytest.raises(InputError, match=f"{cls.__name__} has no parameter 'k'"):
        copy.set_params(k=4)

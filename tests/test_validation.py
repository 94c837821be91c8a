"""Parameter checks shared by the estimators and stages."""

import numpy as np
import pytest

from ensemble_dask import InputError
from ensemble_dask._validation import check_choice


def test_check_choice_names_an_array_by_its_shape():
    """An array is not compared element-wise with the names (numpy's 'truth value is ambiguous')."""
    with pytest.raises(
        InputError,
        match=r"'divergence' parameter must be one of \['kl', 'l2'\]; got an array of shape \(2,\)",
    ):
        check_choice(np.array(["kl", "l2"]), "divergence", {"kl", "l2"})


def test_check_choice_keeps_the_repr_of_a_scalar():
    with pytest.raises(InputError, match=r"got 'hellinger'"):
        check_choice("hellinger", "divergence", {"kl", "l2"})
    assert check_choice("kl", "divergence", {"kl", "l2"}) == "kl"

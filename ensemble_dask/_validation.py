"""Small input-validation helpers shared by every layer.

Messages always quote the parameter and the offending value, in the style of
scikit-learn's parameter validation (which we do not import: it is private).
"""

from __future__ import annotations

import numbers

import numpy as np

__all__ = [
    "EnsembleDaskError",
    "InputError",
    "check_random_state",
    "check_int",
    "check_rate",
    "check_choice",
    "check_labels_matrix",
    "stage_seed",
    "check_seed",
]

# Each stage draws from its own branch of the run seed's SeedSequence tree, so no two stages
# ever share a random stream: stage_seed(seed, "generate").spawn(N)[u] is clustering u's seed.
_STAGE_KEYS = {"ingest": 1, "generate": 2, "coassoc": 3, "consensus": 4, "federated": 5}


def check_seed(seed, name="seed"):
    """``seed`` as a non-negative int (NumPy's seeds), or :class:`InputError` naming ``name``: one message
    for every place a seed is given (CLI flags, workflow keys, stage and estimator parameters)."""
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"The {name!r} parameter must be a non-negative integer; got {seed!r}")
    return int(seed)


def stage_seed(seed, stage):
    """The :class:`numpy.random.SeedSequence` of ``stage`` under run seed ``seed``."""
    if isinstance(seed, np.random.SeedSequence):
        return seed
    return np.random.SeedSequence(check_seed(seed), spawn_key=(_STAGE_KEYS[stage],))


class EnsembleDaskError(Exception):
    """Base class of the errors raised by ensemble_dask on bad input or state."""


class InputError(EnsembleDaskError, ValueError):
    """Bad user input: a parameter, a file, a column or a value.

    Subclasses ``ValueError`` so callers used to NumPy/scikit-learn conventions can catch it.
    """


def check_random_state(seed):
    """Turn ``seed`` into a :class:`numpy.random.Generator`.

    ``None`` gives fresh OS entropy, an int or a :class:`~numpy.random.SeedSequence`
    seeds a new PCG64 generator, and a Generator is returned as is.
    """
    if isinstance(seed, numbers.Integral) and not isinstance(seed, bool):
        return np.random.default_rng(check_seed(seed, "random_state"))
    if seed is None or isinstance(seed, np.random.SeedSequence):
        return np.random.default_rng(seed)
    if isinstance(seed, np.random.Generator):
        return seed
    raise InputError(f"random_state must be None, an int or a numpy Generator; got {seed!r}")


def check_int(value, name, *, min_value=None, max_value=None):
    """Return ``value`` as int, checking its type and bounds (inclusive)."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise InputError(f"The {name!r} parameter must be an integer; got {value!r}")
    value = int(value)
    if min_value is not None and value < min_value:
        raise InputError(f"The {name!r} parameter must be >= {min_value}; got {value}")
    if max_value is not None and value > max_value:
        raise InputError(f"The {name!r} parameter must be <= {max_value}; got {value}")
    return value


def check_rate(value, name):
    """Check that ``value`` is a real number in (0, 1] and return it as float."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real):
        raise InputError(f"The {name!r} parameter must be a number in (0, 1]; got {value!r}")
    value = float(value)
    if not (0.0 < value <= 1.0):
        raise InputError(f"The {name!r} parameter must be in (0, 1]; got {value}")
    return value


def check_choice(value, name, choices):
    """Check that ``value`` is one of ``choices`` (an array never is, whatever it holds)."""
    try:
        ok = not hasattr(value, "shape") and value in choices
    except TypeError:  # unhashable (a list against a set of names)
        ok = False
    if not ok:
        raise InputError(f"The {name!r} parameter must be one of {sorted(choices)}; got {shown(value)}")
    return value


def convergence_warning():
    """scikit-learn's ``ConvergenceWarning``, the one warning of a fit stopped by its cap: imported when a fit
    warns, not with the package (scikit-learn takes about a second to import, and ``--help`` needs none)."""
    from sklearn.exceptions import ConvergenceWarning

    return ConvergenceWarning


def shown(value):
    """``repr`` of a parameter's value for an error message, an array by its shape and dtype."""
    if hasattr(value, "shape") and hasattr(value, "dtype"):
        return f"an array of shape {tuple(value.shape)} and dtype {value.dtype}"
    return repr(value)


def check_labels_matrix(labels, name="labels"):
    """Validate an ``n x N`` base-labels matrix (``-1`` marks a point absent from a clustering).

    Returns it as a C-contiguous int32 array. Non-integer values, values below -1 and
    matrices without rows or columns are rejected with the offending value and its position.
    """
    arr = np.asarray(labels)
    if arr.ndim != 2:
        raise InputError(f"{name} must be a 2-d array (n points x N clusterings); got shape {arr.shape}")
    if arr.shape[0] == 0 or arr.shape[1] == 0:
        raise InputError(f"{name} must have at least one point and one clustering; got shape {arr.shape}")
    if not np.issubdtype(arr.dtype, np.integer):
        if np.issubdtype(arr.dtype, np.floating):
            bad = ~np.isfinite(arr) | (arr != np.round(arr))
            if bad.any():
                i, j = np.argwhere(bad)[0]
                raise InputError(
                    f"{name} must hold integer cluster ids; got {arr[i, j].item()!r} at row {i}, column {j}"
                )
        else:
            raise InputError(f"{name} must hold integer cluster ids; got dtype {arr.dtype}")
    if arr.size and arr.min() < -1:
        i, j = np.argwhere(arr < -1)[0]
        raise InputError(
            f"{name} values must be >= -1 (-1 marks a missing label); got {arr[i, j]} at row {i}, column {j}"
        )
    if arr.size and arr.max() > np.iinfo(np.int32).max:
        raise InputError(f"{name} values must fit in int32; got {arr.max()}")
    return np.ascontiguousarray(arr, dtype=np.int32)

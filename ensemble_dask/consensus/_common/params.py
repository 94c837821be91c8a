"""The consensus estimators' parameter checks, declared once per class as in scikit-learn.

An estimator lists what each of its parameters accepts in ``_parameter_constraints``; ``fit`` (and the
workflow checks, before any data is read) call :meth:`ParamsMixin._validate_params`, whose message names the
estimator, the parameter, what it accepts and the value given. What depends on the data (``n_clusters``
against the number of points, the shape of an ``init`` array) is checked in ``fit``
(:func:`check_n_clusters`).

>>> from ensemble_dask.consensus import KCC
>>> KCC(n_clusters=1)._validate_params()
Traceback (most recent call last):
...
ensemble_dask._validation.InputError: The 'n_clusters' parameter of KCC must be an integer >= 2; got 1
"""

from __future__ import annotations

import inspect
import math
import numbers
import reprlib

import numpy as np

from ..._validation import InputError, shown

__all__ = ["Interval", "Options", "ParamsMixin", "validate_params", "check_n_clusters"]


class Interval:
    """Numbers of one kind (:class:`numbers.Integral` or :class:`numbers.Real`) between two bounds.

    ``closed`` is ``"both"``, ``"left"``, ``"right"`` or ``"neither"``; a bound of None is unbounded. A
    ``bool`` is never a number here; NaN never is in an interval, and infinity only with ``inf_ok`` (a
    tolerance of ``inf``: stop after one iteration).
    """

    def __init__(self, kind, left, right, *, closed="both", inf_ok=False):
        self.kind, self.left, self.right, self.closed, self.inf_ok = kind, left, right, closed, inf_ok

    def __contains__(self, value):
        if isinstance(value, bool | np.bool_) or not isinstance(value, self.kind):
            return False
        if not isinstance(value, numbers.Integral):  # an integer is finite, however large
            if math.isnan(value) or (math.isinf(value) and not self.inf_ok):
                return False
        lo_ok = self.left is None or (
            value >= self.left if self.closed in ("both", "left") else value > self.left
        )
        hi_ok = self.right is None or (
            value <= self.right if self.closed in ("both", "right") else value < self.right
        )
        return bool(lo_ok and hi_ok)

    def __str__(self):
        what = "an integer" if self.kind is numbers.Integral else "a number"
        lo = "[" if self.closed in ("both", "left") else "("
        hi = "]" if self.closed in ("both", "right") else ")"
        if self.right is None:
            return f"{what} {'>=' if lo == '[' else '>'} {self.left}" if self.left is not None else what
        if self.left is None:
            return f"{what} {'<=' if hi == ']' else '<'} {self.right}"
        return f"{what} in {lo}{self.left}, {self.right}{hi}"


class Options:
    """One of a fixed set of strings, or of special integers such as ``n_jobs=-1`` (NumPy's scalars
    included)."""

    def __init__(self, *values):
        self.values = values

    def __contains__(self, value):
        for v in self.values:
            if isinstance(v, str) and isinstance(value, str) and value == v:
                return True
            if (
                isinstance(v, numbers.Integral)
                and isinstance(value, numbers.Integral)
                and not isinstance(value, bool | np.bool_)
                and value == v
            ):
                return True
        return False

    def __str__(self):
        shown = ", ".join(repr(v) for v in self.values)
        return shown if len(self.values) == 1 else f"one of {shown}"


def _accepts(constraint, value):
    if constraint is None:
        return value is None
    if constraint == "boolean":
        return isinstance(value, bool | np.bool_)
    if constraint == "random_state":
        return (
            value is None
            or isinstance(value, np.random.Generator | np.random.SeedSequence)
            or (isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= 0)
        )
    if constraint == "array-like":  # a list, tuple, NumPy array, pandas Series or DataFrame, ...
        return isinstance(value, list | tuple) or hasattr(value, "__array__")
    if isinstance(constraint, type):
        return isinstance(value, constraint)
    return value in constraint


_NAMES = {
    None: "None",
    "boolean": "true or false",
    "random_state": "None, a non-negative integer or a numpy Generator",
    "array-like": "an array",
}


def _describe(constraint):
    if isinstance(constraint, str) or constraint is None:
        return _NAMES[constraint]
    if isinstance(constraint, type):
        return f"a {constraint.__name__}"
    return str(constraint)


def validate_params(constraints, params, owner):
    """Check ``params`` (a mapping) against ``constraints``; the message names ``owner``, the parameter,
    what it accepts and the value given."""
    for name, accepted in constraints.items():
        value = params[name]
        if not any(_accepts(c, value) for c in accepted):
            want = " or ".join(_describe(c) for c in accepted)
            got = shown(value)
            raise InputError(f"The {name!r} parameter of {owner} must be {want}; got {got[:80]}")


class ParamsMixin:
    """Gives an estimator :meth:`_validate_params` from its class's ``_parameter_constraints``, and
    scikit-learn's parameter protocol (``get_params``, ``set_params``, a ``repr`` of the parameters set), so
    that ``sklearn.base.clone``, grid searches and pipelines take it (without importing scikit-learn here).

    >>> from ensemble_dask.consensus import BCE
    >>> BCE(n_clusters=10, random_state=0)
    BCE(n_clusters=10, random_state=0)
    >>> BCE(n_clusters=10).set_params(max_iter=50).get_params()["max_iter"]
    50
    """

    _parameter_constraints: dict = {}

    @classmethod
    def _get_param_names(cls):
        """The parameters of ``__init__`` (every one is kept as an attribute of the same name)."""
        params = inspect.signature(cls.__init__).parameters.values()
        return sorted(
            p.name for p in params if p.name != "self" and p.kind not in (p.VAR_POSITIONAL, p.VAR_KEYWORD)
        )

    def get_params(self, deep=True):
        """The estimator's parameters, ``{name: value}`` (``deep`` is accepted, as scikit-learn's)."""
        return {name: getattr(self, name) for name in self._get_param_names()}

    def set_params(self, **params):
        """Set parameters by name; returns the estimator. An unknown name is refused."""
        names = self._get_param_names()
        for name, value in params.items():
            if name not in names:
                raise InputError(f"{type(self).__name__} has no parameter {name!r}; its parameters: {names}")
            setattr(self, name, value)
        return self

    def __repr__(self):
        defaults = {p.name: p.default for p in inspect.signature(type(self).__init__).parameters.values()}
        shown_ = []
        for name in inspect.signature(type(self).__init__).parameters:
            if name not in defaults or name == "self" or not hasattr(self, name):
                continue
            value = getattr(self, name)
            if _same(value, defaults[name]):
                continue
            text = f"<array {value.shape}>" if isinstance(value, np.ndarray) else reprlib.repr(value)
            shown_.append(f"{name}={text}")
        return f"{type(self).__name__}({', '.join(shown_)})"

    def _validate_params(self):
        """Check every parameter of ``__init__`` against the class's constraints (no data needed)."""
        validate_params(
            self._parameter_constraints,
            {name: getattr(self, name) for name in self._parameter_constraints},
            type(self).__name__,
        )


def _same(value, default):
    """Whether a parameter's value is its default (for the ``repr``): arrays never are."""
    if value is default:
        return True
    if isinstance(value, np.ndarray) or isinstance(default, np.ndarray):
        return False
    try:
        return type(value) is type(default) and bool(value == default)
    except (TypeError, ValueError):
        return False


def check_n_clusters(est, n):
    """``est.n_clusters`` (validated already) as an int, at most the ``n`` points ``est`` is fitted on."""
    k = int(est.n_clusters)
    if k > n:
        raise InputError(
            f"The 'n_clusters' parameter of {type(est).__name__} must be <= n_samples={n}; got {k}"
        )
    return k

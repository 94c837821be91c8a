"""The consensus stage's side of choosing K: ``n_clusters`` checked as a K or a range, and the record of the K
chosen (which, by what criterion, why, and every K's scores and consensus CDF)."""

from __future__ import annotations

import numbers

from .._validation import InputError
from ..consensus import registry
from ..consensus._common.krange import is_k_range, k_range

__all__ = ["checked_k", "k_metrics"]


def checked_k(name, method, k):
    """``n_clusters`` of the workflow entry ``name`` (method ``method``): an integer ``K >= 2``, or
    ``"auto"`` or a range ``[k_min, k_max]`` (a string ``"k_min:k_max"`` becomes the list) for a method that
    chooses K."""
    chooses = registry.get(method).chooses_k
    if is_k_range(k):
        if not chooses:
            choosers = [m for m in registry.names() if registry.get(m).chooses_k]
            raise InputError(
                f"consensus method {name!r}: n_clusters={k!r} asks for K to be chosen, which the method(s) "
                f"{choosers} do; give {method} an integer K"
            )
        try:
            return k if k == "auto" else list(k_range(k))
        except InputError as exc:
            raise InputError(f"consensus method {name!r}: {exc}") from None
    if not isinstance(k, numbers.Integral) or isinstance(k, bool) or k < 2:
        raise InputError(
            f"consensus method {name!r}: The 'n_clusters' parameter must be an integer >= 2 (one cluster is "
            f"no clustering){', auto or a range [k_min, k_max]' if chooses else ''}; got {k!r}"
        )
    return k


def k_metrics(est):
    """The metrics of a fit that chose K (``{}`` for one at a fixed K): ``n_clusters``, ``k_criterion``,
    ``k_reason``, ``k_scores`` (per K, as a string) and ``k_cdf``."""
    if getattr(est, "k_scores_", None) is None:
        return {}
    return {
        "n_clusters": int(est.n_clusters_),
        "k_criterion": est.k_criterion,
        "k_reason": est.k_reason_,
        "k_scores": {
            str(k): {c: round(v, 6) if isinstance(v, float) else v for c, v in s.items()}
            for k, s in est.k_scores_.items()
        },
        "k_cdf": {str(k): [round(v, 5) for v in c] for k, c in est.k_cdf_.items()},
    }

"""What a site agent runs for BCE and KCC: the coordinator's arguments checked, then the site functions.

Each entry of :data:`CALLS` (answers that carry nothing about rows) and :data:`SUMS` (one statistics
vector, masked by the agent) checks the arguments against the session (types, shapes, ranges, finite
values) and runs the matching site function of :mod:`.rows` (BCE's E-step, KCC's Lloyd step over the row
blocks) or :mod:`.data` (the counts and the contingency table) on the session's rows.
Paths never come from the coordinator: the agent passes its own config's output and checkpoint.
"""

from __future__ import annotations

import numpy as np

from ..._validation import EnsembleDaskError
from ..protocol.wire import CANNOT_RESUME
from .config import shown

__all__ = ["CALLS", "SUMS", "Refused"]

_MAX_K = 10_000
_MAX_LABEL_SPACE = 1 << 24  # entries of any vector a site computes, and of its categories
_MAX_LABEL = (1 << 31) - 1
_MAX_PARAM = 1e12  # BCE's alpha and beta: far above any fit's, far below the fixed point's range
_MAX_E_STEP_ITER = 1000
_RUN_KEY_CHARS = set("0123456789abcdef")


class Refused(EnsembleDaskError):
    """A request the site refuses (the coordinator gets the message; the audit log gets a line, with
    ``detail`` when the reason holds what stays at the site: its paths, its values)."""

    def __init__(self, message, detail=None, code=None):
        super().__init__(message)
        self.detail = detail
        self.code = code  # a reason the coordinator acts on (wire.CANNOT_RESUME: it then fits afresh)


# --------------------------------------------------------------------------- argument checks


def _array(value, what, *, dtype=np.float64, ndim=1, shape=None, finite=True, min_value=None, max_value=None):
    if not isinstance(value, np.ndarray):
        raise Refused(f"{what} must be an array; got {type(value).__name__}")
    if value.ndim != ndim or (shape is not None and value.shape != tuple(shape)):
        raise Refused(f"{what} must have shape {tuple(shape) if shape else f'{ndim}-d'}; got {value.shape}")
    if np.dtype(dtype).kind == "f":
        if value.dtype.kind not in "fiu":
            raise Refused(f"{what} must be numbers; got {value.dtype}")
        value = value.astype(np.float64)
        if finite and not np.isfinite(value).all():
            raise Refused(f"{what} holds non-finite values")
    elif value.dtype.kind != "i":  # signed: unsigned differences wrap (a sorted check would pass 2**64 - 1)
        raise Refused(f"{what} must be signed integers; got {value.dtype}")
    if min_value is not None and value.size and value.min() < min_value:
        raise Refused(f"{what} holds a value below {min_value}")
    if max_value is not None and value.size and value.max() > max_value:
        raise Refused(f"{what} holds a value above {max_value}")
    return value


def _int(value, what, lo, hi):
    if not isinstance(value, int) or isinstance(value, bool) or not lo <= value <= hi:
        raise Refused(f"{what} must be an integer in [{lo}, {hi}]; got {shown(value)}")
    return value


def _float(value, what, lo, hi):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not np.isfinite(value):
        raise Refused(f"{what} must be a finite number; got {shown(value)}")
    if not lo <= value <= hi:
        raise Refused(f"{what} must be in [{lo}, {hi}]; got {shown(value)}")
    return float(value)


def _args(args, n, op):
    if not isinstance(args, list) or len(args) != n:
        raise Refused(f"operation {shown(op)} takes {n} argument(s); got {shown(args)}")
    return args


# --------------------------------------------------------------------------- BCE and KCC at the site
# Each entry checks the coordinator's arguments against the session, then runs the site function of
# .rows / .data on the session's rows. Calls return nothing about the rows; sums return a vector.


def _limit(value, what, limit, key):
    """Refuse ``value`` above the site's ``limits.<key>`` (its own config; the audit log gets the line)."""
    if value > limit:
        raise Refused(f"{what} = {value} is over this site's limit of {limit} (limits.{key} in its config)")
    return value


def _categories(value, st, limits):
    n_clusterings = st.data["n_clusterings"]
    if not isinstance(value, list) or len(value) != n_clusterings:
        raise Refused(f"categories must be a list of {n_clusterings} integer arrays")
    cats = [
        _array(c, f"categories[{j}]", dtype=np.int64, min_value=0, max_value=_MAX_LABEL).astype(np.int64)
        for j, c in enumerate(value)
    ]
    if sum(c.size for c in cats) > _MAX_LABEL_SPACE or any(np.any(np.diff(c) <= 0) for c in cats):
        raise Refused("categories must be sorted distinct labels, at most 2**24 in all")
    if not any(c.size for c in cats):  # the kernels index category 0 for a missing entry (times 0)
        raise Refused("categories must hold at least one label")
    _limit(sum(c.size for c in cats), "categories", limits.max_categories, "max_categories")
    return cats


def _k(k, st, limits):
    k = _int(k, "k", 1, min(_MAX_K, max(st.data["labels"].shape[0], 1)))
    return _limit(k, "k", limits.max_k, "max_k")


def _need(st, key, what):
    if key not in st.data:
        raise Refused(f"{what} needs the session's rows prepared first")


def _check_state(agent, st, k):
    """What a session keeps is rows x k entries: bounded by the site's own config, on the row count the site
    told at join (the refusal depends on nothing else)."""
    rows, cap = st.data["labels"].shape[0], agent.config.max_state_entries
    if rows * k > cap:
        raise Refused(f"rows x k = {rows} x {k} is over this site's max_state_entries ({cap}, its config)")


def _bce_prepare(agent, st, args):
    from .rows import bce_prepare, scatter_rows

    cats, k, run_key, resume = _args(args, 4, "prepare")
    if "labels" not in st.data:
        raise Refused("the session's rows are already prepared")
    cats = _categories(cats, st, agent.config.limits)
    k = _k(k, st, agent.config.limits)
    if k * sum(c.size for c in cats) > _MAX_LABEL_SPACE:
        raise Refused(f"k x categories = {k} x {sum(c.size for c in cats)} is over 2**24")
    if not isinstance(run_key, str) or len(run_key) != 16 or not set(run_key) <= _RUN_KEY_CHARS:
        raise Refused(f"run_key must be 16 hex digits; got {shown(run_key)}")
    _check_state(agent, st, k)  # gamma, the best start, their checkpoints: rows x k each
    if resume is not None:
        resume = _resume(resume)
        if not agent.config.checkpoint:
            # resumed beside peers that load theirs, fresh rows here would sum apart from them
            raise Refused(
                "this site keeps no checkpoints (no 'checkpoint' in its config): it cannot resume",
                code=CANNOT_RESUME,
            )
    st.data["categories"] = cats
    scatter_rows(st, st.data.pop("labels"), agent.config.compute.get("block_rows"))
    held = {s.data["ckpt_run"] for s in agent.sessions.values() if "ckpt_run" in s.data}
    bce_prepare(
        st, cats, k, agent.config.checkpoint, run_key, resume, keep_runs=agent.config.max_sessions, held=held
    )


def _resume(resume):
    """``[start, iteration, tag, best start, tag]`` checked: an iteration or a best start may be null, and its
    tag (``<session>-<round>``, :data:`~.rows.TAG_RE`) is given with it and only with it."""
    from .rows import TAG_RE

    what = "resume must be [start, iteration or null, its tag or null, best start or null, its tag or null]"
    if not isinstance(resume, list) or len(resume) != 5:
        raise Refused(what)
    init, t, tag, best_init, best_tag = resume
    if init is None:
        raise Refused("resume needs its start")
    ints = [None if v is None else _int(v, "resume", 0, 1 << 30) for v in (init, t, best_init)]
    for value, v_tag in ((t, tag), (best_init, best_tag)):
        if (value is None) != (v_tag is None) or not (
            v_tag is None or (isinstance(v_tag, str) and TAG_RE.fullmatch(v_tag))
        ):
            raise Refused(f"{what}; a tag is <session>-<round>, given with its iteration or start")
    return [ints[0], ints[1], tag, ints[2], best_tag]


def _bce_params(value, st):
    k = st.data["k"]
    if not isinstance(value, dict) or set(value) != {"alpha", "beta"}:
        raise Refused("params must be {'alpha', 'beta'}")
    alpha = _array(value["alpha"], "alpha", shape=(k,), max_value=_MAX_PARAM)
    beta = _array(
        value["beta"], "beta", ndim=2, shape=(k, st.n_categories), min_value=0.0, max_value=_MAX_PARAM
    )
    if alpha.min() <= 0:
        raise Refused("alpha must be positive")
    from ..protocol.messages import params_from_message

    return params_from_message({"alpha": alpha, "beta": beta}, k)


def _bce_estep(agent, st, args):
    from .rows import bce_estep

    _need(st, "estep", "the E-step")
    params, init, t, tol, max_iter = _args(args, 5, "estep")
    limits = agent.config.limits
    tol = _float(tol, "e_step_tol", 0.0, 1.0)
    if tol < limits.e_step_min_tol:
        raise Refused(
            f"e_step_tol = {tol} is below this site's limit of {limits.e_step_min_tol} "
            "(limits.e_step_min_tol in its config)"
        )
    max_iter = _int(max_iter, "e_step_max_iter", 1, _MAX_E_STEP_ITER)
    _limit(max_iter, "e_step_max_iter", limits.e_step_max_iter, "e_step_max_iter")
    return bce_estep(
        st, _bce_params(params, st), _int(init, "init", 0, 1 << 20), _int(t, "t", 0, 1 << 30), tol, max_iter
    )


def _bce_reset(agent, st, args):
    from .rows import bce_reset

    _args(args, 0, "reset")
    _need(st, "estep", "reset")
    bce_reset(st)


def _bce_promote(agent, st, args):
    from .rows import bce_promote

    (init,) = _args(args, 1, "promote")
    _need(st, "estep", "promote")
    bce_promote(st, _int(init, "init", 0, 1 << 20))


def _bce_finish(agent, st, args):
    from .rows import bce_finish

    _args(args, 0, "finish")
    if st.data.get("best") is None:
        raise Refused("finish needs a start promoted first")
    bce_finish(st, agent.config.output, agent.config.storage_options)


def _label_bits(agent, st, args):
    from .data import bce_label_bits

    _args(args, 0, "label_bits")
    if "labels" not in st.data:
        raise Refused("label_bits comes before the rows are prepared")
    return bce_label_bits(st)


def _label_counts(agent, st, args):
    from .data import bce_label_counts

    (sizes,) = _args(args, 1, "label_counts")
    if "labels" not in st.data:
        raise Refused("label_counts comes before the rows are prepared")
    n_clusterings = st.data["n_clusterings"]
    if not isinstance(sizes, list) or len(sizes) != n_clusterings:
        raise Refused(f"sizes must be a list of {n_clusterings} integers")
    sizes = [_int(s, "sizes[j]", 1, _MAX_LABEL_SPACE) for s in sizes]
    if sum(sizes) > _MAX_LABEL_SPACE:
        raise Refused("sizes add up to more than 2**24")
    return bce_label_counts(st, sizes)


def _reference_bits(agent, st, args):
    from .data import bce_reference_bits

    _args(args, 0, "reference_bits")
    if "reference" not in st.data:
        raise Refused(f"site {st.name!r} holds no reference labels")
    return bce_reference_bits(st)


def _contingency(agent, st, args):
    from .data import bce_contingency

    (n_classes,) = _args(args, 1, "contingency")
    if "reference" not in st.data or "labels_" not in st.data:
        raise Refused("contingency needs reference labels and finished memberships")
    n_classes = _int(n_classes, "n_classes", 1, 1 << 16)
    if st.data["k"] * n_classes > _MAX_LABEL_SPACE:
        raise Refused(f"a contingency table of {st.data['k']} x {n_classes} is over 2**24 entries")
    return bce_contingency(st, n_classes)


def _kcc_prepare(agent, st, args):
    from .rows import kcc_prepare, scatter_rows

    cats, k = _args(args, 2, "prepare")
    if "labels" not in st.data:
        raise Refused("the session's rows are already prepared")
    cats = _categories(cats, st, agent.config.limits)
    k = _k(k, st, agent.config.limits)
    if k * sum(c.size for c in cats) > _MAX_LABEL_SPACE:
        raise Refused(f"k x categories = {k} x {sum(c.size for c in cats)} is over 2**24")
    _check_state(agent, st, k)  # the memberships it writes at the end: rows x K
    st.data.update(categories=cats, k=k)  # every check passed: a refused prepare leaves nothing behind
    scatter_rows(st, st.data.pop("labels"), agent.config.compute.get("block_rows"))
    kcc_prepare(st, st.data["categories"])


def _kcc_centroids(MT, st):
    """The centroids (label distributions: entries in [0, 1], each clustering's block summing to at most 1)
    and their block norms, which the site computes itself from them (the coordinator sends none). So a row's
    squared error is at most twice the clusterings, whatever centroids are sent (see
    :func:`~ensemble_dask.federated.protocol.secure.rows_in_range`)."""
    from ...consensus.kcc._blocks import block_norms, block_sums

    G, K = st.n_categories, st.data["k"]
    MT = _array(MT, "centroids", ndim=2, shape=(G, K), min_value=0.0, max_value=1.0)
    offsets = np.concatenate([[0], np.cumsum([len(c) for c in st.data["categories"]])])
    if block_sums(MT, offsets).max(initial=0.0) > 1.0 + 1e-9:  # an empty block sums to 0
        raise Refused("each clustering's block of a centroid must sum to at most 1 (a label distribution)")
    return MT, block_norms(MT, offsets)


def _kcc_reset(agent, st, args):
    from .rows import kcc_reset

    _args(args, 0, "reset")
    _need(st, "backend", "reset")
    kcc_reset(st)


def _kcc_sizes(agent, st, args):
    from .rows import kcc_sizes

    (n_categories,) = _args(args, 1, "kcc_sizes")
    _need(st, "backend", "kcc_sizes")
    return kcc_sizes(st, _int(n_categories, "n_categories", st.n_categories, st.n_categories))


def _kcc_cooccurrence(agent, st, args):
    from .rows import kcc_cooccurrence

    chosen, n_categories = _args(args, 2, "kcc_cooccurrence")
    _need(st, "backend", "kcc_cooccurrence")
    G = _int(n_categories, "n_categories", st.n_categories, st.n_categories)
    chosen = _array(chosen, "chosen", dtype=np.int64, shape=(st.data["k"],), min_value=0)
    if chosen.size and chosen.max() >= G:
        raise Refused(f"chosen categories must be below {G}")
    return kcc_cooccurrence(st, chosen.astype(np.int64), G)


def _kcc_step(agent, st, args):
    from .rows import kcc_step

    (MT,) = _args(args, 1, "kcc_step")
    _need(st, "backend", "kcc_step")
    return kcc_step(st, *_kcc_centroids(MT, st))


def _kcc_finish(agent, st, args):
    from .rows import kcc_finish

    (MT,) = _args(args, 1, "finish")
    _need(st, "backend", "finish")
    kcc_finish(st, *_kcc_centroids(MT, st), agent.config.output, agent.config.storage_options)


CALLS = {
    "bce": {"prepare": _bce_prepare, "reset": _bce_reset, "promote": _bce_promote, "finish": _bce_finish},
    "kcc": {"prepare": _kcc_prepare, "reset": _kcc_reset, "finish": _kcc_finish},
}
_COMMON_SUMS = {
    "label_bits": _label_bits,
    "label_counts": _label_counts,
    "reference_bits": _reference_bits,
    "contingency": _contingency,
}
SUMS = {
    "bce": {**_COMMON_SUMS, "estep": _bce_estep},
    "kcc": {
        **_COMMON_SUMS,
        "kcc_sizes": _kcc_sizes,
        "kcc_cooccurrence": _kcc_cooccurrence,
        "kcc_step": _kcc_step,
    },
}

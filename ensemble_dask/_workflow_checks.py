"""Checks of a whole workflow before its first stage runs.

Every section's parameters are validated as far as they do not depend on the data: unknown keys
(named with the section, with the known ones listed), types, ranges and choices. A workflow with a
bad value then fails in a second, before ingest, generate or coassoc have run (and been marked
complete), instead of after them. Checks that need the data stay with the stages (``k_max`` against the
subsample size, at the start of generate), except :func:`check_against_data`, which the workflow runs
once ingest knows ``n``, before generate and coassoc.

Sits between the stages and :mod:`ensemble_dask.pipeline`: it imports the stages' own validators
so that the rules live in one place.
"""

from __future__ import annotations

import inspect
import math
import numbers

from ._validation import InputError, check_choice, check_int, check_rate
from .coassoc.sampling import _STRATEGY_PARAMS, STRATEGIES, _make_sampler
from .consensus._common.krange import is_k_range, k_range
from .partitions.clusterers import plan_ensemble, resolve_k_max
from .stages.coassoc import coassoc_stage
from .stages.consensus import check_consensus_params
from .stages.generate import generate_params
from .stages.ingest import ingest_params

__all__ = ["STRATEGY_PARAMS", "check_against_data", "validate_workflow"]

#: strategy -> the parameters it takes (and their defaults)
STRATEGY_PARAMS = {k: dict(v) for k, v in _STRATEGY_PARAMS.items()}

_COUNT_MODES = ("auto", "rows", "join")


def _keywords(func, skip=()):
    """Keyword parameters of ``func`` (not ``*args``/``**kwargs``, not those in ``skip``)."""
    return [
        k
        for k, prm in inspect.signature(func).parameters.items()
        if prm.kind in (prm.POSITIONAL_OR_KEYWORD, prm.KEYWORD_ONLY) and k not in skip
    ]


def _check_keys(section, given, known):
    unknown = sorted(set(given) - set(known), key=str)
    if unknown:
        raise InputError(
            f"workflow section {section!r}: unknown key(s) {unknown}; known keys: {sorted(known)}"
        )


def _mapping(spec, section):
    value = spec.get(section)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise InputError(f"workflow section {section!r} must be a mapping of parameters; got {value!r}")
    return dict(value)


def _in_section(section, check, *args, **kwargs):
    """Run ``check``; an error it raises is prefixed with the workflow section it concerns."""
    try:
        return check(*args, **kwargs)
    except InputError as exc:
        raise InputError(f"workflow section {section!r}: {exc}") from None


def _check_data(spec):
    data = dict(spec["data"])
    url = data.pop("url")
    if not isinstance(url, str) or not url:
        raise InputError(f"workflow section 'data': 'url' must be a non-empty string; got {url!r}")
    reader_keys = _keywords(ingest_params, skip=("url",))
    _check_keys("data", data, ["url", "storage_options", "overwrite", *reader_keys])
    opts = data.pop("storage_options", None)
    if opts is not None and not isinstance(opts, dict):
        raise InputError(f"workflow section 'data': 'storage_options' must be a mapping; got {opts!r}")
    overwrite = data.pop("overwrite", False)
    if not isinstance(overwrite, bool):
        raise InputError(f"workflow section 'data': 'overwrite' must be true or false; got {overwrite!r}")
    for key in ("classes", "categorical", "drop", "columns"):
        if isinstance(data.get(key), str):
            raise InputError(f"workflow section 'data': {key!r} must be a list; got {data[key]!r}")
    _in_section("data", ingest_params, url, **data)


def _check_generate(spec, seed):
    gen = _mapping(spec, "generate")
    if gen is None:
        return
    replace = gen.pop("replace_imported", False)
    if not isinstance(replace, bool):
        raise InputError(
            f"workflow section 'generate': 'replace_imported' must be true or false; got {replace!r}"
        )
    _check_keys("generate", gen, _keywords(generate_params))
    gen.setdefault("seed", seed)
    _in_section("generate", check_int, gen["seed"], "seed", min_value=0)
    p = _in_section("generate", generate_params, **gen)
    # plan_ensemble's own checks, on the smallest data set its parameters allow (a subsample of
    # k_max points): what fails there fails for every n, and what passes can only fail on the data
    rate = _in_section("generate", check_rate, p["rate"], "rate")
    k_min = _in_section("generate", check_int, p["k_min"], "k_min", min_value=2)
    # "sqrt" is floor(sqrt(n)) (n up to 20,000), at least k_min: checked on a subsample of k_min points
    k_max = _in_section("generate", resolve_k_max, 2, k_min, k_min if p["k_max"] == "sqrt" else p["k_max"])
    algorithms = p["algorithms"]
    if algorithms is not None and not all(isinstance(a, str) for a in algorithms):
        raise InputError(
            f"workflow section 'generate': 'algorithms' must be a list of names; got {algorithms!r}"
        )
    n = max(2, math.ceil(k_max / rate))
    _in_section("generate", plan_ensemble, n, 1, **{k: v for k, v in p.items() if k != "n_clusterings"})


def _check_coassoc(spec, seed):
    co = _mapping(spec, "coassoc")
    if co is None:
        return
    strategy = co.pop("strategy", "auto")
    _in_section("coassoc", check_choice, strategy, "strategy", ("auto", *STRATEGIES))
    if strategy == "auto":  # cocluster or per-point, by the size of the labels: both take l alone
        strategy = "per-point"
    stage_keys = _keywords(coassoc_stage, skip=("store", "client"))
    params = {k: co.pop(k) for k in list(co) if k not in stage_keys}
    if set(params) - set(STRATEGY_PARAMS[strategy]):
        others = sorted(
            k
            for k in set(params) - set(STRATEGY_PARAMS[strategy])
            if any(k in v for v in STRATEGY_PARAMS.values())
        )
        hint = (
            f"; {others} belong(s) to another strategy (a --set coassoc.strategy=... override drops them)"
            if others
            else ""
        )
        raise InputError(
            "workflow section 'coassoc': unknown key(s) "
            f"{sorted(set(params) - set(STRATEGY_PARAMS[strategy]))} "
            f"for strategy {strategy!r}; known keys: "
            f"{sorted(set(stage_keys) | set(STRATEGY_PARAMS[strategy]))}" + hint
        )
    s = co.get("seed", seed)
    if isinstance(s, bool) or not isinstance(s, numbers.Integral) or s < 0:
        raise InputError(f"workflow section 'coassoc': 'seed' must be a non-negative integer; got {s!r}")
    # 'l' must stay below n: probe with a data set large enough for any l ('full' with the smallest)
    n = 2 if strategy == "full" else 2**62
    block_size = co.get("block_size", 4096)
    _in_section("coassoc", _make_sampler, strategy, n, 0, block_size, params)
    _in_section("coassoc", check_choice, co.get("count_mode", "auto"), "count_mode", _COUNT_MODES)
    for key in ("row_block", "nnz_chunk"):
        if co.get(key) is not None:
            _in_section("coassoc", check_int, co[key], key, min_value=1)
    if co.get("spill", "auto") not in ("auto", True, False):
        raise InputError(
            f"workflow section 'coassoc': 'spill' must be 'auto', true or false; got {co['spill']!r}"
        )


def _check_consensus(spec, seed):
    consensus = spec.get("consensus")
    if consensus is None:
        return
    if not isinstance(consensus, dict):
        raise InputError(
            f"workflow section 'consensus' must map method names to parameters; got {consensus!r}"
        )
    for name, params in consensus.items():
        check_consensus_params(name, params, seed=seed)


def validate_workflow(spec):
    """Check every section of a (non-federated) workflow without running anything.

    Raises
    ------
    InputError
        Naming the section, the key and the value, and listing the known keys where one is unknown.
    """
    seed = spec.get("seed", 0)
    if isinstance(seed, bool) or not isinstance(seed, numbers.Integral) or seed < 0:
        raise InputError(f"workflow key 'seed' must be a non-negative integer; got {seed!r}")
    dask = spec.get("dask") or {}
    if dask.get("n_workers") is not None:
        check_int(dask["n_workers"], "dask.n_workers", min_value=1)
    if dask.get("threads_per_worker") is not None:
        check_int(dask["threads_per_worker"], "dask.threads_per_worker", min_value=1)
    for key in ("store", "scheduler"):
        if spec.get(key) is not None and not isinstance(spec[key], str):
            raise InputError(
                f"workflow key {key!r} must be a string (a URL or an address); got {spec[key]!r}"
            )
    if spec.get("storage_options") is not None and not isinstance(spec["storage_options"], dict):
        raise InputError(f"workflow key 'storage_options' must be a mapping; got {spec['storage_options']!r}")
    _check_data(spec)
    _check_generate(spec, int(seed))
    _check_coassoc(spec, int(seed))
    _check_consensus(spec, int(seed))


def check_against_data(spec, n):
    """The checks of a validated workflow that need the number of points ``n`` (known after ingest).

    A consensus method asked for more clusters than there are points would otherwise fail only after
    generate and coassoc have run.
    """
    for name, params in (spec.get("consensus") or {}).items():
        k = (params or {}).get("n_clusters")
        if is_k_range(k):  # "auto", or [k_min, k_max] with k_max < n
            if n is not None:
                try:
                    k_range(k, n)
                except InputError as exc:
                    raise InputError(f"consensus method {name!r}: {exc}") from None
            continue
        if k is not None and n is not None and int(k) > n:
            raise InputError(
                f"consensus method {name!r}: The 'n_clusters' parameter must be <= n={n} (the data set's "
                f"points); got {k}"
            )

"""Workflows: a YAML spec naming the data, the store, the cluster and each stage's parameters.

A workflow is run stage by stage on one run store; each stage is skipped when its record in the
store matches (see :mod:`ensemble_dask.io.store`), so a re-run resumes where a killed run stopped.

Workflow keys (all but ``data`` optional)::

    name: demo
    seed: 0                       # the one seed every random choice flows from
    store: runs/demo.zarr         # run store URL (local path, file://, memory://, s3://)
    storage_options: {}           # fsspec options of the store
    scheduler: null               # address of an existing Dask scheduler; null = embedded LocalCluster
    dask: {n_workers: null, threads_per_worker: 1}
    data: {url: ..., storage_options: {}, schema: kdd99, classes: [...], subset: 120000, ...}
    generate: {n_clusterings: 100, ensemble: type1, k_min: 2, k_max: 10, rate: 0.5}
    coassoc: {strategy: uniform, p: 0.00025}   # or per-point / cocluster with l, full with max_n
    consensus:                                 # one entry per method, see consensus_stage
      pcc-kl: {n_clusters: 3}
      pcc-l2: {n_clusters: 3}
"""

from __future__ import annotations

import contextlib
import copy
import functools
import logging
import os
import tempfile
from pathlib import Path

import yaml

from ._config import flag
from ._validation import InputError
from ._workflow_checks import STRATEGY_PARAMS, check_against_data, validate_workflow
from .io.store import RunStore, workflow_store_url
from .runtime.clients import LazyClient, cluster_facts, dask_client
from .runtime.probe import probe_scheduler
from .runtime.progress import elapsed_line

__all__ = [
    "load_workflow",
    "removed_if_left_empty",
    "apply_overrides",
    "validate_workflow",
    "run_workflow",
    "write_report",
    "client_for_store",
    "open_store",
]

logger = logging.getLogger(__name__)

TOP_KEYS = {
    "name",
    "seed",
    "store",
    "storage_options",
    "scheduler",
    "dask",
    "data",
    "generate",
    "coassoc",
    "consensus",
    "federated",
    "site_storage_options",
}
DASK_KEYS = {"n_workers", "threads_per_worker"}


def check_report_settings(store):
    """See :func:`ensemble_dask.stages.report.check_report_settings` (run before a command's stages)."""
    from .stages.report import check_report_settings as _check  # the stages import scikit-learn: when used

    _check(store)


def write_report(store, progress=False):
    """Write ``report/metrics.json`` (see :func:`ensemble_dask.stages.report.write_report`); ``progress``: a
    line on a terminal counts its time (the figures take seconds)."""
    from .stages.report import write_report as _write_report  # the stages import scikit-learn: only when used

    with elapsed_line("report", progress=progress):
        return _write_report(store)


def load_workflow(path):
    """Read a workflow YAML file into a dict (unknown keys are an error)."""
    path = Path(path)
    if not path.exists():
        raise InputError(f"workflow file {str(path)!r} does not exist")
    try:
        spec = yaml.safe_load(path.read_text()) or {}
    except yaml.YAMLError as exc:
        raise InputError(f"workflow file {str(path)!r} is not valid YAML: {exc}") from exc
    if not isinstance(spec, dict):
        raise InputError(f"workflow file {str(path)!r} must hold a mapping at the top level")
    check_workflow(spec, source=str(path))
    return spec


def check_workflow(spec, source="workflow"):
    unknown = set(spec) - TOP_KEYS
    if unknown:
        raise InputError(f"{source}: unknown key(s) {sorted(unknown)}; known keys: {sorted(TOP_KEYS)}")
    unknown = set(spec.get("dask") or {}) - DASK_KEYS
    if unknown:
        raise InputError(f"{source}: unknown key(s) {sorted(unknown)} in 'dask'; known: {sorted(DASK_KEYS)}")
    data = spec.get("data")
    if data is None and "federated" in spec:
        return  # a federated workflow: each site holds its own data
    if isinstance(data, str):
        spec["data"] = {"url": data}
    elif not isinstance(data, dict) or "url" not in data:
        raise InputError(f"{source}: 'data' must be a URL or a mapping with a 'url' key; got {data!r}")


def parse_assignment(item):
    """``"key=value"`` -> ``(key, value)``, the value parsed as YAML (``"k=[a, b]"`` gives a list)."""
    key, sep, raw = item.partition("=")
    if not sep or not key:
        raise InputError(f"--set expects key=value; got {item!r}")
    return key, yaml.safe_load(raw)


def apply_overrides(spec, sets=(), *, data=None, store=None, scheduler=None):
    """A copy of ``spec`` with ``--set key.sub=value`` overrides (values parsed as YAML) applied."""
    spec = copy.deepcopy(spec)
    for item in sets:
        key, value = parse_assignment(item)
        node = spec
        parts = key.split(".")
        for part in parts[:-1]:
            node = node.setdefault(part, {})
            if not isinstance(node, dict):
                raise InputError(f"--set {item!r}: {part!r} is not a section")
        if parts == ["coassoc", "strategy"]:
            _drop_other_strategy_params(node, value)
        node[parts[-1]] = value
    if data is not None:
        spec.setdefault("data", {})
        if isinstance(spec["data"], str):
            spec["data"] = {"url": spec["data"]}
        spec["data"]["url"] = data
    if store is not None:
        spec["store"] = store
    if scheduler is not None:
        spec["scheduler"] = scheduler
    check_workflow(spec)
    return spec


def _drop_other_strategy_params(section, strategy):
    """An override of ``coassoc.strategy`` replaces that section's strategy parameters: the keys
    that only the previous strategy takes (``p`` of ``uniform`` when switching to ``per-point``)
    are dropped, with a log line saying so."""
    old = section.get("strategy", "uniform")
    if strategy == old or strategy not in STRATEGY_PARAMS:
        return
    dropped = sorted(
        k for k in section if k in STRATEGY_PARAMS.get(old, ()) and k not in STRATEGY_PARAMS[strategy]
    )
    for key in dropped:
        del section[key]
    if dropped:
        logger.warning(
            "--set coassoc.strategy=%s: dropped %s, the parameter(s) of strategy %r; %r takes %s",
            strategy,
            dropped,
            old,
            strategy,
            sorted(STRATEGY_PARAMS[strategy]),
        )


def open_store(url, storage_options=None, *, mode="a"):
    """The :class:`RunStore` at ``url``, after checking that its object store can be reached.

    fsspec's network file systems (``s3://`` ...) raise their own exceptions, not ``OSError``,
    when the endpoint cannot be reached (and zarr then leaves coroutines behind that print more
    tracebacks at exit); one metadata request first turns that into one clear error.
    """
    url = str(url)
    if "://" in url and not url.startswith(("file://", "memory://")):
        import fsspec

        try:
            fs, path = fsspec.core.url_to_fs(url, **(storage_options or {}))
            fs.exists(path)
        except FileNotFoundError:
            pass
        except Exception as exc:  # unreachable endpoint, missing bucket, credentials ...
            msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
            raise InputError(f"cannot reach run store {url!r}: {msg}") from exc
    return RunStore(url, storage_options, mode=mode)


@contextlib.contextmanager
def removed_if_left_empty(url, storage_options=None):
    """Run a command that may create the run store at ``url``; if it fails, leave no empty store behind.

    When the command raises, the store did not exist before and it holds nothing but its root
    ``zarr.json`` (no stage wrote anything), it is removed: a typo in the input leaves no new, empty
    store. A store that existed, or holds anything, is never touched. Local and ``memory://`` stores only
    (an object store's prefix holds no empty folder, and probing it twice would double the wait on one
    that cannot be reached).
    """
    import fsspec

    if "://" in str(url) and not str(url).startswith(("file://", "memory://")):
        yield
        return
    try:
        fs, path = fsspec.core.url_to_fs(str(url), **(storage_options or {}))
        existed = fs.exists(path)
    except Exception:  # unreachable: the command says so, and there is nothing to remove
        existed = True
    try:
        yield
    except BaseException:
        if not existed:
            with contextlib.suppress(Exception):
                entries = [e.rstrip("/").rsplit("/", 1)[-1] for e in fs.ls(path, detail=False)]
                if entries == ["zarr.json"]:
                    fs.rm(path, recursive=True)
        raise


PERFORMANCE_REPORT = "report/dask-performance.html"


def _check_scheduler_sees(store_url, scheduler):
    # (a cluster of this process, inproc://, shares its memory)
    if scheduler and store_url.startswith("memory://") and not str(scheduler).startswith("inproc://"):
        raise InputError(
            f"run store {store_url!r} lives in this process's memory, which the workers of the cluster at "
            f"{scheduler!r} cannot see; use a file or object-store URL"
        )


@contextlib.contextmanager
def client_for_store(store, scheduler=None, dask_options=None, *, report=True):
    """A client context fit for ``store``: worker processes unless the store lives in memory.

    It yields a :class:`~ensemble_dask.runtime.clients.LazyClient`: the cluster (embedded or remote)
    is started only when a stage has work to do, so a re-run of a finished workflow starts none.
    When it was started, a Dask performance report of the work is written to
    ``report/dask-performance.html`` in the store (``report=False``: none, and no cluster facts; the dask
    config ``ensemble-dask.report.dask-performance`` false: none, about a second of a command's time).
    """
    in_memory = store.url.startswith("memory://")
    _check_scheduler_sees(store.url, scheduler)
    opts = dict(dask_options or {})

    def describe(client):  # the report's "Dask cluster" line (only when a stage started one)
        store.write_json("report/cluster.json", cluster_facts(client))

    with tempfile.TemporaryDirectory(prefix="ensemble-dask-") as tmp:
        performance = report and flag("report.dask-performance")
        path = os.path.join(tmp, "dask-performance.html") if performance else None
        lazy = LazyClient(
            functools.partial(dask_client, scheduler, processes=not in_memory, **opts),
            path,
            describe if report else None,
        )
        with lazy:
            yield lazy
        if lazy.started and path and os.path.exists(path):
            store.write_file(PERFORMANCE_REPORT, path)


def _call(func, section, *args, **kwargs):
    """Call a stage function, turning an unknown parameter into an error naming the section."""
    try:
        return func(*args, **kwargs)
    except TypeError as exc:
        if "unexpected keyword argument" in str(exc):
            raise InputError(f"workflow section {section!r}: {exc}") from exc
        raise


def _largest_k(consensus, on=None, n=None):
    """The largest ``n_clusters`` of the consensus entries (that fit on ``on``, e.g. ``"pairs"``), or None; a
    range's ``k_max`` (``auto``'s for ``n`` rows): the ensemble reaches past the largest K asked."""
    from .consensus import registry
    from .consensus._common.krange import largest_k
    from .stages.consensus import resolve_method

    ks = []
    for name, params in (consensus or {}).items():
        method, kw = resolve_method(name, params)
        fits_on = registry.get(method).fits_on.split("+")  # "labels+pairs" fits on pairs too
        k = largest_k(kw.get("n_clusters"), n)
        if (on is None or on in fits_on) and isinstance(k, int):
            ks.append(k)
    return max(ks) if ks else None


def _fine_ensemble(consensus):
    """Whether every consensus entry's method takes an ensemble of many small clusters by default (then the
    generate stage's defaults are that ensemble's: :func:`~ensemble_dask.stages.generate.generate_params`)."""
    from .consensus import registry
    from .stages.consensus import resolve_method

    methods = [registry.get(resolve_method(name, params)[0]) for name, params in (consensus or {}).items()]
    return bool(methods) and all(m.fine_ensemble for m in methods)


def _fresh_workers(client):
    """Restart the embedded cluster's worker processes before a consensus method fits on them.

    Worker processes keep much of the memory the generate and coassoc stages used (allocator arenas,
    caches), which fresh processes give back before the row-distributed fits.
    """
    logger.info("restarting the embedded cluster's workers: the consensus fits on them")
    nanny = logging.getLogger("distributed.nanny")
    level = nanny.level
    nanny.setLevel(logging.ERROR)  # "Restarting worker" is what we asked for
    try:
        client.restart()
    finally:
        nanny.setLevel(level)


def _missing(store, stage):
    """Whether ``stage`` has no complete record in ``store`` (a record whose output disagrees with it is an
    error, :class:`~ensemble_dask.io.store.StageContentError`, not a missing stage)."""
    from .io.store import StageContentError

    try:
        store.stage_hash(stage)
    except StageContentError:
        raise
    except InputError:
        return True
    return False


def _default_generate(spec, store, consensus):
    """The workflow's ``generate`` section, or ``{}`` (the stage's defaults) where it has none but has
    consensus methods and the store holds no labels yet (labels brought with ``import-labels`` are not
    generated over), or None: not run."""
    gen = spec.get("generate")
    if gen is None and consensus and _missing(store, "generate"):
        return {}
    return gen


def _default_coassoc(spec, store, consensus):
    """The workflow's ``coassoc`` section, or ``{}`` where it has none but a pair method needs pairs and the
    store's are missing or were counted on other labels than the store's now, or None: not run."""
    from .consensus import registry
    from .stages.consensus import resolve_method

    co = spec.get("coassoc")
    pair_methods = (
        "pairs" in registry.get(resolve_method(n, p)[0]).fits_on.split("+") for n, p in consensus.items()
    )
    if co is not None or not any(pair_methods):
        return co
    if _missing(store, "coassoc") or store.record("coassoc").get("inputs") != [store.stage_hash("generate")]:
        return {}
    return None


@contextlib.contextmanager
def label_starts_alongside(store, consensus, seed=0):
    """Compute the label starts that the workflow section ``consensus`` will take, on a thread of their own
    while the block runs, and keep them in the store if the block ends without error.

    The workflow runs its ``coassoc`` stage in the block. A start is HBGF on the labels
    (:func:`~ensemble_dask.stages.consensus.pending_label_starts`: the pair methods' ``init: auto``, labels of
    at most :data:`~ensemble_dask.stages.consensus.AHEAD_LABELS_BYTES`), on about one core, and it needs no
    pairs: it shares the machine with the pair build instead of waiting for it. The ``consensus`` stage then
    finds it kept: the same starts that it would compute itself.

    - After the block, the starts still being computed are waited for.
    - When the block raises, its error reaches the caller at once. The start under way finishes on its own
      daemon thread, unkept, and no other begins.
    - A start that fails here is left to the consensus stage, which computes it again and reports the error.
    - The store is written from the calling thread after the block: a ``memory://`` store is a dict that the
      block's stage may be listing.
    - The modules the start imports on first use are imported by the calling thread before the block
      (:func:`~ensemble_dask.consensus.starts.import_start_modules`): two threads that import one package at
      once can each meet the other's half-initialised module.
    """
    import threading

    from .consensus.starts import import_start_modules
    from .stages._starts import keep_starts
    from .stages.consensus import computed_starts, pending_label_starts

    pending = pending_label_starts(store, consensus, seed)
    if not pending:
        yield
        return
    import_start_modules()  # here: the thread then imports nothing while the block may be importing
    done, stop = {}, threading.Event()

    def compute():
        for key, (k, rs) in pending.items():
            if stop.is_set():
                return
            try:
                done[key] = computed_starts(store, k, rs)
            except Exception as exc:  # noqa: BLE001 - the consensus stage computes it again and reports it
                logger.info("label starts for K=%d not computed ahead: %r", k, exc)

    thread = threading.Thread(target=compute, name="label-starts", daemon=True)
    thread.start()
    try:
        yield
        thread.join()
    except BaseException:
        stop.set()
        raise
    for key, starts in done.items():
        keep_starts(store, key, starts)


@contextlib.contextmanager
def store_lease(url, storage_options=None, *, take_over=False):
    """Hold the run store's lease (:class:`~ensemble_dask.io.lease.StoreLease`): one writer at a time."""
    from ._validation import EnsembleDaskError
    from .io.lease import StoreLease

    if url is None or not str(url).strip():
        raise InputError(f"the run store URL is empty ({url!r}); give a path or URL")
    lease = StoreLease(url, storage_options, take_over=take_over)
    try:
        lease.acquire()
    except EnsembleDaskError:
        raise
    except Exception as exc:  # unreachable endpoint, missing bucket, credentials ...
        msg = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
        raise InputError(f"cannot reach run store {str(url)!r}: {msg}") from exc
    try:
        yield
    finally:
        lease.release()


def run_workflow(spec, *, progress=False, take_over=False, report=True):
    """Run every stage of ``spec`` (a dict from :func:`load_workflow`); return the report dict.

    A workflow with a ``federated:`` section runs row-distributed BCE (or KCC) over its sites instead
    (:func:`~ensemble_dask.stages.federated.run_federated_workflow`). The run holds the store's lease
    from before its first write to the end (``take_over``: replace a stale one). ``report=False``: no report
    page and no Dask performance report (``ConsensusClustering.fit``); the dict then holds ``methods``, the
    metrics of the store's current consensus results.
    """
    check_workflow(spec)
    with store_lease(workflow_store_url(spec), spec.get("storage_options"), take_over=take_over):
        return _run_workflow(spec, progress, report)


def _run_workflow(spec, progress, report=True):
    from .stages.coassoc import coassoc_stage
    from .stages.consensus import consensus_stage, uses_cluster
    from .stages.generate import generate
    from .stages.ingest import ingest

    if "federated" in spec:
        from .stages.federated import run_federated_workflow
        from .stages.report_page import report_page

        summary = run_federated_workflow(spec, progress=progress)
        fed_store = open_store(workflow_store_url(spec), spec.get("storage_options"))
        return {"federated": summary, "html": report_page(fed_store)}
    validate_workflow(spec)
    # a scheduler that cannot see the store, or at an address nothing listens at, stops the run before ingest
    _check_scheduler_sees(workflow_store_url(spec), spec.get("scheduler"))
    probe_scheduler(spec.get("scheduler"))
    seed = int(spec.get("seed", 0))
    store = open_store(workflow_store_url(spec), spec.get("storage_options"))
    check_report_settings(store)  # the report is written last: stop before the first stage instead
    data = dict(spec["data"])
    url = data.pop("url")
    # the checks that need n run as soon as ingest has counted the rows, before it marks its stage
    info = _call(ingest, "data", store, url, seed=seed, check_n=lambda n: check_against_data(spec, n), **data)
    logger.info("ingest: %s", info)
    check_against_data(spec, store.n)  # (an ingest up to date counts nothing)
    consensus = spec.get("consensus") or {}
    gen_spec = _default_generate(spec, store, consensus)
    if gen_spec is None and spec.get("coassoc") is None and not consensus:
        return write_report(store, progress) if report else {"methods": {}}
    with client_for_store(store, spec.get("scheduler"), spec.get("dask"), report=report) as client:
        if gen_spec is not None:
            gen = dict(gen_spec)
            gen.setdefault("seed", seed)
            gen.setdefault("n_clusters", _largest_k(consensus, n=store.n))
            gen.setdefault("fine", _fine_ensemble(consensus))
            with client.running("generate"):  # (a lost scheduler's error names the stage)
                _call(generate, "generate", store, client, progress=progress, **gen)
        co_spec = _default_coassoc(spec, store, consensus)
        if co_spec is not None:
            co = dict(co_spec)
            co.setdefault("seed", seed)
            co.setdefault("n_clusters", _largest_k(consensus, "pairs", store.n))
            with (
                client.running("coassoc"),
                label_starts_alongside(store, consensus, seed),  # the pair methods' starts meanwhile
                elapsed_line("coassoc", progress=progress),
            ):
                info = _call(coassoc_stage, "coassoc", store, client, **co)
            logger.info("coassoc: %s", info)
        if not any(uses_cluster(store, name, params) for name, params in consensus.items()):
            client.release()  # the workers' memory is given back before the in-process fits
        elif client.started and not spec.get("scheduler") and not store.url.startswith("memory://"):
            _fresh_workers(client)  # worker processes of our own embedded cluster (threads cannot restart)
        for name, params in consensus.items():
            with client.running(f"consensus/{name}"):
                metrics = consensus_stage(
                    store, name, seed=seed, client=client, progress=progress, **(params or {})
                )
            logger.info("consensus %s: %s", name, metrics)
    if not report:
        from .stages.consensus import current_results

        return {"methods": current_results(store)}
    return write_report(store, progress)

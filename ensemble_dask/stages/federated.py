"""Federated workflows: row-distributed BCE or KCC over sites that keep their rows, over TLS.

A workflow's ``federated:`` section::

    federated:
      method: bce               # bce | kcc (row-distributed KCC, federated.rows_kcc)
      mode: secure              # secure | plain (statistics in clear: a baseline)
      n_clusters: 6
      certs: runs/federated-bce/certs   # ensemble-dask certs --out DIR --names coordinator,site-a,...
      insecure: false           # true allows plain TCP (no TLS)
      timeout: 120              # seconds a site may take per round
      n_labels: null            # labels are 0 .. n_labels-1 (null: bounded by a secure sum)
      demo: false               # true: make the demo's site shares (and certs) when missing
      sites:
        - {name: site-a, url: ..., resource: site-a, output: ..., reference: ..., checkpoint: ...,
           mask_key: runs/federated-bce/certs/site-a-mask.pub}

``mask_key`` pins the site's public masking key (a ``NAME-mask.pub`` path or its base64 text; default
``CERTS/NAME-mask.pub``). With a ``scheduler`` address the coordinator connects to an existing
cluster (``tls://`` required unless ``insecure``) as ``CERTS/coordinator.pem``; without one, each site
is simulated by a local worker process with its own certificate and masking key.

The coordinator's store receives the model (``federated/alpha``, ``federated/beta``), a checkpoint of
``(alpha, beta)`` after every EM iteration (``federated/checkpoint``, removed when the run completes;
a rerun resumes from it) and ``report/metrics.json``. Memberships stay with each site (``output``).
With ``method: kcc`` the model is ``federated/centers`` (``K x G``, the blocks' ``offsets`` in its
attributes); its parameters are ``n_clusters``, ``n_init``, ``max_iter``, ``tol`` (KCC's) and
``n_labels``; it starts from clusters of the basic partitions (KCC's ``init="clusters"``), and it is
not checkpointed (a rerun starts over).

:func:`split_sites` cuts the ``labels`` (and ``y_true``) of a run store into per-site arrays.
"""

from __future__ import annotations

import contextlib
import logging
import os
import time
from pathlib import Path

import numpy as np

from .._validation import InputError, check_int, stage_seed
from ..io.store import RunStore

__all__ = ["run_federated_workflow", "split_sites", "make_demo_sites", "FEDERATED_KEYS"]

logger = logging.getLogger(__name__)

FEDERATED_KEYS = {
    "sites",
    "method",
    "mode",
    "n_clusters",
    "n_init",
    "max_iter",
    "tol",
    "e_step_tol",
    "e_step_max_iter",
    "n_labels",
    "certs",
    "insecure",
    "timeout",
    "demo",
}
DEMO_DEFAULTS = {
    "data": "synthetic:kdd99?n=20000&seed=0",
    "n_clusterings": 30,
    "k_min": 2,
    "k_max": 10,
    "rate": 0.5,
}


def split_sites(store, out, names, *, storage_options=None):
    """Write ``store``'s labels (and ``y_true``), cut in contiguous row blocks, as arrays per site.

    Returns the site declarations ``[{"name", "url", "resource", "output", "checkpoint"[, "reference"]}]``.
    """
    import zarr

    from ..io.urls import make_zarr_store

    if not names:
        raise InputError("split_sites needs at least one site name")
    labels = store["labels"]
    y = store.group["y_true"] if "y_true" in store.group else None
    n = labels.shape[0]
    if len(names) > n:
        raise InputError(f"cannot split n={n} rows between {len(names)} sites")
    bounds = np.linspace(0, n, len(names) + 1).astype(int)
    root = str(out).rstrip("/")
    sites = []
    for name, a, b in zip(names, bounds[:-1], bounds[1:], strict=True):
        url = f"{root}/{name}/labels.zarr"
        z = zarr.create_array(
            make_zarr_store(url, storage_options),
            shape=(b - a, labels.shape[1]),
            dtype="int32",
            overwrite=True,
        )
        z[:] = labels[a:b]
        site = {
            "name": name,
            "url": url,
            "resource": name,
            "output": f"{root}/{name}/memberships.zarr",
            "checkpoint": f"{root}/{name}/state",
        }
        if y is not None:
            ref = f"{root}/{name}/reference.zarr"
            zr = zarr.create_array(
                make_zarr_store(ref, storage_options), shape=(b - a,), dtype="int32", overwrite=True
            )
            zr[:] = np.asarray(y[a:b]).astype(np.int32)
            site["reference"] = ref
        sites.append(site)
    return sites


def make_demo_sites(sites, client, demo, seed, workdir):
    """Make the demo's data: a synthetic table, base clusterings, cut into the declared sites' URLs."""
    from .generate import generate
    from .ingest import ingest

    opts = dict(DEMO_DEFAULTS)
    if isinstance(demo, dict):
        unknown = set(demo) - set(DEMO_DEFAULTS)
        if unknown:
            raise InputError(
                f"unknown key(s) {sorted(unknown)} in 'federated.demo'; known: {sorted(DEMO_DEFAULTS)}"
            )
        opts.update(demo)
    store = RunStore(Path(workdir) / "demo.zarr")
    ingest(store, opts["data"], seed=seed)
    generate(
        store,
        client,
        n_clusterings=opts["n_clusterings"],
        k_min=opts["k_min"],
        k_max=opts["k_max"],
        rate=opts["rate"],
        seed=seed,
    )
    labels = store["labels"][:]
    y = store["y_true"][:] if "y_true" in store.group else None
    bounds = np.linspace(0, labels.shape[0], len(sites) + 1).astype(int)
    for s, a, b in zip(sites, bounds[:-1], bounds[1:], strict=True):
        _write_array(s["url"], labels[a:b].astype(np.int32))
        if s.get("reference") and y is not None:
            _write_array(s["reference"], np.asarray(y[a:b]).astype(np.int32))
    logger.info("demo: %d rows x %d clusterings cut into %d sites", *labels.shape, len(sites))


def _write_array(url, arr):
    if url.endswith(".npy"):
        Path(url).parent.mkdir(parents=True, exist_ok=True)
        np.save(url, arr)
        return
    import zarr

    from ..io.urls import make_zarr_store

    z = zarr.create_array(make_zarr_store(url, None), shape=arr.shape, dtype=arr.dtype, overwrite=True)
    z[:] = arr


def _exists(url):
    if "://" in url and not url.startswith("file://"):
        import fsspec

        fs, path = fsspec.core.url_to_fs(url)
        return fs.exists(path)
    return os.path.exists(url.removeprefix("file://"))


# --------------------------------------------------------------------------- checkpoint in the store


class StoreCheckpoint:
    """The coordinator's checkpoint in ``federated/checkpoint`` of a run store."""

    def __init__(self, store):
        self.store = store

    def save(self, state):
        grp = self.store.group.require_group("federated").require_group("checkpoint")
        meta = {
            "run_key": state["run_key"],
            "init": int(state["init"]),
            "trace": [float(v) for v in state["trace"]],
            "best": None,
        }
        arrays = {}
        if state["params"] is not None:
            arrays["alpha"], arrays["beta"] = state["params"]["alpha"], state["params"]["beta"]
        if state["best"] is not None:
            b = state["best"]
            meta["best"] = {
                "init": int(b["init"]),
                "trace": [float(v) for v in b["trace"]],
                "converged": bool(b["converged"]),
            }
            arrays["best_alpha"], arrays["best_beta"] = b["params"]["alpha"], b["params"]["beta"]
        grp.attrs["complete"] = False  # arrays first, then the attributes that refer to them
        for name, arr in arrays.items():
            grp.create_array(name, data=np.asarray(arr, dtype=np.float64), overwrite=True)
        grp.attrs.update({**meta, "complete": True})

    def load(self):
        if "federated/checkpoint" not in self.store.group:
            return None
        grp = self.store.group["federated/checkpoint"]
        meta = dict(grp.attrs)
        if not meta.get("complete"):
            return None
        state = {
            "run_key": meta["run_key"],
            "init": meta["init"],
            "trace": list(meta["trace"]),
            "params": None,
            "best": None,
        }
        if state["trace"]:
            state["params"] = {"alpha": grp["alpha"][:], "beta": grp["beta"][:]}
        if meta.get("best"):
            state["best"] = {
                **meta["best"],
                "params": {"alpha": grp["best_alpha"][:], "beta": grp["best_beta"][:]},
            }
        return state

    def clear(self):
        if "federated/checkpoint" in self.store.group:
            del self.store.group["federated/checkpoint"]


# --------------------------------------------------------------------------- clusters


def _security(certs, name):
    from distributed import Security

    files = [Path(certs) / f for f in ("ca.pem", f"{name}.pem", f"{name}-key.pem")]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise InputError(
            f"TLS files missing: {missing}; make them with `ensemble-dask certs --out {certs} --names ...` "
            "(or set federated.insecure: true to run without TLS)"
        )
    return Security(
        tls_ca_file=str(files[0]),
        tls_client_cert=str(files[1]),
        tls_client_key=str(files[2]),
        tls_scheduler_cert=str(files[1]),
        tls_scheduler_key=str(files[2]),
        tls_worker_cert=str(files[1]),
        tls_worker_key=str(files[2]),
        require_encryption=True,
    )


@contextlib.contextmanager
def _local_sites_cluster(sites, certs, tls):
    """One local worker process per site (its resource, certificate and masking key); yields a Client."""
    import dask
    from distributed import Client, Nanny, Scheduler, SpecCluster

    from ..parallel import _worker_environ

    host = {"host": "127.0.0.1"}
    sched_opts = {"dashboard_address": ":0", **host}
    if tls:
        sched_opts.update(security=_security(certs, "coordinator"), protocol="tls://")
    workers = {}
    for s in sites:
        # the simulated sites' own logs: a task's error reaches the coordinator as its exception anyway,
        # and on a loaded machine the workers log heartbeat failures while the cluster closes
        opts = {"nthreads": 1, "resources": {s["resource"]: 1}, "silence_logs": logging.CRITICAL, **host}
        key = Path(certs) / f"{s['name']}-mask.key" if certs else None
        if key is not None and key.exists():
            opts["preload"] = ["ensemble_dask.federated.site"]
            opts["preload_argv"] = [["--mask-key", str(key), "--pins", str(certs), "--site-name", s["name"]]]
        if tls:
            opts["security"] = _security(certs, s["name"])
            opts["protocol"] = "tls://"
        workers[s["name"]] = {"cls": Nanny, "options": opts}
    security = _security(certs, "coordinator") if tls else None
    with _nanny_log_restored() as nanny_log, dask.config.set(_worker_environ()):
        cluster = SpecCluster(
            workers=workers,
            scheduler={"cls": Scheduler, "options": sched_opts},
            security=security,
            silence_logs=logging.ERROR,
        )
        try:
            with Client(cluster, security=security) as client:
                try:
                    client.wait_for_workers(len(sites), timeout=300)
                    yield client
                finally:
                    _quiet_close(client)
        finally:
            # the nanny logs a WARNING whenever a closed worker process takes over 4 s to exit (it is
            # then killed); at the end of a local simulation that is nothing to act on
            nanny_log.setLevel(logging.ERROR)
            try:
                cluster.close(timeout=120)
            except (TimeoutError, OSError) as exc:  # a loaded machine: the processes are killed anyway
                logger.warning("the local site workers did not close cleanly: %r", exc)


class _Loggers:
    def __init__(self, names):
        self.logs = [logging.getLogger(n) for n in names]

    def setLevel(self, level):  # noqa: N802 - mirrors logging.Logger
        for log in self.logs:
            log.setLevel(level)


@contextlib.contextmanager
def _nanny_log_restored():
    """The loggers that report a slow close (distributed's nanny, tornado's callbacks), restored on exit."""
    group = _Loggers(["distributed.nanny", "tornado.application"])
    levels = [log.level for log in group.logs]
    try:
        yield group
    finally:
        for log, level in zip(group.logs, levels, strict=True):
            log.setLevel(level)


def _quiet_close(client):
    """Close the client before the cluster so no comm is cut under it (no CommClosedError traceback)."""
    with contextlib.suppress(Exception):
        client.close(timeout=10)


def _check_tls_address(address, insecure):
    tls = str(address).startswith("tls://")
    if not tls and not insecure:
        raise InputError(
            f"scheduler {address!r} is not a tls:// address; the federated workflow refuses plain TCP "
            "unless federated.insecure is true"
        )
    return tls


@contextlib.contextmanager
def _remote_client(address, certs, insecure):
    from distributed import Client

    tls = _check_tls_address(address, insecure)
    security = _security(certs, "coordinator") if tls else None
    try:
        client = Client(address, security=security, timeout="20s")
    except (OSError, TimeoutError) as exc:
        raise InputError(f"cannot reach the Dask scheduler at {address!r}: {exc}") from exc
    try:
        yield client
    finally:
        _quiet_close(client)


# --------------------------------------------------------------------------- the workflow


def _site_defaults(sites, certs):
    out = []
    for i, s in enumerate(sites):
        if not isinstance(s, dict):
            raise InputError(f"federated.sites[{i}] must be a dict (name, url, resource, ...); got {s!r}")
        s = dict(s)
        s.setdefault("name", f"site-{i}")
        s.setdefault("resource", s["name"])
        if certs and not s.get("mask_key"):
            s["mask_key"] = str(Path(certs) / f"{s['name']}-mask.pub")
        out.append(s)
    return out


def run_federated_workflow(spec, *, client=None, progress=False):
    """Run the ``federated:`` section of a workflow; returns the coordinator's summary (metrics.json).

    ``client``: an existing client to run on; like a ``scheduler`` address, it must be connected over
    ``tls://`` unless ``federated.insecure`` is true.
    """
    from ..federated.certs import load_mask_public, make_certs
    from ..federated.rows import run_federated_bce

    fed = dict(spec.get("federated") or {})
    unknown = set(fed) - FEDERATED_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)} in 'federated'; known: {sorted(FEDERATED_KEYS)}")
    method = _check_method(fed.pop("method", "bce"))
    raw_sites = fed.pop("sites", None)
    if not isinstance(raw_sites, list) or not raw_sites:
        raise InputError(f"'federated.sites' must be a non-empty list of sites; got {raw_sites!r}")
    n_clusters = check_int(fed.pop("n_clusters", None), "federated.n_clusters", min_value=1)
    insecure = bool(fed.pop("insecure", False))
    demo = fed.pop("demo", False)
    certs = fed.pop("certs", None)
    timeout = float(fed.pop("timeout", 120.0))
    if method == "kcc":
        _check_kcc_params(n_clusters, fed)  # before any cluster starts
    else:
        _check_bce_params(n_clusters, fed)  # before any cluster starts
    seed = int(spec.get("seed", 0))
    fed.setdefault("random_state", int(stage_seed(seed, "federated").generate_state(1)[0]))
    store_url = spec.get("store") or f"runs/{spec.get('name', 'federated')}.zarr"
    store = RunStore(store_url, spec.get("storage_options"))
    store.check_report_folder()  # report/metrics.json is written at the end of the run
    scheduler = spec.get("scheduler")
    if scheduler and client is None:
        _check_tls_address(scheduler, insecure)
    sites = _site_defaults(raw_sites, certs)
    names = [s["name"] for s in sites]
    if demo and certs and not (Path(certs) / "ca.pem").exists():
        make_certs(certs, ["coordinator", *names])
    tls = not insecure
    if tls and not certs and client is None:
        raise InputError(
            "the federated workflow runs over TLS: set federated.certs to a directory made by "
            "`ensemble-dask certs` (or federated.insecure: true for plain TCP)"
        )
    mode = fed.get("mode", "secure")
    pins = None
    if mode == "secure" and len(sites) > 1:
        pins = {}
        for s in sites:
            if not s.get("mask_key"):
                raise InputError(f"site {s['name']!r} has no pinned 'mask_key' (nor federated.certs)")
            pins[s["name"]] = load_mask_public(s["mask_key"])
    site_opts = spec.get("site_storage_options")
    record = {"sites": sites, "n_clusters": n_clusters, "tls": tls, **fed}
    if method != "bce":  # a BCE run's record (and so its stage fingerprint) stays as it was
        record["method"] = method
    if client is not None:
        ctx = contextlib.nullcontext(client)
        tls = _check_tls_address(client.scheduler.address, insecure)  # a given client: the same rule
    elif scheduler:
        ctx = _remote_client(scheduler, certs, insecure)
    else:
        ctx = _local_sites_cluster(sites, certs, tls)
    checkpoint = StoreCheckpoint(store)
    bar = _progress_bar(
        progress, fed.get("max_iter", 300), "federated KCC" if method == "kcc" else "federated EM"
    )
    with ctx as c, store.stage("federated", record, []):
        if demo and not all(_exists(s["url"]) for s in sites):
            make_demo_sites(sites, c, demo, seed, Path(store.url).parent / f"{Path(store.url).stem}-demo")
        if method == "kcc":
            return _run_kcc(store, sites, n_clusters, c, fed, pins, timeout, site_opts, bar, tls, checkpoint)
        try:
            result = run_federated_bce(
                sites,
                n_clusters,
                c,
                pins=pins,
                timeout=timeout,
                storage_options=site_opts,
                checkpoint=checkpoint,
                progress=bar,
                **fed,
            )
        finally:
            if bar is not None:
                bar.close()
        summary = _write_results(store, result, n_clusters, tls)
        checkpoint.clear()
    return summary


def _check_method(method):
    if method not in ("bce", "kcc"):
        raise InputError(f"The 'federated.method' parameter must be one of ['bce', 'kcc']; got {method!r}")
    return method


_KCC_KEYS = ("n_init", "max_iter", "tol", "random_state")


def _check_kcc_params(n_clusters, fed):
    from ..consensus.kcc import KCC

    if fed.get("mode", "secure") not in ("secure", "plain"):
        raise InputError(f"The 'federated.mode' parameter must be 'secure' or 'plain'; got {fed['mode']!r}")
    other = sorted(set(fed) - {*_KCC_KEYS, "mode", "n_labels"})
    if other:
        raise InputError(
            f"federated.method 'kcc' takes no {other} (BCE parameters); its parameters: {list(_KCC_KEYS)}"
        )
    KCC(n_clusters, init="clusters", **{k: fed[k] for k in _KCC_KEYS if k in fed})._check_params()


def _run_kcc(store, sites, n_clusters, client, fed, pins, timeout, site_opts, bar, tls, checkpoint):
    """The ``method: kcc`` branch of :func:`run_federated_workflow` (inside its stage and cluster)."""
    from ..federated.rows_kcc import run_federated_kcc

    try:
        result = run_federated_kcc(
            sites,
            n_clusters,
            client,
            pins=pins,
            timeout=timeout,
            storage_options=site_opts,
            progress=bar,
            **fed,
        )
    finally:
        if bar is not None:
            bar.close()
    summary = _write_kcc_results(store, result, n_clusters, tls)
    checkpoint.clear()  # a BCE run's checkpoint left in this store belongs to another run
    return summary


def _write_kcc_results(store, result, n_clusters, tls):
    group = store.group.require_group("federated")
    for name in ("alpha", "beta"):  # a BCE model of an earlier run in this store
        if name in group:
            del group[name]
    for key in ("lower_bound", "bound_trace"):
        if key in group.attrs:
            del group.attrs[key]
    centers = np.hstack([np.asarray(c, dtype=np.float64) for c in result.cluster_centers_])
    group.create_array("centers", data=centers, overwrite=True)
    group["centers"].attrs["offsets"] = np.cumsum(
        [0] + [c.shape[1] for c in result.cluster_centers_]
    ).tolist()
    fit = {
        "objective": float(result.objective_),
        "objective_trace": [float(v) for v in result.objective_trace_],
    }
    return _write_summary(store, group, result, "kcc", n_clusters, tls, fit, None)


def _check_bce_params(n_clusters, fed):
    from ..consensus.bce import BCE

    if fed.get("mode", "secure") not in ("secure", "plain"):
        raise InputError(f"The 'federated.mode' parameter must be 'secure' or 'plain'; got {fed['mode']!r}")
    keys = ("n_init", "max_iter", "tol", "e_step_tol", "e_step_max_iter", "random_state")
    BCE(n_clusters, **{k: fed[k] for k in keys if k in fed})._check_params()


def _progress_bar(progress, total, desc="federated EM"):
    """A ``progress(t, value)`` callback drawing a tqdm bar from the first iteration (or None)."""
    if not progress:
        return None
    from tqdm.auto import tqdm

    bars = []

    def update(t, bound):
        if not bars:
            bars.append(tqdm(total=total, initial=t, desc=desc, unit="it"))
        bars[0].n = t + 1
        bars[0].set_postfix({"objective" if "KCC" in desc else "bound": f"{bound:.6g}"}, refresh=False)
        bars[0].refresh()

    update.close = lambda: bars and bars[0].close()
    return update


def _write_results(store, result, n_clusters, tls):
    group = store.group.require_group("federated")
    group.create_array("alpha", data=np.asarray(result.alpha_, dtype=np.float64), overwrite=True)
    beta = [np.asarray(b, dtype=np.float64) for b in result.beta_]
    group.create_array("beta", data=np.concatenate(beta, axis=1), overwrite=True)
    group["beta"].attrs["offsets"] = np.cumsum([0] + [b.shape[1] for b in beta]).tolist()
    fit = {
        "lower_bound": float(result.lower_bound_),
        "bound_trace": [float(v) for v in result.lower_bound_trace_],
    }
    return _write_summary(store, group, result, "bce", n_clusters, tls, fit, result.resumed_from)


def _write_summary(store, group, result, method, n_clusters, tls, fit, resumed_from):
    """The run's summary (``fit``: the method's objective and its trace) in the group's attributes and
    ``report/metrics.json``."""
    summary = {
        "method": method,
        "mode": result.mode,
        "tls": bool(tls),
        "sites": result.site_names,
        "rows_per_site": result.rows_per_site,
        "n_rows": int(sum(result.rows_per_site.values())),
        "n_clusterings": len(result.categories_),
        "n_clusters": n_clusters,
        "iterations": int(result.n_iter_),
        "converged": bool(result.converged_),
        **fit,
        "seconds": round(result.seconds, 3),
        "seconds_per_iteration": round(result.seconds_per_iteration, 6),
        "resumed_from_iteration": resumed_from,
        "finished": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
    }
    if result.scores is not None:
        summary.update({k: float(v) for k, v in result.scores.items()})
        summary["methods"] = {
            f"federated-{method}": {**summary_scores(result.scores), "seconds": summary["seconds"]}
        }
    group.attrs.update({k: v for k, v in summary.items() if k != "methods"})
    store.write_json("report/metrics.json", summary)
    return summary


def summary_scores(scores):
    return {k: float(scores[k]) for k in ("H", "ARI", "NMI")}

"""Federated workflows: row-distributed BCE or KCC over site agents that keep their rows.

A workflow's ``federated:`` section names the sites and where their agents answer; everything a site
reads, writes, keys and allows is in the site's own config (:mod:`ensemble_dask.federated.site.agent`)::

    federated:
      method: bce               # bce | kcc (row-distributed KCC, federated.coordinator.kcc)
      mode: secure              # secure | plain (statistics in clear: each site refuses unless it allows it)
      n_clusters: 6
      certs: certs              # the coordinator's TLS files: ca.pem, coordinator.pem, coordinator-key.pem
      timeout: 120              # seconds a site may take per request before it counts as dropped
      n_labels: null            # labels are 0 .. n_labels-1 (null: bounded by a secure sum)
      demo: false               # true: make keys, data and site configs here and start local agents
      sites:
        - {name: site-a, address: https://site-a.example.org:8443}

With ``demo: true`` the stage plays every party on this machine, saying so: it makes all the keys in
``certs`` (a real site makes its own with ``ensemble-dask site init``), a synthetic table cut into the
sites' shares, each site's ``site.yaml`` under ``ROOT/sites/NAME`` and one agent process per site
(``demo_min_sites``: the sites' ``min_sites``).

The coordinator's store receives the model (``federated/alpha``, ``federated/beta``), a checkpoint of
``(alpha, beta)`` after every EM iteration (``federated/checkpoint.npz``, removed when the run completes;
a rerun resumes from it) and ``report/metrics.json``. Memberships stay with each site. With
``method: kcc`` the model is ``federated/centers`` (``K x G``, the blocks' ``offsets`` in its
attributes); its parameters are ``n_clusters``, ``n_init``, ``max_iter``, ``tol`` (KCC's) and
``n_labels``; it starts from clusters of the basic partitions (KCC's ``init="clusters"``), and it is
not checkpointed (a rerun starts over).

The demo's sites on this machine are :mod:`.sites`.
"""

from __future__ import annotations

import contextlib
import io
import json
import logging
import time
import zipfile
from pathlib import Path

import numpy as np

from .._validation import InputError, check_int, stage_seed
from ..io.store import RunStore, workflow_store_url
from .sites import LocalSiteAgents, _demo_layout, _exists, make_demo_sites, write_demo_configs

__all__ = ["run_federated_workflow", "FEDERATED_KEYS"]

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
    "timeout",
    "demo",
    "demo_min_sites",
}


# --------------------------------------------------------------------------- checkpoint in the store


#: the coordinator's BCE checkpoint in its run store
CHECKPOINT = "federated/checkpoint.npz"
_OLD_CHECKPOINT = "federated/checkpoint"  # a zarr group, before the checkpoint was one file


class StoreCheckpoint:
    """The coordinator's checkpoint: the file :data:`CHECKPOINT` of a run store, written whole after every EM
    iteration in one step (one PUT on an object store, where the zarr group ``federated/checkpoint`` of
    earlier versions took 36-68 requests): ``alpha``, ``beta`` (and the best start's) as float64 arrays, the
    rest as a JSON document.
    """

    def __init__(self, store):
        self.store = store

    def save(self, state):
        meta = {
            "run_key": state["run_key"],
            "init": int(state["init"]),
            "trace": [float(v) for v in state["trace"]],
            "gamma_tag": state.get("gamma_tag"),
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
                "tag": b.get("tag"),
            }
            arrays["best_alpha"], arrays["best_beta"] = b["params"]["alpha"], b["params"]["beta"]
        buf = io.BytesIO()
        np.savez(
            buf, meta=np.array(json.dumps(meta)), **{k: np.asarray(v, np.float64) for k, v in arrays.items()}
        )
        self.store.write_bytes(CHECKPOINT, buf.getvalue())

    def load(self):
        """The saved state, or None; :class:`InputError` naming the file when it cannot be read."""
        url = self.store._file_url(CHECKPOINT)
        try:
            saved = np.load(io.BytesIO(self.store.read_bytes(CHECKPOINT)), allow_pickle=False)
            meta = json.loads(str(saved["meta"]))
            state = {
                "run_key": meta["run_key"], "init": meta["init"], "trace": meta["trace"], "params": None,
                "gamma_tag": meta.get("gamma_tag"),
            }  # fmt: skip
            if "alpha" in saved:
                state["params"] = {"alpha": saved["alpha"], "beta": saved["beta"]}
            state["best"] = meta.get("best") and {
                **meta["best"],
                "params": {"alpha": saved["best_alpha"], "beta": saved["best_beta"]},
            }
        except FileNotFoundError:
            if _OLD_CHECKPOINT in self.store.group:
                logger.warning(
                    "the federated checkpoint of an earlier version in %r is not read: the run starts over",
                    self.store.url,
                )
            return None
        except (EOFError, ValueError, KeyError, TypeError, zipfile.BadZipFile) as exc:
            raise InputError(
                f"the federated run's checkpoint {url!r} cannot be read ({type(exc).__name__}: {exc}); "
                "run with --restart to discard it"
            ) from exc
        return state

    def clear(self):
        self.store.remove(CHECKPOINT)
        if _OLD_CHECKPOINT in self.store.group:
            del self.store.group[_OLD_CHECKPOINT]


# --------------------------------------------------------------------------- the workflow


def _check_sites_section(raw_sites, demo):
    if not isinstance(raw_sites, list) or not raw_sites:
        raise InputError(f"'federated.sites' must be a non-empty list of sites; got {raw_sites!r}")
    sites = []
    for i, s in enumerate(raw_sites):
        if not isinstance(s, dict) or not s.get("name"):
            raise InputError(
                f"federated.sites[{i}] must be a dict with the site's name and address; got {s!r}"
            )
        extra = set(s) - {"name", "address"}
        if extra:
            raise InputError(
                f"federated.sites[{i}] ({s['name']!r}) has {sorted(extra)}: a site's data, output, keys and "
                "policy live in the site's own config (ensemble-dask site serve site.yaml); the workflow "
                "names only each site's name and address"
            )
        if not demo and not s.get("address"):
            raise InputError(f"federated.sites[{i}] ({s['name']!r}) has no address (https://HOST:PORT)")
        sites.append({"name": str(s["name"]), "address": s.get("address")})
    names = [s["name"] for s in sites]
    dup = sorted({n for n in names if names.count(n) > 1})
    if dup:
        raise InputError(f"federated.sites names {dup} more than once")
    return sites


def run_federated_workflow(spec, *, progress=False):
    """Run the ``federated:`` section of a workflow; returns the coordinator's summary (metrics.json)."""
    from ..federated.coordinator.link import client_context
    from ..federated.protocol.certs import make_certs
    from .report import check_report_settings

    fed = dict(spec.get("federated") or {})
    if "insecure" in fed or "scheduler" in spec:
        raise InputError(
            "a federated workflow talks to site agents over mutual TLS only: 'federated.insecure' and "
            "'scheduler' are gone (each site runs its own Dask cluster)"
        )
    unknown = set(fed) - FEDERATED_KEYS
    if unknown:
        raise InputError(f"unknown key(s) {sorted(unknown)} in 'federated'; known: {sorted(FEDERATED_KEYS)}")
    method = _check_method(fed.pop("method", "bce"))
    demo = fed.pop("demo", False)
    sites = _check_sites_section(fed.pop("sites", None), demo)
    n_clusters = check_int(fed.pop("n_clusters", None), "federated.n_clusters", min_value=1)
    certs = fed.pop("certs", None)
    timeout = _check_timeout(fed.pop("timeout", 120.0))
    min_sites = fed.pop("demo_min_sites", None)
    if method == "kcc":
        _check_kcc_params(n_clusters, fed)  # before any site is called
    else:
        _check_bce_params(n_clusters, fed)
    seed = int(spec.get("seed", 0))
    fed.setdefault("random_state", int(stage_seed(seed, "federated").generate_state(1)[0]))
    store = RunStore(workflow_store_url(spec), spec.get("storage_options"))
    check_report_settings(store)  # report/metrics.json and the page are written at the end of the run
    if not certs:
        raise InputError(
            "set federated.certs to the directory of the coordinator's TLS files (ca.pem, coordinator.pem, "
            "coordinator-key.pem)"
        )
    names = [s["name"] for s in sites]
    record = {"sites": names, "n_clusters": n_clusters, "tls": True, **fed}
    if method != "bce":
        record["method"] = method
    checkpoint = StoreCheckpoint(store)
    bar = _progress_bar(
        progress, fed.get("max_iter", 300), "federated KCC" if method == "kcc" else "federated EM"
    )
    with contextlib.ExitStack() as stack:
        if demo:
            root = Path(store.url).parent
            if not (Path(certs) / "ca.pem").exists():
                print(
                    f"demo: making every key of the federation in {certs} (a real site makes its own: "
                    "ensemble-dask site init NAME)"
                )
                make_certs(certs, ["coordinator", *names])
            local = _demo_layout(sites, root)
            if not all(_exists(s["url"]) for s in local):
                make_demo_sites(local, demo, seed, root / f"{Path(store.url).stem}-demo")
            agents = stack.enter_context(LocalSiteAgents(write_demo_configs(local, certs, min_sites)))
            sites = [{"name": s["name"], "address": agents.addresses[s["name"]]} for s in sites]
        elif min_sites is not None:
            raise InputError(
                "federated.demo_min_sites is for the demo: a real site sets min_sites in its own config"
            )
        context = client_context(certs)
        stack.enter_context(store.stage("federated", record, [], writes=("federated",)))
        try:
            if method == "kcc":
                from ..federated.coordinator.kcc import run_federated_kcc

                result = run_federated_kcc(sites, n_clusters, context, timeout=timeout, progress=bar, **fed)
                summary = _write_kcc_results(store, result, n_clusters, True)
            else:
                from ..federated.coordinator.bce import run_federated_bce

                result = run_federated_bce(
                    sites, n_clusters, context, timeout=timeout, checkpoint=checkpoint, progress=bar, **fed
                )
                summary = _write_results(store, result, n_clusters, True)
        finally:
            if bar is not None:
                bar.close()
        checkpoint.clear()  # complete (a BCE run's checkpoint left by an earlier run is not this one's)
    return summary


def _check_timeout(value):
    if isinstance(value, bool) or not isinstance(value, (int, float)) or not 0 < value < float("inf"):
        raise InputError(
            f"The 'federated.timeout' parameter must be a positive number of seconds; got {value!r}"
        )
    return float(value)


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
    KCC(n_clusters, init="clusters", **{k: fed[k] for k in _KCC_KEYS if k in fed})._validate_params()


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
    BCE(n_clusters, **{k: fed[k] for k in keys if k in fed})._validate_params()


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
        "dropped": list(result.dropped),
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

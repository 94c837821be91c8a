"""The demo federation on this machine, and a store cut into sites.

:func:`split_sites` cuts the ``labels`` (and ``y_true``) of a run store into per-site arrays;
:func:`make_demo_sites` makes a synthetic table's sites' shares, :func:`write_demo_configs` each site's
``site.yaml`` and :class:`LocalSiteAgents` runs one agent process per site (``python -m
ensemble_dask.federated.site.agent``), as ``federated: {demo: true}`` does. A real site makes its own keys and
config (``ensemble-dask site init``) and runs its own agent.
"""

from __future__ import annotations

import logging
import os
import time
from pathlib import Path

import numpy as np

from .._validation import InputError
from ..io.store import RunStore

logger = logging.getLogger(__name__)

__all__ = ["split_sites", "make_demo_sites", "write_demo_configs", "LocalSiteAgents", "DEMO_DEFAULTS"]

DEMO_DEFAULTS = {
    "data": "synthetic:kdd99?n=20000&seed=0",
    "n_clusterings": 30,
    "k_min": 2,
    "k_max": 10,
    "rate": 0.5,
}


def split_sites(store, out, names, *, storage_options=None):
    """Write ``store``'s labels (and ``y_true``), cut in contiguous row blocks, as arrays per site.

    Returns, per site, ``{"name", "data": {"labels": url[, "reference": url]}}``: the ``data`` section of
    that site's own ``site.yaml`` (:mod:`ensemble_dask.federated.site.agent`).
    """
    import zarr

    from ..federated.protocol.certs import _check_name
    from ..io.urls import make_zarr_store

    if not names:
        raise InputError("split_sites needs at least one site name")
    for name in names:
        _check_name(name)  # a plain name: NAME/ below ``out``, never outside it
    dup = sorted({n for n in names if list(names).count(n) > 1})
    if dup:
        raise InputError(f"site names must be distinct; {dup} given more than once")
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
        site = {"name": name, "data": {"labels": url}}
        if y is not None:
            ref = f"{root}/{name}/reference.zarr"
            zr = zarr.create_array(
                make_zarr_store(ref, storage_options), shape=(b - a,), dtype="int32", overwrite=True
            )
            zr[:] = np.asarray(y[a:b]).astype(np.int32)
            site["data"]["reference"] = ref
        sites.append(site)
    return sites


def make_demo_sites(sites, demo, seed, workdir):
    """Make the demo's data: a synthetic table, base clusterings (on a local Dask cluster of the
    coordinator's machine), cut into the declared sites' URLs."""
    from ..runtime.clients import dask_client
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
    with dask_client(n_workers=1, processes=False) as client:
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


def _demo_layout(sites, root):
    """The demo's site declarations: every site's files under ``ROOT/sites/NAME``."""
    out = []
    for s in sites:
        d = Path(root) / "sites" / s["name"]
        out.append(
            {
                **s,
                "dir": d,
                "url": str(d / "labels.zarr"),
                "reference": str(d / "reference.zarr"),
                "output": str(d / "memberships.zarr"),
            }
        )
    return out


def write_demo_configs(sites, certs, min_sites=None):
    """Each demo site's own config (``site.yaml`` in its directory): what a real site writes for itself."""
    import yaml

    certs = Path(certs).resolve()
    federation = {s["name"]: str(certs / f"{s['name']}-mask.pub") for s in sites}
    paths = []
    for s in sites:
        d = Path(s["dir"]).resolve()
        d.mkdir(parents=True, exist_ok=True)
        (d / "address").unlink(missing_ok=True)
        config = {
            "name": s["name"],
            "listen": "127.0.0.1:0",
            "coordinator": "coordinator",
            "tls": {
                "ca": str(certs / "ca.pem"),
                "cert": str(certs / f"{s['name']}.pem"),
                "key": str(certs / f"{s['name']}-key.pem"),
            },
            "mask_key": str(certs / f"{s['name']}-mask.key"),
            "federation": federation,
            "data": {"labels": "labels.zarr"},
            "output": "memberships.zarr",
            "checkpoint": "state/gamma",
            "state": "state",
            "ready_file": "address",
        }
        if s.get("reference") and _exists(s["reference"]):
            config["data"]["reference"] = "reference.zarr"
        if min_sites is not None:
            config["min_sites"] = int(min_sites)
        (d / "site.yaml").write_text(yaml.safe_dump(config, sort_keys=False))
        paths.append(d / "site.yaml")
    return paths


class LocalSiteAgents:
    """One site agent process per config on this machine (``python -m ensemble_dask.federated.site.agent``).

    A context manager: starts every agent, waits for each to write its address, and stops them on exit.
    ``addresses`` maps site names (their configs' folder names) to ``https://127.0.0.1:PORT``.
    """

    def __init__(self, configs, timeout=120.0):
        self.configs = {Path(c).parent.name: Path(c) for c in configs}
        self.timeout = float(timeout)
        self.procs, self.logs, self.addresses = {}, {}, {}

    def start(self, name):
        import subprocess
        import sys

        d = self.configs[name].parent
        (d / "address").unlink(missing_ok=True)
        if name in self.logs:
            self.logs[name].close()
        self.logs[name] = open(d / "agent.log", "ab")  # noqa: SIM115 - closed in stop()
        self.procs[name] = subprocess.Popen(
            [sys.executable, "-m", "ensemble_dask.federated.site.agent", str(self.configs[name])],
            stdout=self.logs[name],
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
        )

    def wait(self, name):
        d, proc = self.configs[name].parent, self.procs[name]
        deadline = time.monotonic() + self.timeout
        while not (d / "address").exists():
            if proc.poll() is not None:
                tail = (d / "agent.log").read_text(errors="replace").strip().splitlines()[-1:]
                raise InputError(f"the site agent {name!r} exited ({proc.returncode}): {tail}")
            if time.monotonic() > deadline:
                raise InputError(f"the site agent {name!r} did not start within {self.timeout:g} s")
            time.sleep(0.05)
        self.addresses[name] = (d / "address").read_text().strip()
        return self.addresses[name]

    def kill(self, name):
        """Kill an agent at once (SIGKILL), as a crash would."""
        import signal

        self.procs[name].send_signal(signal.SIGKILL)
        self.procs[name].wait()

    def __enter__(self):
        if self.procs:  # started already (``with`` on agents that were started): the same agents
            return self
        try:
            for name in self.configs:
                self.start(name)
            for name in self.configs:
                self.wait(name)
        except BaseException:
            self.stop()
            raise
        return self

    def __exit__(self, *exc):
        self.stop()

    def stop(self):
        import subprocess

        for proc in self.procs.values():
            if proc.poll() is None:
                proc.terminate()
        for proc in self.procs.values():
            try:
                proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                proc.kill()
                proc.wait()
        for log in self.logs.values():
            log.close()
        self.procs.clear()
        self.logs.clear()

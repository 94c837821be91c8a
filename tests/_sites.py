"""Site agents for the federation's tests: real processes on 127.0.0.1, each with its own config and keys."""

from __future__ import annotations

import copy
from pathlib import Path

import numpy as np
import yaml

from ensemble_dask.federated.coordinator.link import client_context
from ensemble_dask.federated.protocol.certs import make_certs
from ensemble_dask.stages.sites import LocalSiteAgents, _demo_layout, _write_array, write_demo_configs


def start_sites(
    root, labels, *, references=None, min_sites=None, allow_plain=False, extra=("mallory",), config=None
):
    """Agents of one site per entry of ``labels`` (``{name: n_i x N int array}``); returns the started
    :class:`LocalSiteAgents` (stop it, or use it in ``with``) with ``.certs``, ``.context()`` and ``.sites``.

    ``extra`` names parties that get certificates and masking keys from the same CA but belong to no
    federation (an attacker's credentials). ``config(name, spec) -> spec`` edits each site's own config.
    """
    root = Path(root)
    names = sorted(labels)
    certs = root / "certs"
    make_certs(certs, ["coordinator", *names, *extra])
    local = _demo_layout([{"name": n} for n in names], root)
    for s in local:
        _write_array(s["url"], np.asarray(labels[s["name"]], dtype=np.int32))
        if references is not None:
            _write_array(s["reference"], np.asarray(references[s["name"]], dtype=np.int32))
    configs = write_demo_configs(local, certs, min_sites)
    for cfg in configs:
        spec = yaml.safe_load(cfg.read_text())
        if allow_plain:
            spec["allow_plain"] = True
        if config is not None:
            spec = config(cfg.parent.name, spec)
        cfg.write_text(yaml.safe_dump(spec, sort_keys=False))
    agents = LocalSiteAgents(configs).__enter__()
    agents.certs = certs
    agents.context = lambda name="coordinator": client_context(certs, name)
    agents.sites = lambda: [{"name": n, "address": agents.addresses[n]} for n in names]
    return agents


def split_rows(labels, names, y=None):
    """Contiguous row blocks of ``labels`` (and ``y``) per site name."""
    bounds = np.linspace(0, labels.shape[0], len(names) + 1).astype(int)
    parts = {n: labels[a:b] for n, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)}
    refs = None if y is None else {n: y[a:b] for n, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)}
    return parts, refs


class Crash(Exception):
    """The coordinator's process "crashing" (:class:`CrashingCheckpoint`)."""


class CrashingCheckpoint:
    """The coordinator's checkpoint in memory; the process "crashes" at its ``crash_at``-th save."""

    def __init__(self, crash_at=None):
        self.state, self.saves, self.crash_at = None, 0, crash_at

    def load(self):
        return copy.deepcopy(self.state)

    def save(self, state):
        self.saves += 1
        if self.saves == self.crash_at:
            raise Crash(f"before save {self.saves}")
        self.state = copy.deepcopy(state)


def towards(n_categories, h, k=2):
    """BCE parameters (k clusters, flat over ``n_categories`` labels) whose E-step puts every row's gamma on
    cluster ``h``: a crafted query of the attacks' tests."""
    alpha = np.full(k, 1e-10)
    alpha[h] = 1e12
    return {"alpha": alpha, "beta": np.ones((k, n_categories))}

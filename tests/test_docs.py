"""The API reference (docs/api.md, built by mkdocs with mkdocstrings) names every public module's exports."""

from __future__ import annotations

import importlib
import inspect
import re
from pathlib import Path

import pytest

API = Path(__file__).resolve().parents[1] / "docs" / "api.md"
PUBLIC = [
    "ensemble_dask",
    "ensemble_dask.consensus",
    "ensemble_dask.consensus.registry",
    "ensemble_dask.coassoc",
    "ensemble_dask.pipeline",
    "ensemble_dask.federated",
    "ensemble_dask.runtime.clients",
    "ensemble_dask.metrics",
    "ensemble_dask.io.lease",
]


def _targets():
    return set(re.findall(r"^::: (\S+)$", API.read_text(), flags=re.M))


@pytest.mark.parametrize("module", PUBLIC)
def test_every_export_is_in_the_api_reference(module):
    """A name is documented where the reference renders it: its public module (when mkdocstrings sees it
    there: defined or imported at the top), or the module that defines it (the federation's exports load
    lazily)."""
    targets = _targets()
    mod = importlib.import_module(module)
    missing = []
    for name in getattr(mod, "__all__", []):
        obj = getattr(mod, name)
        home = getattr(obj, "__module__", None) if inspect.isclass(obj) or inspect.isfunction(obj) else None
        lazy = module == "ensemble_dask.federated"
        if lazy:
            home = f"{module}{mod._EXPORTS[name]}"
        where = {home, f"{home}.{name}"} if lazy else {module, home, f"{home}.{name}", f"{module}.{name}"}
        if name != "__version__" and not (where & targets):
            missing.append(name)
    assert not missing, f"{module}: {missing} are not in docs/api.md"

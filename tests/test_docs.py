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
    "ensemble_dask.runtime.faults",
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


# ------------------------------------------------------------------ the CLI reference (docs/cli-reference.md)

DOCS = API.parent
ROOT = DOCS.parent


def _hook(name):
    """A hook module of the documentation build (``docs/_hooks/NAME.py``, loaded as MkDocs loads it)."""
    import importlib.util

    spec = importlib.util.spec_from_file_location(f"docs_hook_{name}", DOCS / "_hooks" / f"{name}.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _command_paths(ap, words=()):
    """Every command below ``ap`` as its words (``("certs", "ca")``), from the parser's own subparsers."""
    import argparse

    paths = []
    for action in ap._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sub in action.choices.items():
                paths.append((*words, name))
                paths.extend(_command_paths(sub, (*words, name)))
    return paths


def _missing_commands(page, ap):
    """The commands of ``ap`` that have no heading, or no help text, on the generated ``page``."""
    missing = []
    for words in _command_paths(ap):
        name = " ".join((ap.prog, *words))
        heading = re.search(rf"^#+ {re.escape(name)}$", page, flags=re.M)
        if not heading or f"usage: {name} " not in page:
            missing.append(name)
    return missing


def _subparsers(ap):
    import argparse

    return next(a for a in ap._actions if isinstance(a, argparse._SubParsersAction))


def test_every_subcommand_is_in_the_cli_reference():
    from ensemble_dask.cli._parser import parser

    hook = _hook("cli_reference")
    page = hook.cli_reference_markdown()
    paths = _command_paths(parser())
    assert ("certs", "ca") in paths and ("site", "serve") in paths  # the walk reaches the nested commands
    assert _missing_commands(page, parser()) == []
    assert re.search(r"^## ensemble-dask$", page, flags=re.M) and "usage: ensemble-dask [-h]" in page


def test_the_check_fails_when_a_command_is_missing():
    """A command the page lacks is reported: the check reads the parser's choices, not a list of names."""
    from ensemble_dask.cli._parser import parser

    hook = _hook("cli_reference")
    page = hook.cli_reference_markdown()
    grown = parser()
    _subparsers(grown).add_parser("zz-new", help="a command added after the page was made")
    certs = _subparsers(grown).choices["certs"]
    _subparsers(certs).add_parser("zz-nested", help="a nested one")
    assert _missing_commands(page, grown) == ["ensemble-dask certs zz-nested", "ensemble-dask zz-new"]
    # and the page generated from that parser has them: the generator walks the parser too
    assert _missing_commands(hook.cli_reference_markdown(grown), grown) == []


def test_the_cli_reference_does_not_depend_on_the_terminal(monkeypatch):
    hook = _hook("cli_reference")
    monkeypatch.setenv("COLUMNS", "40")
    narrow = hook.cli_reference_markdown()
    monkeypatch.setenv("COLUMNS", "250")
    wide = hook.cli_reference_markdown()
    assert narrow == wide


def test_the_build_generates_the_cli_reference():
    """mkdocs.yml runs the hook, and the page holds the marker the hook replaces."""
    import yaml

    config = yaml.safe_load((ROOT / "mkdocs.yml").read_text())
    assert "docs/_hooks/cli_reference.py" in config["hooks"]
    hook = _hook("cli_reference")
    assert hook.MARKER in (DOCS / hook.PAGE).read_text()
    assert {"CLI reference": hook.PAGE} in config["nav"]

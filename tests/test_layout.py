"""The package tree shows the data flow: imports point one way, no cycles, no overlong module.

Layers, lowest first, in the order of the data flow (a module may import its own layer and the layers below
it, never above): the leaf helpers ``_validation``, ``_config`` and ``metrics`` < ``io`` (URLs, readers,
datasets, the run store) < ``runtime`` (clients, clusters, threads) < ``partitions`` (base clusterers) <
``coassoc`` < ``consensus`` < ``rowblocks`` (BCE and KCC on one cluster's row blocks) < ``federated`` <
``report`` (figures and HTML) < ``stages`` < ``pipeline`` (with ``_workflow_checks``, its validation of a
whole workflow) < ``cli`` (with ``__main__``, ``python -m ensemble_dask``). The package's own
``__init__`` is the public facade and may import from any layer. Inside ``consensus`` the families
stand on floors of their own (:data:`CONSENSUS_FLOORS`).
"""

from __future__ import annotations

import ast
from pathlib import Path

import pytest

import ensemble_dask

ROOT = Path(ensemble_dask.__file__).resolve().parent
# above the leaf helpers; modules in one tuple share a layer
LAYERS = [
    "io",
    "runtime",
    "partitions",
    "coassoc",
    "consensus",
    "rowblocks",
    "federated",
    "report",
    "stages",
    ("pipeline", "_workflow_checks", "estimator"),
    ("cli", "__main__"),
]
MAX_LINES = 600


#: the only modules at the top of the package: everything else is in a layer's folder
LEAVES = {
    "ensemble_dask._validation",
    "ensemble_dask._config",
    "ensemble_dask.metrics",
    "ensemble_dask.__main__",
    "ensemble_dask",
}


def _module_name(path):
    parts = path.relative_to(ROOT.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(ROOT.rglob("*.py"))}


def _layer(module):
    parts = module.split(".")
    if len(parts) == 1:
        return None  # the package facade
    top = parts[1]
    for i, layer in enumerate(LAYERS, start=1):
        if top == layer or (isinstance(layer, tuple) and top in layer):
            return i
    return 0


def _imports(module, path, *, top_level_only=False):
    tree = ast.parse(path.read_text())
    is_pkg = path.name == "__init__.py"
    nodes = tree.body if top_level_only else ast.walk(tree)
    out = set()
    for node in nodes:
        if isinstance(node, ast.ImportFrom):
            if node.level:
                base = module.split(".") if is_pkg else module.split(".")[:-1]
                base = base[: len(base) - (node.level - 1)]
                target = ".".join(base + ([node.module] if node.module else []))
            else:
                target = node.module or ""
            if not target.startswith("ensemble_dask"):
                continue
            for alias in node.names:  # "from . import x" names a module
                sub = f"{target}.{alias.name}"
                out.add(sub if sub in MODULES else target)
        elif isinstance(node, ast.Import):
            out.update(a.name for a in node.names if a.name.startswith("ensemble_dask"))
    return out


def test_no_loose_top_level_modules():
    loose = sorted(m for m in MODULES if _layer(m) in (0, None) and m.count(".") <= 1 and m not in LEAVES)
    assert not loose, f"modules at the package's top outside any layer: {loose}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_imports_point_down(module):
    mine = _layer(module)
    if mine is None:
        return
    upward = sorted(t for t in _imports(module, MODULES[module]) if (_layer(t) or 0) > mine)
    assert not upward, f"{module} (layer {mine}) imports from a layer above it: {upward}"


#: consensus/ by family, lowest first: a family imports its own package and the floors below it, so the
#: families of one floor (pcc, bce, kcc, graph) never import each other
CONSENSUS_FLOORS = {
    "_common": 0,
    "baselines": 1,
    "starts": 2,
    "pcc": 3,
    "bce": 3,
    "kcc": 3,
    "graph": 3,
    "selection": 4,
}


def _family(module):
    parts = module.split(".")
    return parts[2] if len(parts) > 2 and parts[1] == "consensus" and parts[2] in CONSENSUS_FLOORS else None


def _family_violations(module, imports):
    mine = _family(module)
    return sorted(
        t
        for t in imports
        if _family(t) not in (None, mine) and CONSENSUS_FLOORS[_family(t)] >= CONSENSUS_FLOORS[mine]
    )


@pytest.mark.parametrize("module", sorted(m for m in MODULES if _family(m)))
def test_consensus_families_import_down_only(module):
    bad = _family_violations(module, _imports(module, MODULES[module]))
    assert not bad, f"{module} ({_family(module)}) imports a family beside or above it: {bad}"


def test_every_consensus_module_is_in_a_family():
    loose = sorted(
        m
        for m in MODULES
        if m.startswith("ensemble_dask.consensus.")
        and not _family(m)
        and m != "ensemble_dask.consensus.registry"
    )
    assert not loose, f"consensus modules outside a family: {loose}"


@pytest.mark.parametrize("module", sorted(MODULES))
def test_internal_imports_resolve(module):
    """Every ensemble_dask import names a module or package that exists (function-level ones too)."""
    missing = sorted(t for t in _imports(module, MODULES[module]) if t not in MODULES)
    assert not missing, f"{module} imports modules that do not exist: {missing}"


def test_no_import_cycles():
    graph = {
        m: {t for t in _imports(m, p) if t in MODULES and t != m}  # deferred (function-level) imports too
        for m, p in MODULES.items()
    }
    # a package's __init__ re-exporting its submodules is not a cycle with them
    for m in graph:
        graph[m] = {t for t in graph[m] if not (MODULES[t].name == "__init__.py" and m.startswith(t + "."))}
    state = {}

    def visit(m, stack):
        state[m] = "open"
        for t in graph[m]:
            if state.get(t) == "open":
                raise AssertionError("import cycle: " + " -> ".join(stack[stack.index(t) :] + [t]))
            if t not in state:
                visit(t, stack + [t])
        state[m] = "done"

    for m in graph:
        if m not in state:
            visit(m, [m])


@pytest.mark.parametrize("module", sorted(MODULES))
def test_modules_stay_short(module):
    n = len(MODULES[module].read_text().splitlines())
    assert n <= MAX_LINES, f"{module} has {n} lines: split it (the house limit is 600)"


def test_every_module_of_cached_kernels_imports_the_cache_locator_first():
    """numba picks a kernel's cache locator when the kernel is decorated, and the package's ``__init__``
    imports no numba: each module with ``cache=True`` kernels imports ``runtime.numba_cache`` (which registers
    the package's locator on import) at its top, so their caches never land beside the sources."""
    locator = "ensemble_dask.runtime.numba_cache"
    missing = sorted(
        m
        for m, path in MODULES.items()
        if m != locator and "cache=True" in path.read_text()
        and locator not in _imports(m, path, top_level_only=True)
    )  # fmt: skip
    assert not missing, f"modules with cached kernels that do not import {locator} first: {missing}"


def test_the_checks_can_fail(tmp_path):
    """The layer rule resolves relative imports: an import of the CLI from a solver would be caught."""
    fake = tmp_path / "ensemble_dask" / "consensus" / "bad.py"
    fake.parent.mkdir(parents=True)
    fake.write_text("from ..cli import main\nfrom . import pcc\n")
    assert _imports("ensemble_dask.consensus.bad", fake) == {
        "ensemble_dask.cli",
        "ensemble_dask.consensus.pcc",
    }
    assert _layer("ensemble_dask.cli") > _layer("ensemble_dask.consensus.bad")
    # a family importing its neighbour (KCC's start taken from BCE's seeding) or one above it
    kcc = "ensemble_dask.consensus.kcc._kcc"
    assert _family_violations(kcc, {"ensemble_dask.consensus.bce._seeding"}) == [
        "ensemble_dask.consensus.bce._seeding"
    ]
    assert _family_violations("ensemble_dask.consensus.starts", {kcc}) == [kcc]
    assert not _family_violations(
        kcc, {"ensemble_dask.consensus.starts", "ensemble_dask.consensus.kcc._blocks"}
    )


def test_tests_mirror_the_package():
    """Each folder of tests/ is a folder of the package (tests/consensus for ensemble_dask/consensus, ...);
    the tests of the whole project (layout, docs, install, deploy, pipeline) stay at the top."""
    tests = Path(__file__).resolve().parent
    folders = {p.name for p in tests.iterdir() if p.is_dir() and p.name not in ("data", "__pycache__")}
    packages = {p.name for p in ROOT.iterdir() if (p / "__init__.py").exists()}
    stray = sorted(folders - packages)
    assert folders and not stray, f"test folders that are no package folder: {stray}"


def _makes_dask_clusters(tree):
    """Calls in ``tree`` that make a Dask client, cluster or TLS security object."""
    names = {"Client", "LocalCluster", "SpecCluster", "Security"}
    return sorted(
        node.func.id if isinstance(node.func, ast.Name) else node.func.attr
        for node in ast.walk(tree)
        if isinstance(node, ast.Call)
        and (getattr(node.func, "id", None) in names or getattr(node.func, "attr", None) in names)
    )


@pytest.mark.parametrize("module", sorted(m for m in MODULES if not m.startswith("ensemble_dask.runtime")))
def test_only_runtime_makes_clients_and_clusters(module):
    made = _makes_dask_clusters(ast.parse(MODULES[module].read_text()))
    assert not made, f"{module} makes {made}: clients, clusters and their security come from runtime/"


def test_the_cluster_check_can_fail():
    assert _makes_dask_clusters(ast.parse("from distributed import Client\nc = Client('tcp://x:1')")) == [
        "Client"
    ]
    assert _makes_dask_clusters(ast.parse("import distributed\ndistributed.LocalCluster()")) == [
        "LocalCluster"
    ]


def test_a_command_that_reads_no_table_and_draws_nothing_imports_neither_pandas_nor_matplotlib():
    """Every command starts a Python process (and the embedded cluster's workers): pandas (0.9 s) came
    with the run store's package and the workflow checks, matplotlib (1.2 s) with the cluster's facts for
    the report, in every ``generate``, ``coassoc`` and ``consensus`` command. Only what reads a table or
    draws a page imports them now."""
    import subprocess
    import sys

    modules = ["cli", "pipeline", "stages.generate", "stages.coassoc", "stages.consensus", "io.store"]
    code = "import sys\n" + "".join(f"import ensemble_dask.{m}\n" for m in modules)
    code += "print(sorted(m for m in ('pandas', 'matplotlib') if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def test_the_help_of_every_command_imports_no_kernel_and_no_solver():
    """Every command reads the registry for ``consensus --help``: it imports no solver, numba or
    scikit-learn (a second and more of CPU in each process), which come on first use."""
    import subprocess
    import sys

    code = (
        "import sys\nfrom ensemble_dask.cli import main\n"
        "try:\n    main(['consensus', '--help'])\nexcept SystemExit:\n    pass\n"
        "print(sorted(m for m in ('numba', 'sklearn', 'ensemble_dask.consensus.pcc') if m in sys.modules),"
        " file=sys.stderr)"
    )
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True)
    assert "pcc" in out.stdout.lower()  # the help text lists the methods
    assert out.stderr.strip().splitlines()[-1] == "[]"


def test_a_site_agent_imports_no_dask_graph_matching_or_graph_algorithm():
    """A site agent is a process of its own, started with each federation (and in the tests, 80 times): its
    join imported the co-association's Dask graph and zarr writer, scipy.optimize and scipy's graph
    algorithms through the packages of the model code it uses (1.5 s of CPU with its cluster's, now 1.2 s)."""
    import subprocess
    import sys

    modules = ["federated.site.agent", "federated.coordinator.bce", "federated.site.rows", "runtime.site"]
    heavy = ("scipy.optimize", "scipy.sparse.csgraph", "sklearn", "ensemble_dask.coassoc.build")
    code = "import sys\n" + "".join(f"import ensemble_dask.{m}\n" for m in modules)
    code += f"print(sorted(m for m in {heavy!r} if m in sys.modules))"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"


def _reached(start, graph):
    """Every module that ``start`` imports, directly or through others (function-level imports too)."""
    seen, todo = set(), [start]
    while todo:
        for t in graph.get(todo.pop(), ()):
            if t not in seen:
                seen.add(t)
                todo.append(t)
    return seen


SITE, COORDINATOR = "ensemble_dask.federated.site", "ensemble_dask.federated.coordinator"


@pytest.mark.parametrize("module", sorted(m for m in MODULES if m == SITE or m.startswith(SITE + ".")))
def test_no_site_module_reaches_the_coordinators_code(module):
    """The trust boundary in the tree: what runs on a site (``federated/site/``) imports the shared protocol
    and the model code, never the coordinator's modules, not even through a module between (the site's code
    imported ``rows.py``, which imported ``coordinator.py``)."""
    graph = {m: {t for t in _imports(m, p) if t in MODULES} for m, p in MODULES.items()}
    bad = sorted(t for t in _reached(module, graph) if t == COORDINATOR or t.startswith(COORDINATOR + "."))
    assert not bad, f"{module} reaches the coordinator's {bad}"


def test_the_reach_check_can_fail():
    graph = {"s.a": {"s.b"}, "s.b": {"x.c"}, "x.c": {"coord.d"}}
    assert _reached("s.a", graph) == {"s.b", "x.c", "coord.d"}


@pytest.mark.parametrize("module", ["ensemble_dask", "ensemble_dask.consensus", "ensemble_dask.coassoc"])
def test_names_imported_on_first_use_are_also_imported_for_static_readers(module):
    """A package that imports its names on first use (``__getattr__``) still binds each name of ``__all__``
    in its source (under ``if TYPE_CHECKING``): the API docs (griffe) and type checkers read the source, and
    without it the API page silently lost every estimator of ``ensemble_dask.consensus``."""
    import importlib

    path = MODULES[module]
    bound = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, (ast.Import, ast.ImportFrom)):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, (ast.FunctionDef, ast.ClassDef)):
            bound.add(node.name)
        elif isinstance(node, ast.Assign):
            bound |= {t.id for t in node.targets if isinstance(t, ast.Name)}
    mod = importlib.import_module(module)
    assert sorted(set(mod.__all__) - bound) == []
    for name in mod.__all__:
        assert getattr(mod, name) is not None and name in dir(mod)

"""The first hour of a new user: where numba caches, and the package tree that pip installs.

numba's default ``cache=True`` wrote ``.nbi``/``.nbc`` files into the installed package's ``__pycache__``;
pip's uninstall left them, and the left-over folder shadowed the next (editable) install. These tests run
kernels in fresh interpreters and look at the file system, as a user's machine would.
"""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

import ensemble_dask

PACKAGE = Path(ensemble_dask.__file__).resolve().parent
# A kernel of each kernel module (coassoc counting here; consensus kernels compile the same way).
RUN_KERNEL = textwrap.dedent(
    """
    import numpy as np
    from ensemble_dask.coassoc import coassociation
    pc = coassociation(np.array([[0, 1], [0, 1], [1, 0]]), strategy="full", seed=0)
    assert pc.co.tolist() == [2, 0, 2, 0, 0, 0], pc.co.tolist()
    """
)


def _cache_files(root):
    return {p for p in Path(root).rglob("*") if p.suffix in (".nbi", ".nbc")}


def _run(env_extra):
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env.update(env_extra)
    subprocess.run([sys.executable, "-c", RUN_KERNEL], env=env, check=True, timeout=300)


def test_kernels_cache_outside_the_package(tmp_path):
    before = _cache_files(PACKAGE)
    _run({"XDG_CACHE_HOME": str(tmp_path)})
    assert _cache_files(PACKAGE) == before, "numba wrote cache files into the package folder"
    written = _cache_files(tmp_path / "ensemble_dask" / "numba")
    assert any(p.name.startswith("_kernels.count_symmetric_kernel") for p in written), written


def test_two_copies_of_the_package_share_their_compiled_kernels(tmp_path):
    """``pip install .`` and an editable checkout (or two environments) are two copies of one source, with
    other modification times: the second loads the kernels the first compiled. Before, the cache folder was
    named by a hash of the file's absolute path, and each copy compiled every kernel again (and numba before
    0.68 compares modification times, not contents)."""
    import shutil

    check = RUN_KERNEL + textwrap.dedent(
        """
        from ensemble_dask.coassoc import _kernels
        stats = _kernels.count_symmetric_kernel.stats
        print(sum(stats.cache_hits.values()), sum(stats.cache_misses.values()))
        """
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    counts = []
    for copy in ("a", "b"):
        target = tmp_path / copy / "ensemble_dask"
        shutil.copytree(PACKAGE, target, ignore=shutil.ignore_patterns("__pycache__"))
        for path in target.rglob("*.py"):  # as pip install does: the files' times are the install's
            os.utime(path, (1e9 + len(copy), 1e9 + len(copy) + (copy == "b")))
        out = subprocess.run(
            [sys.executable, "-c", check], env={**env, "PYTHONPATH": str(tmp_path / copy)}, cwd=tmp_path,
            capture_output=True, text=True, check=True, timeout=300,
        )  # fmt: skip
        counts.append(tuple(map(int, out.stdout.split()[-2:])))
    # (hits, misses): compiled by the first copy, loaded by the second
    assert counts == [(0, 1), (1, 0)], counts


def test_numba_cache_dir_still_wins(tmp_path):
    before = _cache_files(PACKAGE)
    _run({"XDG_CACHE_HOME": str(tmp_path / "xdg"), "NUMBA_CACHE_DIR": str(tmp_path / "numba")})
    assert _cache_files(PACKAGE) == before
    assert _cache_files(tmp_path / "numba")
    assert not _cache_files(tmp_path / "xdg")


def test_other_packages_functions_are_not_claimed(tmp_path):
    """A user's own cached function keeps numba's default place, beside its source."""
    mod = tmp_path / "usermod.py"
    mod.write_text("import numba\n\n@numba.njit(cache=True)\ndef twice(x):\n    return 2 * x\n")
    code = (
        f"import sys; sys.path.insert(0, {str(tmp_path)!r}); "
        "import ensemble_dask, usermod; assert usermod.twice(2) == 4"
    )
    env = {k: v for k, v in os.environ.items() if not k.startswith("NUMBA_CACHE")}
    env["XDG_CACHE_HOME"] = str(tmp_path / "xdg")
    subprocess.run([sys.executable, "-c", code], env=env, check=True, timeout=300)
    assert _cache_files(tmp_path / "__pycache__")
    assert not _cache_files(tmp_path / "xdg")


# every test here runs the command, a workflow or a process: the quick set (-m "not slow") leaves them out
pytestmark = pytest.mark.slow

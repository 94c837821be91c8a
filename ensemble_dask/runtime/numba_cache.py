"""Where numba caches this package's compiled kernels: a user cache directory, never the package folder.

With ``cache=True`` numba writes ``.nbi``/``.nbc`` files into the ``__pycache__`` folder beside the source.
In an installed package those files are not in pip's RECORD, so ``pip uninstall`` leaves a
``site-packages/ensemble_dask/`` folder behind, which then shadows a later (editable) install as a namespace
package: ``ImportError: cannot import name '__version__' from 'ensemble_dask' (unknown location)``.

:func:`register` puts a numba cache locator first in numba's list that claims only this package's source
files and keeps their cache under the user's cache directory (``$XDG_CACHE_HOME/ensemble_dask/numba/...``
on Linux, the platform's equivalent elsewhere), or under ``NUMBA_CACHE_DIR`` when it is set; other packages'
functions are not affected.

A kernel's cache is named by its file's place in the package, not by where the package is installed, and is
checked against its source file's content (a SHA-256: numba 0.68 does so too, earlier versions compared the
file's modification time, which ``pip install .`` sets anew), so every copy of the same source (``pip install
.``, an editable checkout, a second virtual environment) loads what one of them compiled.
numba's own locators name the folder by a hash of the file's absolute path: each copy compiled every kernel
again (a fresh environment's test run compiled what its first command had compiled a minute before). Copies
whose sources differ (two branches checked out side by side) share the folder too, and each compiles again
every kernel of a file the other changed: give each its own ``NUMBA_CACHE_DIR``.
"""

from __future__ import annotations

import functools
import hashlib
import os
from pathlib import Path

from numba.core import caching, config
from numba.misc.appdirs import AppDirs

__all__ = ["PACKAGE_DIR", "cache_dir", "register"]

PACKAGE_DIR = Path(__file__).resolve().parents[1]  # the package, ensemble_dask/


def cache_dir() -> Path:
    """The folder under which this package's kernels are cached: ``$NUMBA_CACHE_DIR/ensemble_dask`` when the
    user set one, else the user's cache directory's ``ensemble_dask/numba``."""
    if config.CACHE_DIR:
        return Path(config.CACHE_DIR) / "ensemble_dask"
    return Path(AppDirs(appname="ensemble_dask", appauthor=False).user_cache_dir) / "numba"


class _PackageCacheLocator(caching.UserWideCacheLocator):
    """numba's user-wide locator, restricted to this package's files, in its own cache folder, named by
    the file's place in the package (``coassoc/``, ``consensus/pcc/`` ...)."""

    def __init__(self, py_func, py_file):
        self._py_file = py_file
        self._lineno = py_func.__code__.co_firstlineno
        folder = Path(py_file).resolve().parent.relative_to(PACKAGE_DIR)
        self._cache_path = os.path.join(cache_dir(), *folder.parts)

    def get_source_stamp(self):
        """The SHA-256 of the source file (whatever the numba version: not its modification time)."""
        st = os.stat(self._py_file)
        return _content_hash(self._py_file, st.st_mtime, st.st_size)

    @classmethod
    def from_function(cls, py_func, py_file):
        try:
            Path(py_file).resolve().relative_to(PACKAGE_DIR)
        except (ValueError, OSError):
            return None
        return super().from_function(py_func, py_file)


@functools.cache
def _content_hash(path, mtime, size):
    """SHA-256 of the file at ``path`` (memoised on its modification time and size: read once a version)."""
    with open(path, "rb") as f:
        return hashlib.sha256(f.read()).hexdigest()


def register() -> None:
    """Put the package's locator first in numba's list (once; idempotent)."""
    classes = caching.CacheImpl._locator_classes
    if _PackageCacheLocator not in classes:
        classes.insert(0, _PackageCacheLocator)


register()  # on import: every module of cached kernels imports this module before its kernels

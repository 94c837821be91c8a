"""Consensus clustering as one scikit-learn estimator: :class:`ConsensusClustering`.

``fit(X)`` runs what ``ensemble-dask run`` runs (ingest, base clusterings of subsamples as a Dask graph, the
co-association pairs where the method fits on them, the consensus) on a run store of its own, so the same
seed gives the same labels as the command line on the same data.
"""

from __future__ import annotations

import contextlib
import inspect
import numbers
import uuid
import warnings
import weakref

import numpy as np
from sklearn.base import BaseEstimator, ClusterMixin, TransformerMixin

from ._validation import InputError, check_int, check_rate, check_seed, shown
from .consensus import registry
from .io.arrays import data_url, feature_names
from .io.own_stores import (
    ABANDONED,
    MEMORY_ROOT,
    is_own_store,
    own_store_root,
    remove_abandoned,
    remove_store,
)
from .runtime.clients import active_client

__all__ = ["ConsensusClustering"]


class ConsensusClustering(TransformerMixin, ClusterMixin, BaseEstimator):
    """Consensus clustering of a table: base clusterings of subsamples, then a consensus of them.

    Parameters
    ----------
    n_clusters : int, "auto" or (int, int), default=8
        Number ``K`` of consensus clusters (a maximum: clusters may stay empty). 1, as for ``KMeans``: one
        cluster of every row (labels 0, memberships 1, uncertainty 0); the data are read and checked as for
        any K, and no base clustering is made. ``"auto"`` or a range ``(k_min, k_max)``: K chosen (method
        ``graph``): the consensus is fitted at every K of the range on the same base clusterings (k drawn past
        ``k_max``), each K scored, the best kept (``n_clusters_``, ``k_scores_``; the methods guide says how).
        ``"auto"`` is ``[2, clip(floor(sqrt(n) / 4), 10, 30)]``.
    method : str, default="graph"
        A consensus method of :mod:`ensemble_dask.consensus.registry`, or ``pcc-kl`` / ``pcc-l2`` (PCC with
        that divergence). ``graph`` (:class:`~ensemble_dask.consensus.GraphConsensus`) fits on an ensemble of
        many small clusters (k drawn in ``[n_clusters, sqrt(n)]``, n up to 20,000, every row labelled), the
        other methods on one of k near ``n_clusters`` (``[n_clusters // 2, 2 n_clusters]``): the benchmarks
        page compares them end to end.
    method_params : dict or None, default=None
        The method's own parameters, as a workflow's consensus entry takes them (e.g. ``{"init":
        "k-means++"}`` for BCE or KCC, ``{"candidates": ["kcc", "hbgf"]}`` for ``auto``: the methods
        guide lists them); ``n_clusters`` and the seed are the estimator's.
    n_clusterings : int, default=30
        Number of base clusterings.
    rate : float, default=0.5
        Share of the points each base clustering sees (its subsample).
    ensemble : {"type1", "type2"}, default="type1"
        ``type1``: k-means with k drawn in the range for ``n_clusters``; ``type2``: mixed algorithms.
    pairs : str, default="auto"
        The co-association pairs' strategy, for a method that fits on pairs (``auto``: the ``coassoc``
        stage's default).
    standardize : bool, default=True
        Z-score each column before clustering, as ``ingest`` does.
    label_column : str, int or None, default=None
        For ``X`` given by its URL: the table's column of reference labels (a name, or a position for a table
        without header), left out of the features; the result is then scored against it (``metrics_``). An
        array or a data frame holds features only (a label column there is refused).
    data_params : dict or None, default=None
        For ``X`` given by its URL: more of the options of a workflow's ``data`` section (the workflows guide
        lists them), e.g. ``{"categorical": ["protocol"], "drop": ["id"], "impute": "mean"}``; the URL,
        ``standardize`` and ``label_column`` are the estimator's.
    random_state : int, numpy Generator, RandomState or None, default=None
        The one seed of every random choice; None (or a generator) draws one at each fit.
    store : str or None, default=None
        URL of the run store (a path, ``s3://...``); None: one in this process's memory, kept by the
        estimator and removed with it (a copy reads its original's until its own first fit). A store given
        here that holds another data set is refused, unless this estimator's last fit wrote it and nothing
        ran in it since (its results are then replaced): a fit never deletes results it did not make. So a
        clone (cross-validation, a grid search) fitted on other rows needs a store of its own: leave
        ``store`` None there. With an int
        ``random_state``, a refit on the same data with another ``method`` or ``n_clusters`` reuses its
        base clusterings and pairs. A store in memory needs no cluster of processes: its stages run on
        threads.
    storage_options : dict or None, default=None
        fsspec options of ``store`` (and of ``X`` when it is a URL).
    client : distributed.Client, str or None, default=None
        The cluster to run on, or its scheduler's address (which ``sklearn.base.clone`` can copy, a Client
        it cannot); None: the active ``distributed.Client`` if there is one, else an embedded cluster, started
        when needed. With ``store=None`` the estimator's own store is in this process's memory for a cluster
        of this process, in a temporary folder for one of other processes on this machine (removed with the
        estimator); a cluster on other machines needs ``store`` (a path its workers share, or a URL).
    progress : bool, default=False
        Progress bars on the long stages.

    Attributes
    ----------
    labels_ : ndarray of int, shape (n_samples,)
    memberships_ : ndarray of float, shape (n_samples, n_clusters)
        Soft memberships (rows on the simplex).
    uncertainty_ : ndarray of float, shape (n_samples,)
        Normalised entropy of each row's memberships, in [0, 1].
    n_clusters_ : int
        K of the result: ``n_clusters``, or the K chosen from a range.
    k_scores_ : dict
        ``n_clusters`` a range only: per K, each criterion's value (``eigengap``, ``lifetime``, ``pac``,
        ``stability``), the graph's candidate kept at that K and its cut; ``metrics_["k_reason"]`` says why
        the K chosen won.
    metrics_ : dict
        The result's record: converged, seconds, warnings, and the scores against reference labels (H,
        ARI, NMI) when ``label_column`` named them.
    store_ : str
        The run store's URL.
    n_features_in_ : int
    feature_names_in_ : ndarray of str, shape (n_features_in_,)
        The columns of a data frame ``X`` whose names are all strings; ``predict`` and ``transform`` take a
        data frame's columns by these names (in any order).

    Examples
    --------
    >>> from sklearn.datasets import make_blobs
    >>> X, _ = make_blobs(300, centers=3, random_state=0)
    >>> model = ConsensusClustering(3, method="kcc", n_clusterings=8, random_state=0).fit(X)  # doctest: +SKIP
    >>> model.labels_.shape, model.memberships_.shape  # doctest: +SKIP
    ((300,), (300, 3))
    """

    def __init__(
        self,
        n_clusters=8,
        *,
        method="graph",
        method_params=None,
        n_clusterings=30,
        rate=0.5,
        ensemble="type1",
        pairs="auto",
        standardize=True,
        label_column=None,
        data_params=None,
        random_state=None,
        store=None,
        storage_options=None,
        client=None,
        progress=False,
    ):
        self.n_clusters = n_clusters
        self.method = method
        self.method_params = method_params
        self.n_clusterings = n_clusterings
        self.rate = rate
        self.ensemble = ensemble
        self.pairs = pairs
        self.standardize = standardize
        self.label_column = label_column
        self.data_params = data_params
        self.random_state = random_state
        self.store = store
        self.storage_options = storage_options
        self.client = client
        self.progress = progress

    def _seed(self):
        rs = self.random_state
        if rs is None or isinstance(rs, np.random.Generator):
            return int(np.random.default_rng(rs).integers(2**31 - 1))
        if isinstance(rs, np.random.RandomState):
            return int(rs.randint(2**31 - 1))
        if isinstance(rs, numbers.Integral) and not isinstance(rs, bool):
            return check_seed(rs, "random_state")
        raise InputError(f"The 'random_state' parameter must be None, an int or a Generator; got {rs!r}")

    def __getstate__(self):
        """The estimator's state; a fitted one whose store is in this process's memory carries the store's
        files in it, so that a copy unpickled in another process predicts, as any scikit-learn clusterer
        does (a store given as a path or URL stays there: the pickle names it; a large data set fitted in
        memory makes a large pickle)."""
        state = super().__getstate__()
        url = state.get("store_")
        if url is not None and url.startswith(MEMORY_ROOT):
            import fsspec

            fs, root = fsspec.core.url_to_fs(url)
            state["_store_files"] = {p[len(root) :]: fs.cat_file(p) for p in fs.find(root)}
        return state

    def __setstate__(self, state):
        files = state.pop("_store_files", None)
        super().__setstate__(state)
        if files is not None:
            import fsspec

            fs, root = fsspec.core.url_to_fs(self.store_)
            if not fs.exists(root):  # another process: the store, in its memory (the same process: its own)
                for path, data in files.items():
                    fs.pipe_file(root + path, data)

    def _client(self):
        """The cluster to run on: ``client``, else the active ``distributed.Client`` (as dask-ml's and
        xgboost.dask's estimators take it) when its workers can see ``store``, else None (an embedded one,
        started when needed)."""
        if self.client is not None:
            return self.client
        active = active_client()
        if active is None or self.store is None or not str(self.store).startswith("memory://"):
            return active
        # a store named in this process's memory: the active cluster only if it runs in this process
        return active if active.scheduler.address.startswith("inproc://") else None

    def _store_url(self, client=None):
        """``store``, else a store of this very estimator's own: in this process's memory, or in a temporary
        folder of this machine when ``client``'s workers are other processes (a cluster on this machine;
        they cannot see this process's memory). A copy of the estimator (``copy.deepcopy``, pickling) gets its
        own at its first fit, and never writes into the original's."""
        if self.store is not None:
            return self.store
        address = client if client is None or isinstance(client, str) else client.scheduler.address
        where = own_store_root(address)
        owner, url = getattr(self, "_memory_store", (None, None))
        if owner != id(self) or not url.startswith(where):
            url = f"{where}{uuid.uuid4().hex}.zarr"
        return url

    _left = None  # the store's stage records as this estimator's last fit left them (:meth:`_records`)

    def _records(self, store):
        """``{stage: (identity, started, finished)}`` of the stage records of ``store`` (what ran in it, and
        when), or None when there is no store there."""
        from .io.store import RunStore

        try:
            records = RunStore(store, self.storage_options, mode="r").records()
        except InputError:  # no store there (removed since): nothing in it to keep
            return None
        return {
            name: (rec.get("hash"), rec.get("started"), rec.get("finished")) for name, rec in records.items()
        }

    def workflow(self, data_url, seed, store=None, n_rows=None):
        """The workflow :meth:`fit` runs (a dict, as :func:`ensemble_dask.pipeline.run_workflow` takes it).

        ``n_rows``: the data's rows, when known; on data so small that a subsample has fewer rows than the
        default largest base k, the base clusterings' k is at most the subsample's rows. The data replaces
        the store's only in a store of the estimator's own (in memory) or one its last fit wrote with
        nothing run in it since."""
        name = self.method
        if name not in registry.names() and name not in registry.ALIASES:
            raise InputError(
                f"The 'method' parameter must be one of {registry.names()} or pcc-kl, pcc-l2; got {name!r}"
            )
        # a new X replaces the store's data (the results computed from the old go) in the estimator's own
        # store only (in memory), or in one that holds what its last fit left and nothing since: a store the
        # user named, here or in ``store``, may hold results this estimator did not make
        own = self.store is None and (store is None or is_own_store(store))
        store = store or self._store_url(self._client())
        mine = getattr(self, "store_", None) == store and self._records(store) in (None, self._left)
        replace = own or mine
        spec = {
            "name": "consensus-clustering",
            "seed": seed,
            "store": store,
            "data": {"url": data_url, "standardize": bool(self.standardize), "overwrite": replace},
            "generate": {
                "n_clusterings": check_int(self.n_clusterings, "n_clusterings", min_value=1),
                "rate": check_rate(self.rate, "rate"),
                "ensemble": self.ensemble,
            },
            "consensus": {name: {**self._method_params(), "n_clusters": self.n_clusters}},
        }
        if self.label_column is not None:
            spec["data"]["label_column"] = self.label_column
        if self.data_params is not None:
            if not isinstance(self.data_params, dict):
                raise InputError(
                    f"The 'data_params' parameter must be a dict or None; got {shown(self.data_params)}"
                )
            from .stages.ingest import ingest_params

            taken = set(inspect.signature(ingest_params).parameters) - {"url", "standardize", "label_column"}
            wrong = sorted(set(self.data_params) - taken, key=str)
            if wrong:
                raise InputError(
                    f"The 'data_params' parameter takes keys among {sorted(taken)}; got {wrong} (X, "
                    "standardize and label_column are the estimator's own parameters)"
                )
            spec["data"].update(self.data_params)
        if n_rows is not None:
            from .partitions.clusterers import subsample_size
            from .stages.generate import default_k_range

            top = _largest_k(self.n_clusters, n_rows)
            lo, hi = default_k_range(top if _is_int(top, 2) else None)
            m = subsample_size(n_rows, spec["generate"]["rate"])
            if hi > m >= 2:
                spec["generate"].update(k_min=min(lo, m), k_max=m)
        if self.pairs != "auto":
            spec["coassoc"] = {"strategy": self.pairs}
        if self._one_cluster():  # every row in it: the data alone (read and checked), nothing to fit
            for section in ("generate", "coassoc", "consensus"):
                spec.pop(section, None)
        if self.storage_options is not None:
            spec["storage_options"] = dict(self.storage_options)
        client = self._client()
        if client is not None:  # a Client, or its scheduler's address (which clone() can copy)
            spec["scheduler"] = client if isinstance(client, str) else client.scheduler.address
        return spec

    def _one_cluster(self):
        return _is_int(self.n_clusters, 1) and self.n_clusters == 1

    def _method_params(self):
        params = self.method_params
        if params is None:
            return {}
        if not isinstance(params, dict) or not all(isinstance(k, str) for k in params):
            raise InputError(f"The 'method_params' parameter must be a dict of parameters; got {params!r}")
        taken = sorted({"n_clusters", "random_state", "method"} & set(params))
        if taken:
            raise InputError(
                f"The 'method_params' parameter sets {taken}, which are the estimator's own (n_clusters, "
                "method, random_state)"
            )
        return dict(params)

    def fit(self, X, y=None):
        """Cluster ``X``: an array (NumPy or Dask), a data frame (pandas or Dask) or the URL of a table
        (CSV, Parquet, zarr, npy); returns ``self``.

        An array or a data frame is written once to this process's memory for ``ingest`` to read, and
        removed after the fit. Data other than the store's replaces it (and the results computed from it)
        in the estimator's own store, or one its last fit wrote with nothing run in it since; another store
        that holds other data is refused. The same data again reuses the store's base clusterings and pairs.
        """

        from . import pipeline
        from .io.store import RunStore
        from .stages._same_data import OtherDataError
        from .stages.generate import ImportedLabelsError

        remove_abandoned()
        store_url = self._store_url(self._client())
        seed = self._seed()
        folder = f"memory://ensemble_dask/input-{uuid.uuid4().hex}"
        spec, done = None, False
        try:
            if self.data_params and not isinstance(X, str):
                raise InputError(
                    "The 'data_params' parameter reads a table given by its URL; an array or a data frame is "
                    "read as it is (give it numeric, with no missing value)"
                )
            if self.label_column is not None and not isinstance(X, str):
                raise InputError(
                    "The 'label_column' parameter names a column of a table given by its URL; an array or a "
                    "data frame X holds features only (leave its labels out)"
                )
            url, shape = data_url(X, folder)
            spec = self.workflow(url, seed, store_url, n_rows=None if shape is None else shape[0])
            report = pipeline.run_workflow(spec, progress=self.progress, report=False)  # no HTML page
            done = True
        except OtherDataError:  # its message names the data's folder in memory and the CLI's option
            raise InputError(
                f"store {store_url!r} holds another data set than X (or X read otherwise: other data_params, "
                "standardize, or a file changed since), and results this estimator's last fit "
                "did not leave there (another estimator's or run's, or stages run since); a fit replaces the "
                "data of a given store only when the store holds what its own last fit left: pass another "
                "store, or store=None (one in memory), or remove this one"
            ) from None
        except ImportedLabelsError:  # its message names the CLI's option and a workflow's
            raise InputError(
                f"store {store_url!r} holds base clusterings brought with import-labels, which a fit would "
                "replace with its own: pass another store, or store=None (one in memory)"
            ) from None
        finally:
            remove_store(folder)
            # what a fit left in a named store is its own: one that completed, or one that was let replace
            # the store and stopped partway
            if self.store is not None and spec is not None and (done or spec["data"]["overwrite"]):
                self._left = self._records(store_url)
        if is_own_store(store_url):
            owned = getattr(self, "_memory_store", (None, None))
            if owned[0] == id(self) and owned[1] != store_url:
                remove_store(owned[1])
            if owned != (id(self), store_url):  # a store of its own: removed after the estimator is gone
                weakref.finalize(self, ABANDONED.append, store_url)
            self._memory_store = (id(self), store_url)
        store = RunStore(store_url, self.storage_options, mode="r")
        if self._one_cluster():
            self.labels_, self.memberships_, self.uncertainty_ = _one_cluster(store.n)
            self.metrics_ = {"effective_k": 1}
            if "y_true" in store:
                from .metrics import partition_scores

                self.metrics_.update(partition_scores(self.labels_, store["y_true"][:]))
        else:
            group = f"consensus/{self.method}"
            self.memberships_ = np.asarray(store[f"{group}/Y"][:], dtype=np.float64)
            self.labels_ = np.asarray(store[f"{group}/labels"][:], dtype=np.int64)
            self.uncertainty_ = np.asarray(store[f"{group}/uncertainty"][:], dtype=np.float64)
            self.metrics_ = report["methods"][self.method]
        self.n_clusters_ = int(self.metrics_.get("n_clusters", self.memberships_.shape[1]))
        if "k_scores" in self.metrics_:  # K chosen: every K's scores
            self.k_scores_ = {int(k): v for k, v in self.metrics_["k_scores"].items()}
        elif hasattr(self, "k_scores_"):
            del self.k_scores_
        self.n_features_in_ = int(store["X"].shape[1]) if shape is None else shape[1]
        names = None if shape is None else feature_names(X)
        if names is not None:
            self.feature_names_in_ = names
        elif hasattr(self, "feature_names_in_"):
            del self.feature_names_in_
        # what predict reads: the result of the method fitted (not one set since), and an array of new rows
        # by the store's column names when X was a table read by name (an array was written by place)
        self._fitted = (None if self._one_cluster() else self.method, shape is None)  # None: one cluster
        self.store_ = store_url  # last: a failed fit leaves no fitted look behind
        for note in self.metrics_.get("warnings", []):  # the stage logs them; a fit's caller sees them too
            _rewarn(note)
        return self

    def transform(self, X):
        """Memberships of new rows (an array, a data frame or a URL of the fitted table's columns): each base
        clustering labels them by its nearest cluster centre, then the consensus of the method fitted labels
        their base labels (see :mod:`ensemble_dask.stages.predict`). A data frame's columns are taken by the
        names of ``feature_names_in_``, an array's by place."""
        return self._predict(X)[1]

    def predict(self, X):
        """The consensus cluster of new rows (see :meth:`transform`)."""
        return self._predict(X)[0]

    def _by_feature_names(self, X):
        """A data frame of new rows with its columns in the order of ``feature_names_in_`` (taken by name),
        as scikit-learn's estimators check them: other names are an error, and names on one side only a
        warning (the columns are then taken by place)."""
        fitted = getattr(self, "feature_names_in_", None)
        names = feature_names(X) if not isinstance(X, str) else None
        if fitted is None:
            if names is not None:
                _warn_names("X has feature names, but ConsensusClustering was fitted without feature names")
            return X
        if names is None:
            if not isinstance(X, str):
                _warn_names("X does not have valid feature names, but ConsensusClustering was fitted with "
                            "feature names")  # fmt: skip
            return X
        if set(names) != set(fitted) or len(names) != len(fitted):
            unseen = [c for c in names if c not in set(fitted)][:5]
            missing = [c for c in fitted if c not in set(names)][:5]
            raise InputError(
                "The feature names should match those that were passed during fit: "
                f"unseen at fit time {unseen}, seen at fit time but missing {missing}"
            )
        return X[list(fitted)]

    def _predict(self, X):
        from sklearn.utils.validation import check_is_fitted

        from .io.store import RunStore
        from .runtime.clients import dask_client
        from .stages.predict import predict_rows

        check_is_fitted(self, "store_")
        method, from_url = getattr(self, "_fitted", (self.method, False))
        # fitted on a table read by name (a URL): a data frame's columns by its own names, as the CLI takes a
        # table's, and an array's by place under the store's names; fitted on an array or a frame: by place,
        # a frame's columns first put in the order of feature_names_in_
        by_name = from_url and not isinstance(X, str) and feature_names(X) is not None
        if not from_url:
            X = self._by_feature_names(X)
        folder = f"memory://ensemble_dask/input-{uuid.uuid4().hex}"
        try:
            names = None
            if by_name:
                names = feature_names(X).tolist()
            elif from_url and not isinstance(X, str):
                names = RunStore(self.store_, self.storage_options, mode="r")["X"].attrs["feature_names"]
            url, shape = data_url(X, folder, min_samples=1, names=names)
            n_columns = None if shape is None or by_name else shape[1]
            if n_columns is not None and n_columns != self.n_features_in_:
                raise InputError(
                    f"X has {n_columns} features, but ConsensusClustering is expecting {self.n_features_in_} "
                    "features as input"
                )
            in_memory = self.store_.startswith(
                "memory://"
            )  # its base centres kept there; a given store's not
            store = RunStore(self.store_, self.storage_options, mode="r+" if in_memory else "r")
            if method is None:  # one cluster: the new rows read and checked as any K's, all in it
                from .stages.predict import new_rows

                rows = sum(len(b) for _, b in new_rows(store, url, storage_options=self.storage_options))
                return _one_cluster(rows)[:2]
            given = self._client()
            with contextlib.nullcontext() if given is None else dask_client(given) as client:
                labels, memberships, _ = predict_rows(
                    store, method, url, client=client, storage_options=self.storage_options
                )
        finally:
            remove_store(folder)
        return labels.astype(np.int64), memberships.astype(np.float64)


def _rewarn(note):
    """Warn again a warning the consensus stage recorded as ``"Category: message"``, in its category when
    it is scikit-learn's ConvergenceWarning or one of the package's (else a UserWarning)."""
    import builtins

    from sklearn.exceptions import ConvergenceWarning

    from .consensus.bce import _em
    from .stages import consensus as stage

    name, _, message = note.partition(":")
    known = {"ConvergenceWarning": ConvergenceWarning}
    known.update({k: v for k, v in vars(builtins).items() if isinstance(v, type) and issubclass(v, Warning)})
    for module in (stage, _em):
        found = vars(module).items()
        known.update({k: v for k, v in found if isinstance(v, type) and issubclass(v, Warning)})
    category = known.get(name.strip())
    # in its category, the message alone (the category's name is printed with it); else the note as it is
    warnings.warn(message.strip() if category else note, category or UserWarning, stacklevel=_callers_level())


def _callers_level():
    """``stacklevel`` of the first frame outside this package and scikit-learn, as seen from the caller of
    this function's caller (a fit, or scikit-learn's fit_predict around it, warns at the user's line)."""
    import sys

    level, frame = 2, sys._getframe(2)
    while frame is not None and frame.f_globals.get("__name__", "").startswith(("ensemble_dask", "sklearn")):
        frame, level = frame.f_back, level + 1
    return level


def _warn_names(message):
    warnings.warn(message, UserWarning, stacklevel=5)  # the user's predict or transform


#: stores in memory of estimators that are gone: a finaliser runs in whatever thread collects the estimator,
#: maybe while a stage lists the memory file system, so it only notes the store; the next fit removes it
def _one_cluster(n):
    """``(labels, memberships, uncertainty)`` of ``n`` rows in one cluster."""
    return np.zeros(n, dtype=np.int64), np.ones((n, 1)), np.zeros(n)


def _largest_k(n_clusters, n_rows):
    from .consensus._common.krange import largest_k

    try:
        return largest_k(n_clusters, n_rows)
    except InputError:  # the consensus stage names it
        return None


def _is_int(value, low):
    return isinstance(value, numbers.Integral) and not isinstance(value, bool) and value >= low

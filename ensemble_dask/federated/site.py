"""The site side of secure aggregation: a worker plugin holding the site's key and its session state.

A site's workers load the site's X25519 masking key and the pinned public keys of the federation
from the site's own files when they start::

    dask worker tls://coordinator:8786 --resources site-a=1 \\
        --tls-ca-file certs/ca.pem --tls-cert certs/site-a.pem --tls-key certs/site-a-key.pem \\
        --preload ensemble_dask.federated.site --mask-key certs/site-a-mask.key \\
        --pins workflows/federated-bce.yaml --site-name site-a

(``--pins``: a workflow YAML whose ``federated.sites[].mask_key`` pin each site's public key, or a
directory of ``NAME-mask.pub`` files.) The preload installs :class:`SitePlugin`. Everything a site
derives or keeps - pair keys, its rows, their variational parameters, the last round it masked -
lives in the plugin's sessions on that worker; no task returns it and no future refers to it. The
coordinator's tasks name a session and get back only what the protocol sends: masked vectors
(:func:`site_masked`), or small public facts such as row counts (:func:`site_call`).

Limits of the threat model: the coordinator is honest-but-curious (it runs the protocol, and may read
any task result or future). A Dask client can also run arbitrary code on workers (``client.run``,
pickled functions); keeping a *malicious* coordinator out needs the sites to restrict what their
workers execute, which Dask does not offer.
"""

from __future__ import annotations

import collections
import logging
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

from .._validation import EnsembleDaskError, InputError
from .certs import load_mask_private, load_mask_public
from .secure import encode_fixed, mask_vector

__all__ = [
    "PLUGIN_NAME",
    "SitePlugin",
    "SiteStateLost",
    "load_pins",
    "site_join",
    "site_masked",
    "site_call",
    "site_close",
    "dask_setup",
]

logger = logging.getLogger(__name__)

#: a worker's join and close of one session may run on two of its threads at once (a site that stopped
#: answering gets both when it comes back): the check for a close and the insert of the join are one step
_SESSIONS_LOCK = threading.Lock()
EXPIRE_EVERY_MS = 2000  # how often a site's worker drops its idle sessions
PLUGIN_NAME = "ensemble-dask-site"


class SiteStateLost(EnsembleDaskError):
    """A site's worker no longer holds the session (it was restarted): the run must resume."""


def load_pins(source):
    """``{site name: raw 32-byte public key}`` from a workflow YAML, a directory of ``*-mask.pub`` or a dict."""
    if source is None:
        return {}
    if isinstance(source, dict):
        return {str(k): load_mask_public(v) for k, v in source.items()}
    path = Path(source)
    if path.is_dir():
        return {p.name[: -len("-mask.pub")]: load_mask_public(p) for p in sorted(path.glob("*-mask.pub"))}
    import yaml

    try:
        spec = yaml.safe_load(path.read_text())
    except (OSError, yaml.YAMLError) as exc:
        raise InputError(f"cannot read the pinned keys from {str(source)!r}: {exc}") from exc
    sites = ((spec or {}).get("federated") or {}).get("sites") or []
    pins = {}
    for s in sites:
        if isinstance(s, dict) and s.get("mask_key"):
            pins[str(s["name"])] = load_mask_public(s["mask_key"])
    return pins


@dataclass
class SiteSession:
    """One run's state on a site's worker (never sent anywhere)."""

    name: str
    session: str
    secure: bool
    n_sites: int
    pair_keys: dict = field(default_factory=dict, repr=False)
    last_round: int = -1
    data: dict = field(default_factory=dict, repr=False)
    idle_limit: float = float("inf")  # seconds without a call after which the site drops the session
    last_used: float = field(default_factory=time.monotonic)


class SitePlugin:
    """Holds a site's masking key, the pinned public keys and the sessions, on each of its workers.

    Parameters
    ----------
    mask_key : str, default=None
        Path of the site's X25519 private key (``NAME-mask.key``); None: a worker for plain runs only.
    pins : str or dict, default=None
        Pinned public keys (see :func:`load_pins`).
    site_name : str, default=None
        The site these workers belong to; when set, the worker refuses to act as another site.
    """

    name = PLUGIN_NAME

    def __init__(self, mask_key=None, pins=None, site_name=None):
        self.mask_key = mask_key
        self.pins_source = pins
        self.site_name = site_name
        self.sessions = {}
        # sessions already closed here: a join that arrives after its close (a site frozen mid-run whose
        # close, sent fire-and-forget, ran first) must not leave the session's state behind
        self.closed = collections.deque(maxlen=1024)
        self._private = None
        self._pins = {}

    def setup(self, worker=None):
        if self.mask_key:
            self._private = load_mask_private(self.mask_key)
        self._pins = load_pins(self.pins_source)

    def teardown(self, worker=None):
        self.sessions.clear()

    def expire(self, now=None):
        """Drop the sessions unused for longer than their ``idle_limit``: a coordinator that gave up on this
        site while it did not answer may never close the session it joined when it came back. Returns how
        many were dropped (remembered as closed)."""
        now = time.monotonic() if now is None else now
        with _SESSIONS_LOCK:
            stale = [key for key, st in self.sessions.items() if now - st.last_used > st.idle_limit]
            for key in stale:
                del self.sessions[key]
                self.closed.append(key)
        return len(stale)

    @property
    def public_key(self):
        return None if self._private is None else self._private.public_key().public_bytes_raw()


def _plugin(create=False):
    from distributed import get_worker

    worker = get_worker()
    plugin = worker.plugins.get(PLUGIN_NAME)
    if plugin is None and create:
        plugin = SitePlugin()
        plugin.setup(worker)
        worker.plugins[PLUGIN_NAME] = plugin
    return plugin


def _session(session):
    plugin = _plugin()
    st = None if plugin is None else plugin.sessions.get(session)
    if st is None:
        raise SiteStateLost(f"this worker holds no state of session {session}: was it restarted?")
    st.last_used = time.monotonic()
    return st


# --------------------------------------------------------------------------- tasks run on a site


def site_join(session, name, roster, secure, idle_limit=None):
    """Join a session as site ``name``; with ``secure``, check ``roster`` against the pins and derive pair keys.

    ``roster`` maps every site of the session to the public key the coordinator relays for it. Any
    key that differs from the key pinned for that site ends the run (a coordinator swapping keys could
    otherwise unmask). A session unused for ``idle_limit`` seconds is dropped (:meth:`SitePlugin.expire`).
    Returns None: the pair keys stay here.
    """
    from .secure import derive_pair_keys

    n_sites = len(roster)
    plugin = _plugin(create=not secure or n_sites <= 1)  # one site masks nothing: no key needed
    if plugin is not None and session in plugin.closed:
        return None  # the coordinator closed this session already: nothing to join (checked again below)
    st = SiteSession(name=name, session=session, secure=bool(secure), n_sites=n_sites)
    if idle_limit is not None:
        st.idle_limit = float(idle_limit)
    if secure and n_sites > 1:
        if plugin is None or plugin.public_key is None:
            raise InputError(
                f"site {name!r}: its worker holds no masking key; start it with "
                "--preload ensemble_dask.federated.site --mask-key NAME-mask.key --pins ..."
            )
        if plugin.site_name and plugin.site_name != name:
            raise InputError(f"this worker belongs to site {plugin.site_name!r}, not to site {name!r}")
        pins = plugin._pins
        if pins.get(name) != plugin.public_key:
            raise InputError(
                f"site {name!r}: the masking key on its worker is not the key pinned for {name!r} "
                f"({'no pin for it' if name not in pins else 'pinned key differs'})"
            )
        for other, pub in roster.items():
            if other not in pins:
                raise InputError(f"site {name!r}: no pinned public key for site {other!r}; refusing to mask")
            if bytes(pub) != pins[other]:
                raise InputError(
                    f"site {name!r}: the public key relayed for site {other!r} is not the key pinned for "
                    "it (substituted by the coordinator?); refusing to mask"
                )
        st.pair_keys = derive_pair_keys(plugin._private, name, roster, session)
    with _SESSIONS_LOCK:  # a close running on another thread of this worker comes wholly before or after
        if session not in plugin.closed:
            plugin.sessions[session] = st
    return None


def site_masked(session, round_id, fn, *args):
    """Run ``fn(state, *args)`` on the site and return its vector masked for round ``round_id``.

    Secure sessions return two-word fixed point with the pairwise masks (with one site: without);
    plain sessions return the vector in clear.
    """
    st = _session(session)
    if round_id <= st.last_round:
        raise InputError(
            f"site {st.name!r}: round {round_id} is not after the last masked round {st.last_round}; "
            "refusing to reuse a mask"
        )
    st.last_round = int(round_id)
    vec = fn(st, *args)
    if not st.secure:
        return vec
    if not st.pair_keys:
        return encode_fixed(vec, n_sites=st.n_sites, name=f"site {st.name!r}")
    return mask_vector(vec, st.name, st.pair_keys, round_id, n_sites=st.n_sites)


def site_call(session, fn, *args):
    """Run ``fn(state, *args)`` on the site; ``fn`` must return only what the protocol may reveal."""
    return fn(_session(session), *args)


def site_close(session):
    plugin = _plugin(create=True)  # a close that comes before the join must be remembered too
    if plugin is not None:
        with _SESSIONS_LOCK:
            plugin.sessions.pop(session, None)
            if session not in plugin.closed:
                plugin.closed.append(session)


# --------------------------------------------------------------------------- `dask worker --preload`


def _click_command():
    import click

    @click.command()
    @click.option("--mask-key", required=True, help="the site's X25519 private key (NAME-mask.key)")
    @click.option("--pins", default=None, help="workflow YAML or directory of NAME-mask.pub files")
    @click.option("--site-name", default=None, help="the site these workers belong to")
    def setup(worker, mask_key, pins, site_name):
        from tornado.ioloop import PeriodicCallback

        plugin = SitePlugin(mask_key=mask_key, pins=pins, site_name=site_name)
        plugin.setup(worker)
        worker.plugins[PLUGIN_NAME] = plugin
        expiry = PeriodicCallback(plugin.expire, EXPIRE_EVERY_MS)  # on the worker's event loop
        worker.periodic_callbacks["ensemble-dask-site-expiry"] = expiry
        expiry.start()
        logger.info("site plugin ready (site %s, %d pinned keys)", site_name, len(plugin._pins))

    return setup


try:  # the preload hook of `dask worker --preload ensemble_dask.federated.site`
    dask_setup = _click_command()
except ImportError:  # pragma: no cover - click ships with distributed
    dask_setup = None

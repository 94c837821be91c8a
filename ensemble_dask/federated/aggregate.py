"""The coordinator side of secure aggregation: one vector per site per round, summed under masks.

:class:`SecureAggregator` is generic: row-distributed BCE (:mod:`.rows`) and KCC use it with their own
site functions. Each site is pinned to one of its workers (the worker holding the session state);
per round every site runs ``fn(state, *args)`` there and returns only the masked vector
(:func:`.site.site_masked`); the coordinator adds the words and decodes the total. A site that fails,
leaves the cluster or does not answer within ``timeout`` seconds ends the round with
:class:`SiteLostError` naming the site and the round.

Example (``fn`` runs on each site's worker, with that site's session state)::

    with SecureAggregator(client, sites, pins=pins, timeout=60) as agg:
        agg.call(load_rows, [(s["url"],) for s in sites], what="load")
        total = agg.sum(local_counts, [(centers,)] * len(sites), what="iteration 3")
"""

from __future__ import annotations

import logging
import time
import uuid

import numpy as np

from .._validation import EnsembleDaskError, InputError
from .secure import decode_fixed, sum_words
from .site import site_call, site_close, site_join, site_masked

__all__ = ["SecureAggregator", "SiteLostError"]

IDLE_LIMIT_MIN = 30.0  # seconds: the least time a site keeps a session it is not called on

logger = logging.getLogger(__name__)


class SiteLostError(EnsembleDaskError):
    """A site failed, left, or did not answer in time; the message names the site and the round."""


def _workers(client):
    """The scheduler's workers now (``client.scheduler_info()`` may return a cache without them)."""
    return client.sync(client.scheduler.identity, n_workers=-1)["workers"]


def _site_workers(client, sites):
    """One worker address per site: the first (sorted) worker offering the site's resource."""
    workers = _workers(client)
    offered = {}
    for addr in sorted(workers):
        for res, amount in (workers[addr].get("resources") or {}).items():
            if amount > 0:
                offered.setdefault(res, addr)
    out = []
    for s in sites:
        addr = offered.get(s["resource"])
        if addr is None:
            raise InputError(
                f"site {s['name']!r} is unreachable: no worker offers resource {s['resource']!r} "
                f"(offered: {sorted(offered)})"
            )
        out.append(addr)
    return out


class SecureAggregator:
    """Secure sums over sites on a Dask cluster.

    Parameters
    ----------
    client : distributed.Client
    sites : list of dict
        ``name`` and ``resource`` (the Dask worker resource its workers offer) per site.
    mode : {"secure", "plain"}, default="secure"
        ``"plain"`` returns the sites' vectors in clear (a baseline to measure the masking).
    pins : dict, default=None
        ``{name: raw public key}`` relayed to the sites, which check it against their own pins.
    timeout : float, default=120
        Seconds a site may take for one round.
    """

    def __init__(self, client, sites, *, mode="secure", pins=None, timeout=120.0):
        if mode not in ("secure", "plain"):
            raise InputError(f"The 'mode' parameter must be 'secure' or 'plain'; got {mode!r}")
        self.client = client
        self.sites = [dict(s) for s in sites]
        self.names = [s["name"] for s in self.sites]
        self.mode = mode
        self.pins = dict(pins or {})
        self.timeout = float(timeout)
        # a site drops a session unused this long (it outlives any wait of ours on one call several times over)
        self.idle_limit = max(IDLE_LIMIT_MIN, 5.0 * self.timeout)
        self.session = uuid.uuid4().hex
        self.round = 0
        self.addresses = None
        self.lost = set()  # sites a round gave up on: closing does not wait for them again

    # -- lifecycle -----------------------------------------------------------------------------
    def open(self):
        self.addresses = _site_workers(self.client, self.sites)
        roster = {}
        if self.mode == "secure" and len(self.sites) > 1:
            missing = [n for n in self.names if n not in self.pins]
            if missing:
                raise InputError(f"no pinned public key ('mask_key') for site(s) {missing}")
            roster = {n: self.pins[n] for n in self.names}
        else:
            roster = {n: b"" for n in self.names}
        futs = [
            self._submit(
                i, site_join, self.session, name, roster, self.mode == "secure", self.idle_limit, kind="join"
            )
            for i, name in enumerate(self.names)
        ]
        try:
            self._wait(futs, "joining the session")
        except BaseException:
            self.close()  # the sites that did join drop the session (their pair keys) again
            raise
        return self

    def close(self):
        """Drop the session on every site; a site already lost is not waited for (the run stops now).

        Every close task is fire-and-forget: a lost site whose worker is still in the cluster (it stopped
        answering) drops the session's state if it comes back, and a site slower than the wait below still
        closes after this process has gone (the scheduler would otherwise cancel its task with the client's).
        """
        if self.addresses is None:
            return
        from distributed import fire_and_forget

        try:
            present = set(_workers(self.client)) if self.lost else set()
            futs = []
            for i in range(len(self.sites)):
                if i in self.lost and self.addresses[i] not in present:
                    futs.append(None)  # its worker left: nothing to close
                    continue
                futs.append(self._submit(i, site_close, self.session, kind="close"))
                fire_and_forget(futs[i])
            self._wait(futs, "closing", timeout=min(self.timeout, 10.0), skip=self.lost)
        except (SiteLostError, OSError):  # a lost site has nothing left to close
            pass
        self.addresses = None

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    # -- rounds --------------------------------------------------------------------------------
    def _submit(self, i, fn, *args, kind):
        s = self.sites[i]
        return self.client.submit(
            fn,
            *args,
            resources={s["resource"]: 1},
            workers=[self.addresses[i]],
            allow_other_workers=False,
            pure=False,
            key=f"site-{s['name']}-{kind}-{uuid.uuid4().hex[:12]}",
        )

    def _per_site(self, args):
        if args is None:
            return [()] * len(self.sites)
        args = list(args)
        if len(args) != len(self.sites):
            raise InputError(f"need one argument tuple per site ({len(self.sites)}); got {len(args)}")
        return [tuple(a) for a in args]

    def call(self, fn, args=None, *, what):
        """Results of ``fn(state, *args[i])`` at every site (only for what the protocol may reveal)."""
        futs = [
            self._submit(i, site_call, self.session, fn, *a, kind="call")
            for i, a in enumerate(self._per_site(args))
        ]
        return self._wait(futs, what)

    def sum(self, fn, args=None, *, what):
        """Total over sites of ``fn(state, *args[i])`` (float vectors); the coordinator sees masked words."""
        self.round += 1
        futs = [
            self._submit(i, site_masked, self.session, self.round, fn, *a, kind="masked")
            for i, a in enumerate(self._per_site(args))
        ]
        vecs = self._wait(futs, what)
        if self.mode == "plain":
            total = np.array(vecs[0], dtype=np.float64, copy=True)
            for v in vecs[1:]:
                total += v
            return total
        return decode_fixed(sum_words(vecs))

    def _wait(self, futures, what, timeout=None, skip=()):
        """Results of ``futures`` (one per site); sites in ``skip`` are not waited for (result None)."""
        from distributed import wait

        timeout = self.timeout if timeout is None else timeout
        deadline = time.monotonic() + timeout
        watched = [i for i in range(len(futures)) if i not in skip]
        try:
            while True:
                try:
                    wait(
                        [futures[i] for i in watched],
                        timeout=max(0.05, min(1.0, deadline - time.monotonic())),
                    )
                except TimeoutError:
                    pass
                for i in watched:
                    f = futures[i]
                    if f.status == "error":
                        exc = f.exception()
                        if isinstance(exc, EnsembleDaskError):
                            raise type(exc)(f"{exc} (site {self.names[i]!r}, {what})") from exc
                        raise SiteLostError(
                            f"site {self.names[i]!r} failed in {what}: {type(exc).__name__}: {exc}"
                        ) from exc
                pending = [i for i in watched if futures[i].status != "finished"]
                if not pending:
                    results = self.client.gather([futures[i] for i in watched])
                    out = [None] * len(futures)
                    for i, r in zip(watched, results, strict=True):
                        out[i] = r
                    return out
                present = set(_workers(self.client))
                for i in pending:
                    if self.addresses[i] not in present:
                        self.lost.add(i)
                        raise SiteLostError(
                            f"site {self.names[i]!r} was lost in {what}: its worker {self.addresses[i]} "
                            "left the cluster"
                        )
                if time.monotonic() >= deadline:
                    self.lost.update(pending)
                    names = [self.names[i] for i in pending]
                    raise SiteLostError(
                        f"site {names[0]!r} did not answer in {what} within {timeout:g} s"
                        + (f" (nor did {names[1:]})" if len(names) > 1 else "")
                    )
        except BaseException:
            self.client.cancel([f for f in futures if f is not None and f.status == "pending"])
            raise

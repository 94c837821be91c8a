"""The coordinator's side of a federation: HTTPS calls to the site agents and secure sums over them.

:class:`Federation` opens one session with every site agent (:mod:`~ensemble_dask.federated.site.agent`) of a
roster, over mutual TLS
(the coordinator's certificate; each site's certificate must carry the site's name), and offers the
drivers of :mod:`.bce` and :mod:`.kcc` two kinds of request, each an operation *name* with plain
arguments (no code travels):

* :meth:`Federation.call` - an operation whose answer reveals nothing about rows (prepare, reset, ...);
* :meth:`Federation.sum` - the sum over the sites of one vector each, by the SecAgg+ round of
  :mod:`~ensemble_dask.federated.protocol.secagg` (round keys and encrypted shares relayed, masked inputs,
  unmasking), or in clear in a plain session (which each site refuses unless its own config allows it).

Dropouts: a site that fails, is refused for a fault, or does not answer within ``timeout`` is dropped;
the round still completes over the survivors when at least every site's threshold of them remain, and
then :class:`SitesDropped` tells the driver (which restarts its fit over the survivors, so the result is
the fit on their rows). Fewer survivors end the run with :class:`SiteLostError` naming the missing sites.
"""

from __future__ import annotations

import concurrent.futures
import http.client
import logging
import ssl
import uuid
from pathlib import Path

import numpy as np

from ..._validation import EnsembleDaskError, InputError
from ..protocol import secagg, wire
from ..protocol.secure import decode_fixed, sum_words
from ..protocol.wire import peer_name

__all__ = [
    "Federation",
    "SiteLink",
    "SiteLostError",
    "SiteRefusedError",
    "SitesDropped",
    "SitesDroppedWarning",
    "client_context",
]

logger = logging.getLogger(__name__)


class SiteLostError(EnsembleDaskError):
    """Too few sites answered: the message names the missing ones; the run resumes from its checkpoint."""


class SiteRefusedError(EnsembleDaskError):
    """A site refused a request (its reason, from its own policy, is in the message; ``code``, when the site
    gives one, is a reason to act on: :data:`~ensemble_dask.federated.protocol.wire.CANNOT_RESUME`)."""

    def __init__(self, message, code=None):
        super().__init__(message)
        self.code = code


class SitesDroppedWarning(UserWarning):
    """Sites dropped out of a run, which completed over the others (their names are in the message)."""


class SitesDropped(EnsembleDaskError):
    """Sites dropped out; the round completed over the ``survivors`` (the driver restarts over them)."""

    def __init__(self, dropped, survivors):
        super().__init__(f"site(s) {sorted(dropped)} dropped out; {len(survivors)} remain")
        self.dropped, self.survivors = sorted(dropped), sorted(survivors)


def client_context(certs, name="coordinator"):
    """Client TLS context of the coordinator: ``CERTS/NAME.pem`` and its key, trusting ``CERTS/ca.pem``."""
    files = [Path(certs) / f for f in ("ca.pem", f"{name}.pem", f"{name}-key.pem")]
    missing = [str(f) for f in files if not f.exists()]
    if missing:
        raise InputError(f"TLS files missing: {missing} (the coordinator's certificate, its key and ca.pem)")
    ctx = ssl.create_default_context(ssl.Purpose.SERVER_AUTH, cafile=str(files[0]))
    ctx.minimum_version = ssl.TLSVersion.TLSv1_2
    ctx.check_hostname = False  # the site's name is checked against its certificate below
    ctx.load_cert_chain(str(files[1]), str(files[2]))
    return ctx


class SiteLink:
    """One keep-alive HTTPS connection to one site agent; the site's certificate must name the site."""

    def __init__(self, name, address, context, timeout):
        if not isinstance(address, str) or not address.startswith("https://"):
            raise InputError(f"site {name!r}: its address must be https://HOST:PORT; got {address!r}")
        host, _, port = address.removeprefix("https://").rstrip("/").rpartition(":")
        if not host or not port.isdigit():
            raise InputError(f"site {name!r}: its address must be https://HOST:PORT; got {address!r}")
        self.name, self.address = name, address
        self.host, self.port = host, int(port)
        self.context, self.timeout = context, float(timeout)
        self.conn = None

    def _connect(self):
        conn = http.client.HTTPSConnection(self.host, self.port, context=self.context, timeout=self.timeout)
        conn.connect()
        who = peer_name(conn.sock)
        if who != self.name:
            conn.close()
            raise SiteRefusedError(
                f"the agent at {self.address} presents the certificate of {who!r}, not of site {self.name!r}"
            )
        self.conn = conn

    def post(self, op, message):
        """The ``result`` of operation ``op``; raises :class:`SiteRefusedError` or ``OSError``."""
        body = wire.encode(message)
        for attempt in (0, 1):  # a kept-alive connection the site closed is reopened once
            if self.conn is None:
                self._connect()
            try:
                self.conn.request("POST", f"/v1/{op}", body, {"Content-Type": "application/msgpack"})
                resp = self.conn.getresponse()
                data = resp.read()
                break
            except (http.client.RemoteDisconnected, BrokenPipeError, ConnectionResetError):
                # a kept-alive connection the site had closed: the request never reached it; once more
                self.close()
                if attempt:
                    raise
        reply = wire.decode(data)
        if resp.status == 403 and reply.get("refused"):
            code = reply.get("code") if isinstance(reply.get("code"), str) else None
            raise SiteRefusedError(f"site {self.name!r} refused {op}: {reply.get('error')}", code)
        if resp.status != 200:  # a fault at the site: it is lost to this run
            raise SiteLostError(f"site {self.name!r} failed in {op}: {reply.get('error')}")
        return reply.get("result")

    def close(self):
        if self.conn is not None:
            self.conn.close()
            self.conn = None


class Federation:
    """A session with the site agents of ``sites``; secure sums over them.

    Parameters
    ----------
    sites : list of dict
        ``name`` and ``address`` (``https://HOST:PORT``) of every member of the federation.
    method : {"bce", "kcc"}
    context : ssl.SSLContext
        The coordinator's client context (:func:`client_context`).
    mode : {"secure", "plain"}, default="secure"
    timeout : float, default=120
        Seconds a site may take to answer one request.
    """

    def __init__(self, sites, method, context, *, mode="secure", timeout=120.0, exclude=()):
        if mode not in ("secure", "plain"):
            raise InputError(f"The 'mode' parameter must be 'secure' or 'plain'; got {mode!r}")
        names = [s["name"] for s in sites]
        if len(set(names)) != len(names):
            raise InputError(f"site names must be distinct; got {names}")
        self.links = {s["name"]: SiteLink(s["name"], s.get("address"), context, timeout) for s in sites}
        self.roster = sorted(names)
        self.method, self.mode = method, mode
        self.session = uuid.uuid4().hex
        self.round = 0
        self.alive = [n for n in self.roster if n not in set(exclude)]  # sites dropped in an earlier session
        self.threshold = 1
        self.infos = {}
        self._pool = concurrent.futures.ThreadPoolExecutor(max(len(names), 1), thread_name_prefix="site-link")

    # -- requests to many sites ----------------------------------------------------------------
    def _ask(self, names, op, messages, what):
        """``({site: result}, {site: reason})`` of ``op`` at ``names`` (one message each)."""
        futs = {n: self._pool.submit(self.links[n].post, op, messages[n]) for n in names}
        results, failed = {}, {}
        for n, f in futs.items():
            try:
                results[n] = f.result()
            except SiteRefusedError as exc:
                failed[n] = exc
            except SiteLostError as exc:
                failed[n] = exc
            except (OSError, http.client.HTTPException, wire.WireError) as exc:
                self.links[n].close()
                failed[n] = SiteLostError(f"site {n!r} did not answer in {what}: {type(exc).__name__}: {exc}")
        return results, failed

    def _require(self, results, failed, what, *, allow_drop=True):
        """Raise for refusals; drop lost sites while enough remain."""
        refusals = [failed[n] for n in sorted(failed) if isinstance(failed[n], SiteRefusedError)]
        if refusals:  # a site's policy said no: the run stops (never retried elsewhere)
            codes = {r.code for r in refusals}
            raise SiteRefusedError(f"{refusals[0]} ({what})", codes.pop() if len(codes) == 1 else None)
        if failed:
            missing = sorted(failed)
            if not allow_drop or len(results) < self.threshold:
                raise SiteLostError(
                    f"site(s) {missing} lost in {what}; {len(results)} of {len(self.roster)} answered "
                    f"and the sites take part in sums over at least {self.threshold}. "
                    "Bring them back and run the same command again to resume. "
                    f"First reason: {failed[missing[0]]}"
                )
        return results

    def open(self, params=None):
        msg = {"session": self.session, "method": self.method, "roster": self.roster, "mode": self.mode}
        msg.update(params or {})
        results, failed = self._ask(self.alive, "join", dict.fromkeys(self.alive, msg), "joining the session")
        self.threshold = max([r["threshold"] for r in results.values()] + [2])
        self._require(results, failed, "joining the session", allow_drop=False)
        told = {n: r["threshold"] for n, r in sorted(results.items())}
        if len(set(told.values())) > 1:  # each site binds its own to every round: no round would complete
            self._ask(sorted(results), "close", dict.fromkeys(results, {"session": self.session}), "closing")
            raise InputError(
                f"the sites take part in sums over different numbers of sites {told}: no round completes "
                "over sites whose policies differ. Give every site's config (site.yaml) the same min_sites "
                "and the same members"
            )
        self.infos = results
        return self

    def close(self):
        msg = {"session": self.session}
        self._ask(self.alive, "close", dict.fromkeys(self.alive, msg), "closing")
        for link in self.links.values():
            link.close()
        self._pool.shutdown(wait=False, cancel_futures=True)

    def __enter__(self):
        return self.open()

    def __exit__(self, *exc):
        self.close()

    def _dropped(self, survivors):
        lost = sorted(set(self.alive) - set(survivors))
        self.alive = sorted(survivors)
        return lost

    # -- the driver's requests -----------------------------------------------------------------
    def call(self, op, args=(), *, what, per_site=None):
        """``{site: result}`` of ``op(*args)`` at every site still in the session (``per_site``:
        ``{site: args}`` instead). A site lost here is dropped (see :class:`SitesDropped`)."""
        messages = {n: {"session": self.session, "op": op, "args": list((per_site or {}).get(n, args))}
                    for n in self.alive}  # fmt: skip
        results, failed = self._ask(self.alive, "call", messages, what)
        self._require(results, failed, what)
        lost = self._dropped(results)
        if lost:
            raise SitesDropped(lost, self.alive)
        return results

    def sum(self, op, args=(), *, what):
        """The sum over the sites of the vector each computes with ``op(*args)``; only the sum is seen."""
        self.round += 1
        r = self.round
        base = {"session": self.session, "round": r}
        if self.mode == "plain":
            msgs = {n: {**base, "op": op, "args": list(args)} for n in self.alive}
            results, failed = self._ask(self.alive, "masked", msgs, what)
            self._require(results, failed, what)
            total = np.sum(
                [np.asarray(results[n]["vector"], dtype=np.float64) for n in sorted(results)], axis=0
            )
        else:
            keyed = {**base, "op": op, "args": list(args)}  # each site binds its shares to the computation
            adv, failed = self._ask(
                self.alive, "keys", dict.fromkeys(self.alive, keyed), f"{what} (round keys)"
            )
            self._require(adv, failed, what)
            keys = {n: a["public"] for n, a in adv.items()}
            msgs = {
                n: {**base, "op": op, "args": list(args), "keys": keys,
                    "shares": {u: adv[u]["shares"][n] for u in adv if u != n}}
                for n in adv
            }  # fmt: skip
            masked, failed = self._ask(sorted(adv), "masked", msgs, what)
            self._require(masked, failed, what)
            survivors = sorted(masked)
            msgs = {n: {**base, "survivors": survivors} for n in survivors}
            confirmed, failed = self._ask(survivors, "confirm", msgs, f"{what} (consistency check)")
            self._require(confirmed, failed, what)
            msgs = {
                n: {**base, "tags": {u: confirmed[u]["tags"][n] for u in confirmed if u != n}}
                for n in confirmed
            }
            reveals, failed = self._ask(sorted(confirmed), "unmask", msgs, f"{what} (unmasking)")
            self._require(reveals, failed, what)
            words = sum_words([masked[n]["words"] for n in survivors])
            shares = {n: rev["shares"] for n, rev in reveals.items()}
            total = decode_fixed(
                secagg.unmask_words(
                    words, self.roster, keys, survivors, shares, self.session, r, self.threshold
                )
            )
            # the survivors are the sites that revealed: one lost at confirm or unmask did not finish the
            # round as the others did (its transcript differs from theirs), so it leaves the session
            results = reveals
        lost = self._dropped(results)
        if lost:
            raise SitesDropped(lost, self.alive)
        return total

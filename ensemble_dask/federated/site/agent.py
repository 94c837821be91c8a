"""The site agent: a site's own service, answering a fixed set of data-only operations over mutual TLS.

``ensemble-dask site serve site.yaml`` starts it. The coordinator is not trusted: nothing it sends is
code (messages are msgpack maps of plain values and arrays, :mod:`~ensemble_dask.federated.protocol.wire`;
no pickle on any inbound path), and everything that decides what leaves the site is in the site's own
config (:mod:`.config`).

Operations (``POST /v1/<op>``): ``join``, ``call``,
``keys``, ``masked``, ``unmask``, ``close``. The site refuses, with a clear error to the coordinator and
a line in its audit log (``state/audit.log``, JSON lines):

* a caller whose certificate is not the configured coordinator's (mutual TLS; a site's own certificate
  presented to it is refused too);
* a roster that is not exactly its federation, a round whose sites are fewer than its minimum or
  include a site not in the session's last survivors, a round key or share that does not verify under a
  pinned key (:mod:`~ensemble_dask.federated.protocol.secagg`), the coordinator as a member (refused when
  the config is read);
* a session it has joined before (kept across restarts in ``state/sessions``), a (session, round)
  answered before, a phase out of order;
* plain mode unless ``allow_plain``; an operation or method it does not know; parameters of the wrong
  type, shape, range, or non-finite.

What leaves the site: its row count and number of clusterings at join, masked statistics (their sum
over the survivors of each round is what the coordinator learns), its Shamir shares for unmasking, and
nothing else; memberships go to ``output``.
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import hashlib
import json
import logging
import os
import re
import ssl
import sys
import threading
import time
from dataclasses import dataclass, field

import numpy as np

from ..._validation import InputError
from ..protocol import secagg, wire
from ..protocol.secure import exact_value, is_exact, rows_in_range
from .config import SiteConfig, _short, load_config, shown
from .ops import CALLS, SUMS, Refused

__all__ = ["SiteAgent", "SiteConfig", "Refused", "load_config", "serve", "serve_main", "OPERATIONS"]

logger = logging.getLogger(__name__)

OPERATIONS = ("join", "call", "keys", "masked", "confirm", "unmask", "close")
_SESSION_RE = re.compile(r"[0-9a-f]{16,64}")  # with fullmatch: "$" also matched before a final "\n"
#: the operations on a joined session whose outcome enters its transcript (:meth:`SiteAgent._run`)
_SESSION_OPS = ("call", "keys", "masked", "confirm", "unmask")


# --------------------------------------------------------------------------- sessions


def _digest(*parts):
    """SHA-256 of a request's parts in the wire's encoding (the same values give the same bytes)."""
    return hashlib.sha256(wire.encode({"request": list(parts)})).digest()


@dataclass
class Session:
    """One run's state at the site (never sent): rows, E-step state, the rounds' secrets."""

    name: str
    session: str
    method: str
    mode: str
    roster: list
    threshold: int
    channel: dict = field(repr=False)
    alive: set = field(default_factory=set)
    data: dict = field(default_factory=dict, repr=False)
    last_round: int = 0
    phase: str = "joined"  # joined -> keys -> masked -> (unmask) -> keys ...
    secrets: object = field(default=None, repr=False)
    last_used: float = field(default_factory=time.monotonic)
    client: object = field(default=None, repr=False)  # the site's own Dask cluster
    transcript: bytes = b""  # hash of every request answered in the session and its outcome (bound to shares)
    pending: bytes = b""  # the digest of the round's operation and arguments, committed at its keys
    keyed: bytes = b""  # the transcript right after the round's keys (its shares are bound to the one before)
    confirmed: tuple = ()

    def record(self, *parts):
        """Add a request to the transcript; returns the digest of ``parts`` alone."""
        digest = _digest(*parts)
        self.transcript = hashlib.sha256(self.transcript + digest).digest()
        return digest

    @property
    def n_categories(self):
        cats = self.data.get("categories")
        return None if cats is None else int(sum(len(c) for c in cats))


def _floats(vec):
    """A sum's vector as float64 (plain mode: it leaves as it is)."""
    return exact_value(vec) if is_exact(vec) else np.asarray(vec, dtype=np.float64)


def _text(value):
    """``value`` if it is a str, else None: a name or session id the caller sent, compared with names or
    looked up (a list or an array is no key of a dict, and an array compared with a tuple raises)."""
    return value if isinstance(value, str) else None


class SiteAgent:
    """The operations of a site (transport-free: :func:`serve` puts them behind mutual TLS)."""

    def __init__(self, config):
        self.config = config
        self.sessions = {}
        self.lock = threading.Lock()
        config.state.mkdir(parents=True, exist_ok=True)
        self._seen_path = config.state / "sessions"
        self._audit_path = config.state / "audit.log"
        self._others_path = config.state / "audit-others.log"
        self._audit_lock = threading.Lock()  # audit() runs on the agent's worker thread and its IO loop
        self.seen = set()
        if self._seen_path.exists():
            text = self._seen_path.read_text()
            self.seen = set(text.split())
            if text and not text.endswith("\n"):  # a line cut short by a crash: the next id on its own line
                with open(self._seen_path, "a") as f:
                    f.write("\n")
        self.executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="site")
        self._cluster = None
        self._client = None

    @property
    def client(self):
        """A client of the site's own Dask cluster, started on first use (in the agent's worker thread)."""
        if self._client is None:
            from ...runtime.site import site_cluster

            self._cluster = contextlib.ExitStack()
            self._client = self._cluster.enter_context(site_cluster(self.config.compute))
        return self._client

    def close(self):
        self.sessions.clear()
        if self._cluster is not None:
            self._cluster.close()
            self._cluster = self._client = None

    # -- audit ---------------------------------------------------------------------------------
    def audit(self, peer, op, msg, outcome, reason=None):
        line = {
            "time": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "site": self.config.name,
            "peer": peer,
            "op": _short(op),
            "session": _short(msg.get("session")) if isinstance(msg, dict) else None,
            "round": _short(msg.get("round")) if isinstance(msg, dict) else None,
            "outcome": outcome,
        }
        if reason:
            line["reason"] = _short(reason, 400)
        # another certificate's requests (all refused) go to a log of their own: they cannot rotate away the
        # coordinator's trail, whatever they send
        path = self._audit_path if peer == self.config.coordinator else self._others_path
        # at most twice audit_max_bytes on disk, whatever a coordinator sends: the log, and the one before it
        # (one thread at a time: two that both found it full would rename the new one over the old)
        with self._audit_lock:
            with contextlib.suppress(FileNotFoundError):
                if path.stat().st_size >= self.config.audit_max_bytes:
                    path.replace(path.with_name(path.name + ".1"))
            with open(path, "a") as f:
                f.write(json.dumps(line, default=str) + "\n")

    # -- dispatch ------------------------------------------------------------------------------
    def handle(self, peer, op, msg):
        """Answer ``op`` from ``peer`` (its certificate name); raises :class:`Refused` with the reason."""
        try:
            self.check_caller(peer)
            if op not in OPERATIONS:
                raise Refused(f"unknown operation {shown(op)}; known: {list(OPERATIONS)}")
            with self.lock:
                self._expire()
                result = self._run(op, msg)
        except (Refused, InputError) as exc:
            self.audit(peer, op, msg, "refused", getattr(exc, "detail", None) or str(exc))
            raise Refused(str(exc), code=getattr(exc, "code", None)) from None
        self.audit(peer, op, msg, "ok")
        return result

    def check_caller(self, peer):
        """Raise :class:`Refused` unless ``peer`` (a certificate's name) is the configured coordinator."""
        if peer != self.config.coordinator:
            raise Refused(
                f"site {self.config.name!r} answers only {self.config.coordinator!r}; the caller's "
                f"certificate is {shown(peer)}"
            )

    def _run(self, op, msg):
        """``op`` on ``msg``, its outcome added to the session's transcript.

        What a site computes can change its state (a refused ``prepare`` that got halfway, a ``masked`` that
        ran here and nowhere else), and the transcript, to which every round's shares are bound, would
        otherwise record only what was asked: a coordinator could leave one site's state apart from its
        peers' while their transcripts agree, and later complete rounds would carry that site's difference
        alone. With each outcome (ok, refused, failed) recorded, sites whose states may differ hold
        different transcripts, and no later round of the session completes over them."""
        st = self.sessions.get(_text(msg.get("session"))) if op in _SESSION_OPS else None
        outcome = "failed"
        try:
            result = getattr(self, f"_op_{op}")(msg)
            outcome = "ok"
            return result
        except (Refused, InputError):
            outcome = "refused"
            raise
        finally:
            if st is not None:
                st.record("outcome", op, outcome)
                if op == "keys" and outcome == "ok":
                    st.keyed = st.transcript

    def _expire(self):
        now = time.monotonic()
        for key in [k for k, s in self.sessions.items() if now - s.last_used > self.config.idle_timeout]:
            del self.sessions[key]

    def _session(self, msg):
        sid = msg.get("session")
        st = self.sessions.get(_text(sid))
        if st is None:
            raise Refused(
                f"site {self.config.name!r} holds no session {shown(sid)} (never joined, closed or expired)"
            )
        st.last_used = time.monotonic()
        return st

    # -- operations ----------------------------------------------------------------------------
    def _op_join(self, msg):
        from .data import bce_open

        cfg = self.config
        sid = msg.get("session")
        if not isinstance(sid, str) or not _SESSION_RE.fullmatch(sid):
            raise Refused(f"a session id is 16-64 lowercase hex digits; got {shown(sid)}")
        if sid in self.seen:
            raise Refused(
                f"session {sid} was joined before: a session is joined once (its masks are not reused)"
            )
        roster = msg.get("roster")
        if (
            not isinstance(roster, list)
            or not all(isinstance(m, str) for m in roster)  # (str() of bytes is their whole repr)
            or sorted(roster) != cfg.federation
            or len(roster) != len(set(roster))
        ):
            raise Refused(
                f"the roster {shown(roster, 200)} is not this site's federation {cfg.federation} (a subset, "
                "a superset or an unknown member is refused)"
            )
        mode = _text(msg.get("mode"))
        if mode not in ("secure", "plain"):
            raise Refused(f"mode must be 'secure' or 'plain'; got {shown(mode)}")
        if mode == "plain" and not cfg.allow_plain:
            raise Refused(f"site {cfg.name!r} does not allow plain mode (allow_plain is false in its config)")
        method = _text(msg.get("method"))
        if method not in ("bce", "kcc"):
            raise Refused(f"method must be 'bce' or 'kcc'; got {shown(method)}")
        if len(self.sessions) >= cfg.max_sessions:
            raise Refused(f"site {cfg.name!r} already holds {len(self.sessions)} sessions (max_sessions)")
        self.seen.add(sid)
        with open(self._seen_path, "a") as f:  # before any data is read: a crash cannot make it joinable
            f.write(sid + "\n")
            f.flush()
            os.fsync(f.fileno())  # (nor the machine's: the file alone keeps an id from being joined twice)
        t = secagg.threshold(len(cfg.pins), cfg.min_sites)
        channel = secagg.channel_keys(cfg.mask_key, cfg.name, cfg.pins, sid) if mode == "secure" else {}
        st = Session(cfg.name, sid, method, mode, cfg.federation, t, channel, alive=set(cfg.federation))
        st.client = self.client
        # the threshold too: every round's shares are bound to the transcript, so sites whose policies differ
        # (min_sites 3 at one, 2 at its peers) complete no round together; else a round over the peers alone,
        # beside one over all, gave the stricter site's vector as their difference
        st.record("join", sid, method, mode, cfg.federation, t)
        try:
            info = bce_open(st, cfg.labels, cfg.storage_options, cfg.reference)
        except InputError as exc:  # its paths and whatever a reader quotes from the rows stay here
            raise Refused(
                f"site {cfg.name!r} cannot open its data (its audit log says why)", str(exc)
            ) from None
        if not rows_in_range(info["n_rows"], info["n_clusterings"], len(cfg.federation)):
            raise Refused(  # the counts it would tell on joining: public
                f"site {cfg.name!r}: {info['n_rows']} rows of {info['n_clusterings']} clusterings are more "
                f"than the fixed-point range holds in a federation of {len(cfg.federation)} sites (or 2**31 "
                "rows or more, more than a site's exact sums hold)"
            )
        st.data["n_clusterings"] = info["n_clusterings"]
        # and the clusterings, which the coordinator's own check alone compared: sites of other shapes
        # (whose calls can stop at different points on one message) complete no round together
        st.record("clusterings", info["n_clusterings"])
        self.sessions[sid] = st
        return {**info, "threshold": t, "has_reference": cfg.reference is not None}

    def _op_close(self, msg):
        st = self.sessions.get(_text(msg.get("session")))
        if st is not None:
            self._end(st)
        return None

    @contextlib.contextmanager
    def _ends_on_stop(self, st, what):
        """Ends ``st`` when the block stops (refused or failed). The block may have changed the session's
        state first (a prepare that scattered the rows, then found no checkpoint), and its outcome reads as
        one that stopped before any change: a prepare refused at one site early and at its peers late, then
        the other way round, would leave transcripts that agree over states that differ, and a complete sum
        would give the one site's counts. So nothing of the session is summed after."""
        try:
            yield
        except BaseException as exc:
            self._end(st)
            if isinstance(exc, (Refused, InputError)):
                raise Refused(
                    f"{exc} (session {st.session} is closed at site {st.name!r}: {what} that stops ends it)",
                    getattr(exc, "detail", None),
                    code=getattr(exc, "code", None),
                ) from exc
            raise

    def _end(self, st):
        if self.sessions.get(st.session) is st:
            del self.sessions[st.session]
        st.data.clear()  # its blocks' futures: released on the site's cluster

    def _op_call(self, msg):
        st = self._session(msg)
        if st.mode == "secure" and st.phase not in ("joined", "unmasked"):
            # a round's shares are bound to the transcript at its keys: a call that changed this site's state
            # between its keys and its computation (a reset, a promote, a finish) would enter the round's sum
            # with that site apart from its peers, and the round would complete (F23)
            raise Refused(
                f"round {st.last_round} of session {st.session} is open (phase {st.phase!r}): no call until "
                "it is unmasked"
            )
        op, args = _text(msg.get("op")), msg.get("args")
        table = CALLS.get(st.method, {})
        if op not in table:
            raise Refused(f"a {st.method} session has no call {shown(op)}; known: {sorted(table)}")
        st.record("call", op, args)  # before it runs (and its outcome after it: _run)
        with self._ends_on_stop(st, "a call"):
            return table[op](self, st, args)

    def _new_round(self, st, msg):
        r = msg.get("round")
        if not isinstance(r, int) or isinstance(r, bool) or r <= st.last_round:
            raise Refused(
                f"round {shown(r)} is not after the last round {st.last_round} of session {st.session}: "
                "a round is answered once"
            )
        return r

    def _in_round(self, st, msg, phase):
        r = msg.get("round")  # an int, as _new_round took it (not True, 1.0 or an array, which read two ways)
        if not isinstance(r, int) or isinstance(r, bool) or r != st.last_round or st.phase != phase:
            raise Refused(
                f"round {shown(r)} is not in phase {phase!r} here "
                f"(round {st.last_round}, phase {st.phase!r}): "
                "each phase of a round is answered once, in order"
            )
        return r

    def _participants(self, st, names, what):
        if not isinstance(names, (list, dict)) or not all(isinstance(n, str) for n in names):
            raise Refused(f"{what} must name sites")
        names = set(names)
        if st.name not in names:
            raise Refused(f"{what} {sorted(names)} leave out this site")
        if not names <= st.alive:
            raise Refused(
                f"{what} {sorted(names)} include {sorted(names - st.alive)}, not among the session's last "
                f"survivors {sorted(st.alive)} (a site left out of a sum is not brought back)"
            )
        if len(names) < st.threshold:
            raise Refused(
                f"{what} {sorted(names)} are {len(names)} sites; this site takes part in sums over at least "
                f"{st.threshold}"
            )
        return names

    def _op_keys(self, msg):
        st = self._session(msg)
        if st.mode != "secure":
            raise Refused("a plain session has no round keys")
        r = self._new_round(st, msg)
        op = _text(msg.get("op"))
        if op not in SUMS.get(st.method, {}):
            raise Refused(f"a round's keys name its sum: a {st.method} session has no sum {shown(op)}")
        st.last_round, st.phase = r, "keys"
        st.pending = st.record("sum", r, op, msg.get("args"))
        st.secrets, public, cts = secagg.advertise(
            st.name, st.roster, st.channel, st.session, r, st.threshold, context=st.transcript
        )
        return {"public": public, "shares": cts}

    def _op_masked(self, msg):
        st = self._session(msg)
        op = _text(msg.get("op"))
        table = SUMS.get(st.method, {})
        if op not in table:
            raise Refused(f"a {st.method} session has no sum {shown(op)}; known: {sorted(table)}")
        if st.mode == "plain":
            st.last_round, st.phase = self._new_round(st, msg), "masked"
            return {"vector": _floats(table[op](self, st, msg.get("args")))}
        self._in_round(st, msg, "keys")
        if _digest("sum", msg.get("round"), op, msg.get("args")) != st.pending:
            raise Refused("the round's operation and arguments are not those its keys were made for")
        if st.transcript != st.keyed:  # any request since the keys (even one refused): not the state keyed
            raise Refused("the session took requests since this round's keys; the round cannot be computed")
        keys, shares = msg.get("keys"), msg.get("shares")
        if not isinstance(keys, dict) or not isinstance(shares, dict):
            raise Refused("a masked round needs the round keys and shares relayed")
        self._participants(st, keys, "the round's sites")
        st.phase = "masked-start"  # a failed check below leaves the round unanswerable
        secagg.receive_shares(st.name, st.secrets, keys, shares, st.channel, st.session)
        # the sum changes the site's state (an E-step's gamma, KCC's assignment): a stop from here on ends
        # the session, as a call's does (none is known to happen: each row's terms are clipped in range)
        with self._ends_on_stop(st, "a sum"):
            vec = table[op](self, st, msg.get("args"))  # floats, or an exact vector
            try:
                words = secagg.masked_input(vec, st.name, st.secrets, st.session, n_sites=len(st.roster))
            except InputError:  # its value is this site's own statistic: it stays here
                raise Refused("a statistic of this site is outside the fixed-point range") from None
        st.phase = "masked"
        return {"words": words}

    def _op_confirm(self, msg):
        """The consistency check: the survivors as told to this site, with a tag to each other survivor."""
        st = self._session(msg)
        if st.mode != "secure":
            raise Refused("a plain session has nothing to confirm")
        self._in_round(st, msg, "masked")
        survivors = self._participants(st, msg.get("survivors"), "the survivors")
        if not survivors <= set(st.secrets.keys):
            raise Refused(
                f"survivors {sorted(survivors - set(st.secrets.keys))} did not take part in this round"
            )
        st.phase, st.confirmed = "confirmed", tuple(sorted(survivors))
        tags = {
            peer: secagg.confirm_tag(st.channel[peer], st.session, st.secrets, st.name, peer, survivors)
            for peer in sorted(survivors - {st.name})
        }
        return {"tags": tags}

    def _op_unmask(self, msg):
        st = self._session(msg)
        if st.mode != "secure":
            raise Refused("a plain session has nothing to unmask")
        self._in_round(st, msg, "confirmed")
        # whatever follows, this round reveals nothing more (set before every check, so that a refusal at
        # one site here and at its peers below leaves them all in one phase)
        st.phase = "unmasked"
        tags = msg.get("tags")
        if not isinstance(tags, dict) or not all(isinstance(v, bytes) for v in tags.values()):
            raise Refused("unmasking needs the other survivors' confirmations")
        secagg.check_tags(st.name, st.secrets, st.confirmed, tags, st.channel, st.session, st.threshold)
        st.alive = set(st.confirmed)
        return {"shares": secagg.reveal(st.secrets, st.confirmed)}


# --------------------------------------------------------------------------- HTTPS with mutual TLS


def serve(config):
    """Run the agent of ``config`` behind mutual TLS (:mod:`.https`) until SIGTERM or SIGINT; returns 0."""
    from .https import serve as serve_https

    return serve_https(SiteAgent(config))


def serve_main(config_path):
    """``ensemble-dask site serve CONFIG``: the exit code (2 and one line on a bad config)."""
    try:
        config = load_config(config_path)
    except InputError as exc:
        print(f"error: {exc}", file=sys.stderr)
        return 2
    except ssl.SSLError as exc:
        print(f"error: the TLS files of {config_path!r}: {exc}", file=sys.stderr)
        return 2
    logging.basicConfig(level=logging.WARNING)
    return serve(config)


if __name__ == "__main__":  # python -m ensemble_dask.federated.site.agent site.yaml
    sys.exit(serve_main(sys.argv[1]))

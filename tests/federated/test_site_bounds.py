"""A third security review against real site agents on 127.0.0.1: a malicious coordinator, and any holder of
a certificate of the federation's CA.

A5: each site took part in sums over its own ``min_sites``, and its shares committed to nothing of it. With
site-a at 3 and its peers at 2, a round over all three and one over the peers alone completed in one session,
and their difference was site-a's vector. Each site now binds its threshold to every round's shares (with its
transcript), so sites of different policies complete no round together; an honest coordinator names the
mismatch at once.

A1: the round keys and shares relayed in ``masked`` (and the confirmation tags) were passed to ``bytes()``
unchecked: an int ``n`` there made the site allocate and write ``n`` bytes (3 GiB from a 324-byte request).
"""

from __future__ import annotations

import numpy as np
import pytest

from ensemble_dask._validation import InputError
from ensemble_dask.federated.coordinator.link import Federation, SiteRefusedError
from tests._sites import start_sites

pytestmark = pytest.mark.slow

N = 4
NAMES = ["site-a", "site-b", "site-c"]


def _strict_a(name, spec):
    spec["min_sites"] = 3 if name == "site-a" else 2
    return spec


@pytest.fixture(scope="module")
def sites(tmp_path_factory):
    rng = np.random.default_rng(5)
    labels = {s: rng.integers(0, 3, size=(40, N)) for s in NAMES}
    agents = start_sites(tmp_path_factory.mktemp("bounds"), labels)
    agents.labels = labels
    yield agents
    agents.stop()


def _federation(agents):
    return Federation(agents.sites(), "bce", agents.context(), timeout=60)


def test_sites_of_different_policies_complete_no_round(tmp_path):
    rng = np.random.default_rng(6)
    labels = {s: rng.integers(0, 3, size=(40, N)) for s in NAMES}
    with start_sites(tmp_path, labels, config=_strict_a) as agents:
        with pytest.raises(
            InputError, match=r"different numbers of sites \{'site-a': 3, 'site-b': 2, 'site-c': 2\}"
        ):
            _federation(agents).open()
        # a coordinator that joins them anyway: the round over all three does not complete, so no round over
        # site-b and site-c alone can be subtracted from it
        fed = _federation(agents)
        msg = {"session": fed.session, "method": "bce", "roster": fed.roster, "mode": "secure"}
        joined, failed = fed._ask(fed.alive, "join", dict.fromkeys(fed.alive, msg), "joining")
        assert not failed and {n: r["threshold"] for n, r in joined.items()} == {
            "site-a": 3, "site-b": 2, "site-c": 2,
        }  # fmt: skip
        fed.threshold = 2
        try:
            with pytest.raises(SiteRefusedError, match="do not verify"):
                fed.sum("label_counts", ([3] * N,), what="a round over all three")
        finally:
            fed.close()


def _keyed(fed, names):
    """Round keys of a ``label_bits`` round at ``names``; ``(base message, {site: keys answer})``."""
    fed.round += 1
    base = {"session": fed.session, "round": fed.round}
    return base, {n: fed.links[n].post("keys", {**base, "op": "label_bits", "args": []}) for n in names}


@pytest.mark.parametrize("where", ["keys", "shares"])
def test_a_relayed_key_or_share_is_bytes_of_its_size(sites, where):
    fed = _federation(sites).open()
    try:
        base, adv = _keyed(fed, NAMES)
        msg = {
            **base, "op": "label_bits", "args": [], "keys": {n: adv[n]["public"] for n in NAMES},
            "shares": {u: adv[u]["shares"]["site-a"] for u in NAMES if u != "site-a"},
        }  # fmt: skip
        msg[where]["site-b"] = 200 << 20  # an int: bytes(n) was n bytes allocated and written
        with pytest.raises(SiteRefusedError, match=r"must be (32|76) bytes; got int"):
            fed.links["site-a"].post("masked", msg)
    finally:
        fed.close()


# A3 and A4: what a caller can make a site hold before the agent reads a byte (federated.site.https)


def _peak_mb(agents, name):
    """The site agent's peak resident memory so far (VmHWM), in MB."""
    for line in open(f"/proc/{agents.procs[name].pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmHWM")


def test_a_strangers_body_is_never_read(tmp_path):
    """A3: Tornado read a whole body (up to max_body_bytes, 256 MiB) before the caller was checked, on any
    number of connections: eight 200 MB bodies from a certificate of the CA that is not the coordinator's
    ('mallory') took the site to 3.35 GB. The caller is now checked when the headers arrive."""
    import http.client
    import threading

    rng = np.random.default_rng(7)
    with start_sites(tmp_path, {s: rng.integers(0, 3, size=(20, N)) for s in NAMES}) as agents:
        before = _peak_mb(agents, "site-a")
        host, port = agents.addresses["site-a"].removeprefix("https://").rsplit(":", 1)
        answers = []

        def send(path):
            conn = http.client.HTTPSConnection(host, int(port), context=agents.context("mallory"), timeout=60)
            try:
                conn.request("POST", path, b"\xc1" * (100 << 20), {"Content-Type": "application/msgpack"})
                resp = conn.getresponse()
                answers.append((resp.status, resp.read()))
            except OSError as exc:  # the site closed the connection without reading the rest
                answers.append((None, repr(exc)))
            finally:
                conn.close()

        # (a path that no route matched went to Tornado's handler of 404s, which read the body: a review)
        paths = ["/v1/join", "/v1/JOIN", "/nope", "/v1/join"]
        threads = [threading.Thread(target=send, args=(path,)) for path in paths]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        assert _peak_mb(agents, "site-a") - before < 100, (before, _peak_mb(agents, "site-a"))
        assert all(s in (403, None) for s, _ in answers), answers  # 403, or closed before the rest was sent
        audit = (agents.configs["site-a"].parent / "state" / "audit-others.log").read_text()
        assert audit.count("answers only 'coordinator'") == 4
        fed = _federation(agents).open()  # the site still answers its coordinator
        fed.close()


def test_connections_that_never_speak_tls_are_not_held(sites):
    """A4: a connection that never began its TLS handshake was kept for 300 s, and a thousand of them (no
    certificate needed) exhausted the site's file descriptors. A handshake now has HANDSHAKE_SECONDS, and
    connections over MAX_HANDSHAKES are closed at once; the coordinator still gets through."""
    import socket
    import time

    from ensemble_dask.federated.site import https

    host, port = sites.addresses["site-a"].removeprefix("https://").rsplit(":", 1)

    def closed_by_the_site(socks, want=None, seconds=1.0):
        """How many of ``socks`` the site closed, after ``seconds`` (or as soon as ``want`` are)."""
        deadline, closed = time.monotonic() + seconds, set()
        while True:
            time.sleep(0.2)
            for s in socks:
                # a closed socket reads b"" at once; an open one has nothing to read (the client speaks first
                # in TLS), so no socket waits (a 0.05 s timeout on each took most of the test's 17-21 s)
                s.setblocking(False)
                try:
                    if s.recv(1) == b"":
                        closed.add(s)
                except OSError:  # BlockingIOError: still open
                    pass
            if (want is not None and len(closed) >= want) or time.monotonic() > deadline:
                return len(closed)

    socks = [socket.create_connection((host, int(port)), timeout=5) for _ in range(100)]
    try:
        assert closed_by_the_site(socks) == 0  # (each still has its seconds to begin the handshake)
        _federation(sites).open().close()  # the coordinator gets through
        socks += [socket.create_connection((host, int(port)), timeout=5) for _ in range(https.MAX_HANDSHAKES)]
        # those over the count: closed at once (well before the handshakes' HANDSHAKE_SECONDS, 10 s)
        assert closed_by_the_site(socks, want=100, seconds=5.0) >= 100
    finally:
        for s in socks:
            s.close()


def test_a_refusal_quotes_a_large_value_without_its_whole_repr(tmp_path):
    """A2: a refusal's message and its audit line cut the repr of the caller's value after making all of it
    (a bytes value's repr is four times its size): a 240 MB roster took the site to 2.9 GB."""
    from ensemble_dask.federated.coordinator.link import SiteLink

    rng = np.random.default_rng(8)
    agents = start_sites(tmp_path, {s: rng.integers(0, 3, size=(20, N)) for s in NAMES})
    procs = list(agents.procs.values())
    with agents:
        before = _peak_mb(agents, "site-a")
        link = SiteLink("site-a", agents.addresses["site-a"], agents.context(), 120)
        with pytest.raises(SiteRefusedError, match=r"the roster \[b'\\x00\\x00"):
            link.post("join", {"session": "ab" * 16, "roster": [bytes(60 << 20)]})
        link.close()
        # reading and parsing the 60 MB body cost about three times its size; its repr, four times more
        # (770 MB more before)
        assert _peak_mb(agents, "site-a") - before < 400, (before, _peak_mb(agents, "site-a"))
    # (``with`` on started agents entered them again: it started a second set and left the first running)
    assert all(p.poll() is not None for p in procs)


def test_other_certificates_cannot_rotate_away_the_coordinator_s_trail(tmp_path):
    """From a review: every refusal, a stranger's too, went to the one audit log, rotated at audit_max_bytes:
    any holder of a certificate of the CA could push the coordinator's requests out of it. Other
    certificates' requests now go to a log of their own."""
    from ensemble_dask.federated.coordinator.link import SiteLink

    def small_audit(name, spec):
        spec["audit_max_bytes"] = 4096
        return spec

    rng = np.random.default_rng(9)
    agents = start_sites(tmp_path, {s: rng.integers(0, 3, size=(20, N)) for s in NAMES}, config=small_audit)
    with agents:
        fed = _federation(agents).open()
        session = fed.session
        fed.close()
        for _ in range(60):  # (a refused request's connection is closed: a new one each time)
            stranger = SiteLink("site-a", agents.addresses["site-a"], agents.context("mallory"), 30)
            with pytest.raises(SiteRefusedError, match="answers only 'coordinator'"):
                stranger.post("join", {"session": "ab" * 16})
            stranger.close()
        state = agents.configs["site-a"].parent / "state"
        kept = "".join(p.read_text() for p in state.glob("audit.log*"))
        assert session in kept and "mallory" not in kept
        assert (state / "audit-others.log.1").exists()  # (its own, rotated)

"""A malicious coordinator against real site agent processes on 127.0.0.1 (issue 25).

The coordinator holds valid credentials (its certificate from the federation's CA) and sends whatever it
likes. Each test is one attack; each is refused by the sites' own policy, or has no route at all, and
every refusal is a line in the site's audit log. On the former design (sites as workers of the
coordinator's Dask scheduler, with a worker plugin holding the keys) attacks 1-7 each read a site's data.
"""

from __future__ import annotations

import json
import pickle
import ssl
import uuid

import numpy as np
import pytest

from ensemble_dask import InputError
from ensemble_dask.federated.coordinator.link import (
    Federation,
    SiteLink,
    SiteRefusedError,
    client_context,
)
from ensemble_dask.federated.protocol import secagg
from tests._sites import start_sites

pytestmark = pytest.mark.slow

NAMES = ["site-a", "site-b", "site-c"]


@pytest.fixture(scope="module")
def agents(tmp_path_factory):
    rng = np.random.default_rng(0)
    labels = {n: rng.integers(0, 3, size=(40, 4)) for n in NAMES}
    refs = {n: rng.integers(0, 2, size=40) for n in NAMES}
    a = start_sites(tmp_path_factory.mktemp("malicious"), labels, references=refs)
    yield a
    a.stop()


OPENED = []  # (site link, session) joined by a test: closed after it (a site holds at most 4 sessions)


@pytest.fixture(autouse=True)
def close_sessions():
    yield
    while OPENED:
        lk, session = OPENED.pop()
        try:
            lk.post("close", {"session": session})
        except Exception:  # noqa: BLE001 - an agent a test stopped
            pass


def link(agents, name="site-a", as_="coordinator"):
    return SiteLink(name, agents.addresses[name], client_context(agents.certs, as_), timeout=30)


def join(agents, name="site-a", **over):
    msg = {"session": uuid.uuid4().hex, "method": "bce", "roster": NAMES, "mode": "secure", **over}
    lk = link(agents, name)
    OPENED.append((lk, msg["session"]))
    return msg, lk.post("join", msg)


def audit(agents, name="site-a", log="audit.log"):
    path = agents.configs[name].parent / "state" / log
    return [json.loads(line) for line in path.read_text().splitlines()]


def refused(agents, name, match, log="audit.log"):
    """The last line of the site's audit log (``audit-others.log``: of other certificates than the
    coordinator's) is a refusal matching ``match``."""
    last = audit(agents, name, log)[-1]
    assert last["outcome"] == "refused" and match in last["reason"], last


# --------------------------------------------------------------------------- 1. code on a site


def test_pickled_code_never_runs_on_a_site(agents, tmp_path):
    """A pickle whose loading would write a file is refused as a message; the file never appears."""
    marker = tmp_path / "pwned"

    class Exploit:
        def __reduce__(self):
            return (open, (str(marker), "w"))

    body = pickle.dumps({"session": "x", "payload": Exploit()})
    lk = link(agents)
    lk._connect()
    lk.conn.request("POST", "/v1/join", body, {"Content-Type": "application/octet-stream"})
    resp = lk.conn.getresponse()
    assert resp.status == 403 and b"not a message" in resp.read()
    assert not marker.exists()
    refused(agents, "site-a", "not a message")


def test_a_dask_client_has_no_route_to_a_site(agents):
    """The agent is no Dask worker or scheduler: Dask's comm, with the coordinator's TLS files, completes
    no handshake with it, so ``client.run`` / ``client.submit`` have nothing to run on."""
    import asyncio

    from distributed import Security
    from distributed.comm import connect

    c = agents.certs
    sec = Security(
        tls_ca_file=str(c / "ca.pem"),
        tls_client_cert=str(c / "coordinator.pem"),
        tls_client_key=str(c / "coordinator-key.pem"),
        require_encryption=True,
    )
    address = agents.addresses["site-a"].replace("https://", "tls://")

    async def dask_handshake():
        comm = await connect(address, timeout=5, **sec.get_connection_args("client"))
        await comm.write({"op": "identity"})
        return await comm.read()

    with pytest.raises((OSError, TimeoutError)):
        asyncio.run(asyncio.wait_for(dask_handshake(), 10))


def test_an_unknown_operation_is_refused(agents):
    with pytest.raises(SiteRefusedError, match="unknown operation 'run'"):
        link(agents).post("run", {"session": "x", "fn": "os.system"})


# --------------------------------------------------------------------------- 2-4, 6. rosters


@pytest.mark.parametrize(
    "roster, why",
    [
        (["site-a"], "a roster of one"),
        (["site-a", "site-b"], "a subset"),
        (["site-a", "site-b", "site-c", "coordinator"], "the coordinator as a peer"),
        (["site-a", "site-b", "mallory"], "an unpinned member"),
        (["site-a", "site-a", "site-b", "site-c"], "a duplicate"),
    ],
)
def test_a_roster_that_is_not_the_federation_is_refused(agents, roster, why):
    with pytest.raises(SiteRefusedError, match="is not this site's federation"):
        join(agents, roster=roster)
    refused(agents, "site-a", "is not this site's federation")


def test_plain_mode_is_refused_unless_the_site_allows_it(agents):
    with pytest.raises(SiteRefusedError, match="does not allow plain mode"):
        join(agents, mode="plain")
    refused(agents, "site-a", "does not allow plain mode")


def test_a_round_over_fewer_sites_than_the_minimum_is_refused(agents):
    """Keys relayed for two of three sites (a subset sum, from which a's vector follows by difference)."""
    msg, _ = join(agents)
    lk = link(agents)
    adv = lk.post("keys", {"session": msg["session"], "round": 1, "op": "label_bits", "args": []})
    with pytest.raises(SiteRefusedError, match="at least 3"):
        lk.post("masked", {"session": msg["session"], "round": 1, "op": "label_bits", "args": [],
                           "keys": {"site-a": adv["public"], "site-b": adv["public"]},
                           "shares": {}})  # fmt: skip


# --------------------------------------------------------------------------- 5. replays


def test_a_session_is_joined_once(agents):
    msg, _ = join(agents)
    with pytest.raises(SiteRefusedError, match="was joined before"):
        link(agents).post("join", msg)
    refused(agents, "site-a", "was joined before")


def test_a_round_is_answered_once(agents):
    msg, _ = join(agents)
    lk = link(agents)
    lk.post("keys", {"session": msg["session"], "round": 1, "op": "label_bits", "args": []})
    for r in (1, 0):  # the same round again, or an earlier one
        with pytest.raises(SiteRefusedError, match="a round is answered once"):
            lk.post("keys", {"session": msg["session"], "round": r, "op": "label_bits", "args": []})


# --------------------------------------------------------------------------- the SecAgg+ round


def _advertised(agents, session, op="label_bits", args=(), calls=()):
    """Every site joined to ``session``, given ``calls`` (op, args), and advertised round 1 of ``op(*args)``;
    ``({site: link}, {site: answer})``."""
    links = {n: link(agents, n) for n in NAMES}
    msg = {"session": session, "method": "bce", "roster": NAMES, "mode": "secure"}
    for lk in links.values():
        OPENED.append((lk, session))
        lk.post("join", msg)
        for call, call_args in calls:
            lk.post("call", {"session": session, "op": call, "args": list(call_args)})
    keyed = {"session": session, "round": 1, "op": op, "args": list(args)}
    return links, {n: lk.post("keys", keyed) for n, lk in links.items()}


def _joined(agents, session):
    """Every site joined to ``session`` (no round open: a call is answered); ``{site: link}``."""
    links = {n: link(agents, n) for n in NAMES}
    msg = {"session": session, "method": "bce", "roster": NAMES, "mode": "secure"}
    for lk in links.values():
        OPENED.append((lk, session))
        lk.post("join", msg)
    return links


def _masked_msg(session, adv, me, keys=None, op="label_bits", args=()):
    keys = keys or {n: a["public"] for n, a in adv.items()}
    return {"session": session, "round": 1, "op": op, "args": list(args), "keys": keys,
            "shares": {u: adv[u]["shares"][me] for u in adv if u != me}}  # fmt: skip


def test_a_substituted_round_key_is_refused(agents):
    """The coordinator relays its own round key for site-b, to share a mask with site-a: the shares
    site-b encrypted under its pinned channel with site-a no longer verify."""
    from cryptography.hazmat.primitives.asymmetric.x25519 import X25519PrivateKey

    session = uuid.uuid4().hex
    links, adv = _advertised(agents, session)
    keys = {n: a["public"] for n, a in adv.items()}
    keys["site-b"] = X25519PrivateKey.generate().public_key().public_bytes_raw()
    with pytest.raises(SiteRefusedError, match="do not verify under the key pinned"):
        links["site-a"].post("masked", _masked_msg(session, adv, "site-a", keys))
    refused(agents, "site-a", "do not verify")


def test_both_kinds_of_share_are_never_revealed_for_one_site(agents):
    """Told that site-c dropped, a site reveals c's mask-key share; asked again with c alive (for c's
    self-mask share) it refuses: one answer per round. And c, dropped, is not brought back."""
    session = uuid.uuid4().hex
    links, adv = _advertised(agents, session)
    for n in ("site-a", "site-b"):
        links[n].post("masked", _masked_msg(session, adv, n))
    with pytest.raises(SiteRefusedError, match="at least 3"):  # the minimum is the whole federation
        links["site-a"].post("confirm", {"session": session, "round": 1, "survivors": ["site-a", "site-b"]})
    links["site-b"].post("confirm", {"session": session, "round": 1, "survivors": NAMES})
    with pytest.raises(SiteRefusedError, match="only 1 survivors confirmed"):  # nobody else confirmed
        links["site-b"].post("unmask", {"session": session, "round": 1, "tags": {}})
    with pytest.raises(SiteRefusedError, match="answered once"):
        links["site-b"].post("unmask", {"session": session, "round": 1, "tags": {}})


def test_a_survivor_set_that_grows_back_is_refused(agents, tmp_path):
    """With min_sites 2 of 3, a round over {a, b} (c declared dropped) and then one over {a, c} would
    give a - b differences; a site accepts only survivor sets that shrink."""
    rng = np.random.default_rng(1)
    labels = {n: rng.integers(0, 3, size=(20, 3)) for n in NAMES}
    small = start_sites(tmp_path, labels, min_sites=2)
    try:
        session = uuid.uuid4().hex
        links = {n: SiteLink(n, small.addresses[n], small.context(), 30) for n in NAMES}
        for lk in links.values():
            lk.post("join", {"session": session, "method": "bce", "roster": NAMES, "mode": "secure"})
        keyed = {"session": session, "op": "label_bits", "args": []}
        adv = {n: links[n].post("keys", {**keyed, "round": 1}) for n in NAMES}
        for n in ("site-a", "site-b"):
            links[n].post("masked", _masked_msg(session, adv, n))
        two = ["site-a", "site-b"]
        tags = {
            n: links[n].post("confirm", {"session": session, "round": 1, "survivors": two})["tags"]
            for n in two
        }
        for n, other in (("site-a", "site-b"), ("site-b", "site-a")):
            links[n].post("unmask", {"session": session, "round": 1, "tags": {other: tags[other][n]}})
        adv2 = {n: links[n].post("keys", {**keyed, "round": 2}) for n in ("site-a", "site-c")}
        msg = _masked_msg(session, adv2, "site-a")
        msg["round"] = 2
        with pytest.raises(SiteRefusedError, match="not among the session's last survivors"):
            links["site-a"].post("masked", msg)
    finally:
        small.stop()


# --------------------------------------------------------------------------- parameters


@pytest.mark.parametrize(
    "params, match",
    [
        ({"alpha": np.ones(3), "beta": np.full((3, 12), 0.5)}, "alpha must have shape"),
        ({"alpha": np.array([1.0, np.nan]), "beta": np.full((2, 12), 0.5)}, "non-finite"),
        ({"alpha": np.ones(2), "beta": np.full((2, 12), np.inf)}, "non-finite"),
        ({"alpha": np.ones(2)}, "params must be"),
        ({"alpha": np.ones(2), "beta": np.full((2, 12), 0.5), "code": "import os"}, "params must be"),
    ],
)
def test_parameters_of_the_wrong_shape_or_non_finite_are_refused(agents, params, match):
    session = uuid.uuid4().hex
    cats = [np.arange(3, dtype=np.int64)] * 4
    args = (params, 0, 0, 1e-4, 10)
    prepare = [("prepare", (cats, 2, "0123456789abcdef", None))]
    links, adv = _advertised(agents, session, "estep", args, calls=prepare)
    msg = _masked_msg(session, adv, "site-a", op="estep", args=args)
    with pytest.raises(SiteRefusedError, match=match):
        links["site-a"].post("masked", msg)


def test_a_path_from_the_coordinator_is_refused(agents):
    """The checkpoint's run key names a file at the site: only 16 hex digits are taken."""
    session = uuid.uuid4().hex
    links = _joined(agents, session)
    cats = [np.arange(3, dtype=np.int64)] * 4
    with pytest.raises(SiteRefusedError, match="run_key must be 16 hex digits"):
        links["site-a"].post(
            "call", {"session": session, "op": "prepare", "args": [cats, 2, "../../x/y", None]}
        )


# --------------------------------------------------------------------------- 7. outputs and credentials


def test_outputs_and_data_chosen_by_the_coordinator_are_refused(tmp_path):
    """A workflow may name only each site's name and address; the site's finish takes no path."""
    from ensemble_dask.stages.federated import run_federated_workflow

    for key in ("output", "url", "storage_options", "mask_key", "checkpoint"):
        spec = {"store": str(tmp_path / "c.zarr"), "federated": {"n_clusters": 2, "certs": str(tmp_path),
                "sites": [{"name": "site-a", "address": "https://127.0.0.1:1", key: "/tmp/x"}]}}  # fmt: skip
        with pytest.raises(InputError, match="live in the site's own config"):
            run_federated_workflow(spec)


def test_finish_takes_no_output_from_the_coordinator(agents):
    session = uuid.uuid4().hex
    links = _joined(agents, session)
    with pytest.raises(SiteRefusedError, match="takes 0 argument"):
        links["site-a"].post("call", {"session": session, "op": "finish", "args": ["/tmp/stolen.zarr"]})


# --------------------------------------------------------------------------- certificates


def test_a_site_certificate_presented_as_the_coordinator_is_refused(agents):
    with pytest.raises(SiteRefusedError, match="answers only 'coordinator'"):
        link(agents, "site-a", as_="site-b").post("join", {"session": uuid.uuid4().hex})
    refused(agents, "site-a", "answers only 'coordinator'", log="audit-others.log")
    with pytest.raises(SiteRefusedError, match="answers only 'coordinator'"):
        link(agents, "site-a", as_="mallory").post("join", {"session": uuid.uuid4().hex})


def test_an_unpinned_certificate_cannot_connect(agents, tmp_path):
    """A certificate from another CA fails the TLS handshake; no certificate at all too."""
    from ensemble_dask.federated.protocol.certs import make_certs

    make_certs(tmp_path / "other", ["coordinator"])
    with pytest.raises(ssl.SSLError):
        SiteLink("site-a", agents.addresses["site-a"], client_context(tmp_path / "other"), 10).post(
            "join", {}
        )
    ctx = ssl.create_default_context(cafile=str(agents.certs / "ca.pem"))
    ctx.check_hostname = False
    with pytest.raises((ssl.SSLError, ConnectionError)):
        SiteLink("site-a", agents.addresses["site-a"], ctx, 10).post("join", {})


def test_an_agent_with_another_sites_certificate_is_not_taken_for_the_site(agents):
    """The coordinator's side of the binding: site-b's agent answering at site-a's address is refused."""
    lk = SiteLink("site-a", agents.addresses["site-b"], client_context(agents.certs), 10)
    with pytest.raises(SiteRefusedError, match="presents the certificate of 'site-b'"):
        lk.post("join", {})


def test_a_federation_with_all_sites_sums_and_reveals_nothing_else(agents):
    """The honest path through the same agents: a secure sum equals the plain sum of the sites' rows."""
    fed = Federation(
        [{"name": n, "address": agents.addresses[n]} for n in NAMES], "bce", client_context(agents.certs)
    )
    with fed:
        bits = fed.sum("label_bits", what="test")
    # the labels of each bit length over the pooled rows: each clustering's largest label is 2 (bit length 2)
    assert [int(np.flatnonzero(row > 0.5).max()) for row in bits.reshape(4, 64)] == [2] * 4
    assert secagg.threshold(3, 3) == 3


def test_a_config_that_weakens_the_site_is_refused(agents, tmp_path):
    import yaml

    from ensemble_dask.federated.site.config import load_config

    cfg = agents.configs["site-a"]
    spec = yaml.safe_load(cfg.read_text())
    for change, match in [
        ({"federation": {**spec["federation"], "coordinator": spec["federation"]["site-b"]}}, "coordinator"),
        ({"min_sites": 1}, "min_sites"),
        ({"federation": {"site-a": spec["federation"]["site-a"]}, "min_sites": 1}, "min_sites"),
        ({"allow_plain": "yes"}, "allow_plain"),
        ({"max_state_entries": 0}, "'max_state_entries' .* must be a positive integer; got 0"),
        ({"max_state_entries": True}, "max_state_entries"),
        ({"audit_max_bytes": -1}, "'audit_max_bytes' .* must be a positive integer"),
        ({"max_body_bytes": "1e9"}, "'max_body_bytes' .* must be a positive integer; got '1e9'"),
        ({"mask_key": str(agents.certs / "site-b-mask.key")}, "is not the key pinned for 'site-a'"),
        # the names are fields of what the sites authenticate (a review: 'a' and 'a|a' read two ways)
        ({"name": "site-a|x"}, r"'name' .*: site names must be letters, digits"),
        ({"federation": {**spec["federation"], "b|c": spec["federation"]["site-b"]}}, "member 'b|c'"),
        ({"federation": {**spec["federation"], 7: spec["federation"]["site-b"]}}, "member 7"),
    ]:
        bad = cfg.parent / "bad.yaml"
        bad.write_text(yaml.safe_dump({**spec, **change}))
        with pytest.raises(InputError, match=match):
            load_config(bad)
    key = agents.certs / "site-a-mask.key"
    key.chmod(0o644)
    try:
        with pytest.raises(InputError, match="chmod 600"):
            load_config(cfg)
    finally:
        key.chmod(0o600)


def test_no_route_runs_code_on_a_site_besides_its_agent(agents):
    """A site's own Dask cluster (started at its first session) has no comm port (``inproc://``); the HTTP
    servers distributed starts anyway listen on loopback and serve no route (no dashboard, no proxy, no
    JSON, no metrics), and speak no Dask protocol. So no client, with the coordinator's credentials or
    none, reaches a Dask process of the site: the agent's HTTPS port is the only way in."""
    import asyncio
    import urllib.error
    import urllib.request

    import psutil
    from distributed.comm import connect

    fed = Federation(
        [{"name": n, "address": agents.addresses[n]} for n in NAMES], "bce", client_context(agents.certs)
    )
    with fed:
        fed.sum("label_bits", what="test")  # every site's cluster is up now
        for name in NAMES:
            port = int(agents.addresses[name].rsplit(":", 1)[1])
            proc = psutil.Process(agents.procs[name].pid)
            listening = {
                (c.laddr.ip, c.laddr.port)
                for p in [proc, *proc.children(recursive=True)]
                for c in p.net_connections(kind="inet")
                if c.status == psutil.CONN_LISTEN
            }
            others = {(ip, p) for ip, p in listening if p != port}
            assert ("127.0.0.1", port) in listening and all(ip == "127.0.0.1" for ip, _ in others)
            for ip, p in others:
                for path in ("/health", "/info/main/workers.html", "/json/identity.json", "/metrics",
                             "/proxy/8788/127.0.0.1/status", "/status",
                             "/individual-plots.json"):  # fmt: skip
                    with pytest.raises(urllib.error.HTTPError) as err:
                        urllib.request.urlopen(f"http://{ip}:{p}{path}", timeout=10)
                    assert err.value.code == 404, (name, p, path)
                with urllib.request.urlopen(f"http://{ip}:{p}/sitemap.json", timeout=10) as resp:
                    assert json.loads(resp.read()) == {"paths": ["/sitemap.json"]}, (name, p)  # itself only

                async def dask_handshake(ip=ip, p=p):
                    comm = await connect(f"tcp://{ip}:{p}", timeout=5)
                    await comm.write({"op": "identity"})
                    return await comm.read()

                if name == NAMES[0]:  # (a Dask comm waits for an answer the HTTP server never gives)
                    with pytest.raises((OSError, TimeoutError)):
                        asyncio.run(asyncio.wait_for(dask_handshake(), 3))

"""What a site bounds by itself against a malicious coordinator, on real site agents on 127.0.0.1: answers
that do not depend on its rows, the memory its answers hold, the work a request asks for; its config's schema.

Each attack here worked on the code before it (the fourth attacker review, issue 57).
"""

from __future__ import annotations

import hashlib
import json
import re
import socket
import ssl
import time

import numpy as np
import pytest
import yaml

from ensemble_dask import _validation
from ensemble_dask.federated.coordinator.link import Federation, SiteRefusedError
from ensemble_dask.federated.protocol import wire
from ensemble_dask.federated.site.https import MAX_BODIES
from ensemble_dask.stages.sites import _write_array
from tests._sites import start_sites

pytestmark = pytest.mark.slow

NAMES = ["site-a", "site-b", "site-c"]
N = 4  # clusterings


def _federation(agents):
    return Federation(agents.sites(), "bce", agents.context(), timeout=60).open()


def _outcome(link, op, message):
    """A site's answer to one request, its numbers masked: what the coordinator can tell sites apart by."""
    try:
        link.post(op, message)
        return "answered"
    except SiteRefusedError as exc:
        return re.sub(r"\d+", "#", str(exc).replace(link.name, "SITE"))


# --------------------------------------------------------------------------- a checkpoint of another layout

#: Two layouts whose fit keys, the first 48 bits of a SHA-256 over k, the categories and the block count, were
#: equal (found offline by a birthday search over 2 x 2**24 category lists, about 3 minutes of 2 cores). C1
#: holds labels no site has (every row one pattern); C2 holds label 1 in clustering 0, which some sites have.
C1 = [[1000, 3104215], [7], [7], [7]]
C2 = [[1, 11788088], [7], [7], [7]]


def _layout(categories):
    return json.dumps({"k": 2, "categories": categories, "blocks": 1})


def test_a_checkpoint_of_another_layout_is_refused_alike_whatever_a_sites_rows(tmp_path):
    """Session 1 prepares every site with C1 and runs one E-step (each site checkpoints a gamma of one
    distinct row); session 2 prepares with C2, of the same 48-bit key, and resumes it. A site whose rows have
    one pattern under C2 took the file, the others refused it as not fitting their rows: "does this site hold
    label 1 in clustering 0?" read from each site's answer alone. Now every site refuses alike."""
    key = [hashlib.sha256(_layout(c).encode()).hexdigest()[:12] for c in (C1, C2)]
    assert key[0] == key[1]  # the attack's precondition: the short keys collide

    rng = np.random.default_rng(3)
    labels = {s: rng.integers(0, 3, size=(40, N)) for s in NAMES}
    labels["site-a"][:, 0] = rng.integers(0, 2, size=40)  # labels 0 and 1: two patterns under C2
    labels["site-b"][:, 0] = rng.choice([0, 2], size=40)  # no label 1: one pattern under C2
    labels["site-c"][:, 0] = rng.integers(1, 3, size=40)  # labels 1 and 2: two patterns
    run_key = "00000000feedface"
    with start_sites(tmp_path, labels) as agents:
        fed = _federation(agents)
        fed.call("prepare", ([np.array(c, dtype=np.int64) for c in C1], 2, run_key, None), what="prepare")
        params = {"alpha": np.ones(2), "beta": np.full((2, 5), 0.5)}
        fed.sum("estep", (params, 0, 0, 1e-4, 5), what="E-step")
        tag = f"{fed.session}-{fed.round}"
        fed.close()

        fed = _federation(agents)
        msg = {
            "session": fed.session, "op": "prepare",
            "args": [[np.array(c, dtype=np.int64) for c in C2], 2, run_key, [0, 0, tag, None, None]],
        }  # fmt: skip
        outcomes = {n: _outcome(fed.links[n], "call", msg) for n in NAMES}
        fed.close()
    assert len(set(outcomes.values())) == 1, f"the sites' answers tell their rows apart: {outcomes}"
    assert "answered" not in outcomes.values()


def test_a_resume_after_a_sites_rows_changed_does_not_tell_what_they_hold(tmp_path):
    """The fifth attacker review: session 1 prepares with one label (label 0 of clustering 0) and
    checkpoints; the sites' rows are then refreshed (the same row counts); session 2 resumes under the same
    layout. The file's name did not cover the rows, so a site found it and took or refused it by whether its
    new rows had one or two patterns under that label: whether they hold label 0, read from one site's answer.
    A checkpoint is now bound to the rows it was written for: every site whose rows changed finds none."""
    rng = np.random.default_rng(8)
    labels = {s: rng.integers(1, 3, size=(40, N)) for s in NAMES}  # no label 0 in clustering 0 at first
    one = [np.array([0], dtype=np.int64)] + [np.zeros(0, dtype=np.int64)] * (N - 1)
    run_key = "00000000facefeed"
    with start_sites(tmp_path, labels) as agents:
        fed = _federation(agents)
        fed.call("prepare", (one, 2, run_key, None), what="prepare")
        fed.sum("estep", ({"alpha": np.ones(2), "beta": np.full((2, 1), 0.5)}, 0, 0, 1e-4, 5), what="E-step")
        tag = f"{fed.session}-{fed.round}"
        fed.close()
        new = {
            "site-a": np.column_stack([rng.integers(0, 3, size=40), labels["site-a"][:, 1:]]),  # label 0 now
            "site-c": np.column_stack(
                [rng.integers(1, 3, size=40), labels["site-c"][:, 1:]]
            ),  # changed, no 0
        }
        for name, rows in new.items():
            spec = yaml.safe_load(agents.configs[name].read_text())
            _write_array(str(agents.configs[name].parent / spec["data"]["labels"]), rows.astype(np.int32))
        fed = _federation(agents)
        msg = {"session": fed.session, "op": "prepare", "args": [one, 2, run_key, [0, 0, tag, None, None]]}
        outcomes = {n: _outcome(fed.links[n], "call", msg) for n in NAMES}
        fed.close()
    assert outcomes["site-a"] == outcomes["site-c"], f"changed rows tell their labels apart: {outcomes}"
    assert "no checkpoint" in outcomes["site-a"]
    assert outcomes["site-b"] == "answered"  # its rows are those the file was written for


# --------------------------------------------------------------------------- answers the caller does not read


def _rss_mb(agents, name):
    for line in open(f"/proc/{agents.procs[name].pid}/status"):
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    raise AssertionError("no VmRSS")


def _post_unread(agents, name, op, message):
    """POST ``message`` to site ``name`` on a connection of its own, and read nothing back."""
    host, port = agents.addresses[name].removeprefix("https://").rsplit(":", 1)
    body = wire.encode(message)
    raw = socket.create_connection((host, int(port)), timeout=30)
    s = agents.context().wrap_socket(raw, server_hostname=host)
    head = f"POST /v1/{op} HTTP/1.1\r\nHost: site\r\nContent-Type: application/msgpack\r\n"
    s.sendall(head.encode() + f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    return s


def _rounds_unread(agents, fed, sizes, rounds):
    """Up to ``rounds`` rounds of ``label_counts(sizes)``, site-a's answer left unread on a connection of its
    own each time, until a site refuses; returns (the connections, the refusal or None)."""
    held = []
    for _ in range(rounds):
        fed.round += 1
        keyed = {"session": fed.session, "round": fed.round, "op": "label_counts", "args": [sizes]}
        try:
            adv = {n: fed.links[n].post("keys", keyed) for n in NAMES}
        except SiteRefusedError as exc:
            return held, str(exc)
        for me in NAMES:  # (every site of a round computes it: its transcript is bound to the next)
            msg = {**keyed, "keys": {n: adv[n]["public"] for n in NAMES},
                   "shares": {u: adv[u]["shares"][me] for u in NAMES if u != me}}  # fmt: skip
            if me == "site-a":
                held.append(_post_unread(agents, me, "masked", msg))
            else:
                fed.links[me].post("masked", msg)
        time.sleep(1.0)  # the site computes and answers
    return held, None


def test_answers_left_unread_do_not_hold_the_sites_memory(tmp_path):
    """A 400-byte ``masked`` request for a vector of 2**22 entries whose answer is never read held about 64 MB
    at the site until the coordinator closed its socket (71 MB -> 804 MB after 10). An answer now holds its
    place among the site's MAX_BODIES until it is written, so the requests after those are refused."""
    rng = np.random.default_rng(4)
    labels = {s: rng.integers(0, 3, size=(40, N)) for s in NAMES}
    with start_sites(tmp_path, labels, config=lambda name, spec: {**spec, "write_timeout": 600}) as agents:
        fed = _federation(agents)
        before = _rss_mb(agents, "site-a")
        held, refused = _rounds_unread(agents, fed, [1 << 18] * N, 10)  # vectors of 2**20 entries
        grown = _rss_mb(agents, "site-a") - before
        # each answer held costs about 30 MB of the site's memory (its 16 MB on the wire, and the encoding's)
        assert grown < (MAX_BODIES + 2) * 32, f"{len(held)} unread answers hold {grown:.0f} MB at the site"
        assert refused is not None and f"is reading {MAX_BODIES} requests" in refused, refused
        assert len(held) == MAX_BODIES
        for s in held:
            s.close()


def test_an_answer_left_unread_closes_its_connection_after_the_write_timeout(tmp_path):
    rng = np.random.default_rng(4)
    labels = {s: rng.integers(0, 3, size=(40, N)) for s in NAMES}
    with start_sites(tmp_path, labels, config=lambda name, spec: {**spec, "write_timeout": 2}) as agents:
        fed = _federation(agents)
        held, _ = _rounds_unread(agents, fed, [1 << 18] * N, 1)  # an answer of 16 MB
        log = agents.configs["site-a"].parent / "state" / "audit.log"
        deadline = time.monotonic() + 60
        while "answer not read in time" not in log.read_text() and time.monotonic() < deadline:
            time.sleep(0.2)
        assert '"op": "masked", "session": null, "round": null, "outcome": "closed"' in log.read_text()
        held[0].settimeout(10)
        got = 0
        try:  # what the kernels' buffers held, then the end
            while chunk := held[0].recv(1 << 20):
                got += len(chunk)
        except TimeoutError:
            pytest.fail("the site still holds the connection")
        except (ConnectionError, ssl.SSLError):
            pass
        assert got < 16 << 20  # the answer, 16 MB, was cut
        fed.close()
        _federation(agents).close()  # and the site answers again


# --------------------------------------------------------------------------- work per request


def test_the_work_a_request_asks_for_is_bounded_by_the_sites_limits(tmp_path):
    """An E-step with ``e_step_tol=0`` and ``e_step_max_iter=1000`` at k = 500 held the site's only worker
    32 times as long as an honest one, and every other request waited. The site's ``limits`` refuse it, with
    a line in its audit log; a request within them is answered."""

    def policy(name, spec):
        return {
            **spec,
            "limits": {"max_k": 6, "e_step_max_iter": 50, "e_step_min_tol": 1e-6, "max_categories": 12},
        }

    rng = np.random.default_rng(5)
    labels = {s: rng.integers(0, 3, size=(40, N)) for s in NAMES}
    cats = [np.arange(3, dtype=np.int64)] * N
    with start_sites(tmp_path, labels, config=policy) as agents:
        fed = _federation(agents)
        with pytest.raises(SiteRefusedError, match=r"k = 7 is over this site's limit of 6 \(limits.max_k"):
            fed.call("prepare", (cats, 7, "0123456789abcdef", None), what="prepare")
        fed.close()
        fed = _federation(agents)
        many = [np.arange(4, dtype=np.int64)] * N  # 16 categories
        with pytest.raises(SiteRefusedError, match=r"categories = 16 is over .* \(limits.max_categories"):
            fed.call("prepare", (many, 2, "0123456789abcdef", None), what="prepare")
        fed.close()
        fed = _federation(agents)
        fed.call("prepare", (cats, 6, "0123456789abcdef", None), what="prepare")
        params = {"alpha": np.ones(6), "beta": np.full((6, 12), 0.5)}
        for args, match in [
            ((params, 0, 0, 1e-4, 1000), r"e_step_max_iter = 1000 is over this site's limit of 50"),
            ((params, 0, 0, 0.0, 50), r"e_step_tol = 0.0 is below this site's limit of 1e-06"),
        ]:
            with pytest.raises(SiteRefusedError, match=match):
                fed.sum("estep", args, what="E-step")
            fed.close()
            fed = _federation(agents)
            fed.call("prepare", (cats, 6, "0123456789abcdef", None), what="prepare")
        fed.sum("estep", (params, 0, 0, 1e-4, 50), what="E-step")  # within the limits
        fed.close()
        audit = (agents.configs["site-a"].parent / "state" / "audit.log").read_text()
        assert audit.count("limits.") >= 4


# --------------------------------------------------------------------------- the config's schema


@pytest.fixture(scope="module")
def config(tmp_path_factory):
    """One site's config and its keys, as ``start_sites`` writes them (no agent started)."""
    from ensemble_dask.federated.protocol.certs import make_certs
    from ensemble_dask.stages.sites import _demo_layout, _write_array, write_demo_configs

    root = tmp_path_factory.mktemp("schema")
    make_certs(root / "certs", ["coordinator", *NAMES])
    local = _demo_layout([{"name": n} for n in NAMES], root)
    for s in local:
        _write_array(s["url"], np.zeros((4, 2), dtype=np.int32))
    return write_demo_configs(local, root / "certs", None)[0]


def _load(config, text):
    from ensemble_dask.federated.site.config import load_config

    bad = config.parent / "bad.yaml"
    bad.write_text(text)
    return load_config(bad)


def test_a_member_listed_twice_is_refused_not_pinned_to_its_last_key(config):
    text = config.read_text()
    spec = yaml.safe_load(text)
    b_key = spec["federation"]["site-b"]
    twice = text.replace("federation:\n", f"federation:\n  site-c: {b_key}\n", 1)
    assert "site-c:" in twice.split("federation:")[1]
    with pytest.raises(
        _validation.InputError, match=r"the key 'site-c' is given twice in .*bad.yaml' \(line"
    ):
        _load(config, twice)


@pytest.mark.parametrize(
    ("change", "match"),
    [
        ({"idle_timeout": "abc"}, r"'idle_timeout' in .* must be a number of at least 1; got 'abc'"),
        ({"write_timeout": 0}, r"'write_timeout' .* must be a number of at least 1; got 0"),
        ({"max_sessions": 2.5}, r"'max_sessions' .* must be a positive integer; got 2.5"),
        ({"limits": {"max_k": "many"}}, r"'max_k' of 'limits' .* must be a positive integer; got 'many'"),
        ({"limits": {"max_kk": 4}}, r"'limits' .* takes \['e_step_max_iter', .*unknown: \['max_kk'\]"),
        ({"limits": [1]}, r"'limits' .* must be a mapping"),
        ({"compute": {"n_workers": "two"}}, r"'n_workers' of 'compute' .* must be a positive integer"),
        ({"compute": {"processes": "yes"}}, r"'processes' of 'compute' .* must be true or false"),
        ({"data": {"labels": "x.zarr", "label": "y"}}, r"'data' .* unknown: \['label'\]"),
        ({"coordinator": 7}, r"'coordinator' .* must be its certificate's name; got 7"),
        ({"listen": "127.0.0.1:99999"}, r"'listen' .* must be host:port"),
    ],
)
def test_a_value_of_the_wrong_type_is_refused_naming_its_key(config, change, match):
    spec = yaml.safe_load(config.read_text())
    with pytest.raises(_validation.InputError, match=match):
        _load(config, yaml.safe_dump({**spec, **change}))


@pytest.mark.parametrize("key", ["cert", "ca", "key"])
def test_a_missing_tls_file_is_refused_naming_the_key_and_the_file(config, key):
    spec = yaml.safe_load(config.read_text())
    spec["tls"] = {**spec["tls"], key: "nowhere/missing.pem"}
    with pytest.raises(
        _validation.InputError, match=rf"tls.{key} in .*: no such file '.*nowhere/missing.pem'"
    ):
        _load(config, yaml.safe_dump(spec))


def test_a_missing_key_file_of_a_member_is_refused_naming_the_member(config):
    spec = yaml.safe_load(config.read_text())
    spec["federation"] = {**spec["federation"], "site-b": "nowhere/site-b-mask.pub"}
    with pytest.raises(
        _validation.InputError, match=r"the key of 'site-b' .*: no such file '.*site-b-mask.pub'"
    ):
        _load(config, yaml.safe_dump(spec))

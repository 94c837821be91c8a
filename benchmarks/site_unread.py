"""Peak memory of a real site agent asked for the largest vectors by a coordinator that reads no answer.

Three site agents (real processes on 127.0.0.1, default policy). Side by side in one run, in fresh agents
each: one round whose answer the coordinator reads (an honest round with the largest vector,
``label_counts`` of 2**24 entries in all, the site's limit), and up to ``--connections`` rounds whose
``masked`` answers at site-a are never read, each on a connection of its own. The site answers at most
``MAX_BODIES`` requests at once, an answer counting until it is written, so the rounds after that are
refused. Prints site-a's peak resident memory (VmHWM) in each case and their ratio.

Usage: python benchmarks/site_unread.py [--size 16777216] [--connections 64]
"""

from __future__ import annotations

import argparse
import socket
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[1]
NAMES = ["site-a", "site-b", "site-c"]


def _peak_mb(agents, name):
    for line in open(f"/proc/{agents.procs[name].pid}/status"):
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError("no VmHWM")


def _sites(root):
    from ensemble_dask.federated.protocol.certs import make_certs
    from ensemble_dask.stages.sites import LocalSiteAgents, _demo_layout, _write_array, write_demo_configs

    make_certs(root / "certs", ["coordinator", *NAMES])
    local = _demo_layout([{"name": n} for n in NAMES], root)
    rng = np.random.default_rng(0)
    for s in local:
        _write_array(s["url"], rng.integers(0, 3, size=(1000, 4)).astype(np.int32))
    return LocalSiteAgents(write_demo_configs(local, root / "certs", None)).__enter__(), root / "certs"


def _unread(agents, certs, msg):
    from ensemble_dask.federated.coordinator.link import client_context
    from ensemble_dask.federated.protocol import wire

    host, port = agents.addresses["site-a"].removeprefix("https://").rsplit(":", 1)
    body = wire.encode(msg)
    s = client_context(certs, "coordinator").wrap_socket(
        socket.create_connection((host, int(port)), timeout=120), server_hostname=host
    )
    head = f"POST /v1/masked HTTP/1.1\r\nHost: site\r\nContent-Length: {len(body)}\r\n\r\n"
    s.sendall(head.encode() + body)
    return s


def run(size, connections, read):
    from ensemble_dask.federated.coordinator.link import Federation, SiteRefusedError, client_context

    with tempfile.TemporaryDirectory() as tmp:
        agents, certs = _sites(Path(tmp))
        held, answered, refused = [], 0, 0
        try:
            sites = [{"name": n, "address": agents.addresses[n]} for n in NAMES]
            fed = Federation(sites, "bce", client_context(certs, "coordinator"), timeout=600).open()
            before = _peak_mb(agents, "site-a")
            sizes = [size // 4] * 4
            for _ in range(connections if not read else 1):
                fed.round += 1
                keyed = {"session": fed.session, "round": fed.round, "op": "label_counts", "args": [sizes]}
                try:
                    adv = {n: fed.links[n].post("keys", keyed) for n in NAMES}
                except SiteRefusedError:
                    refused += 1
                    break
                for me in NAMES:
                    msg = {**keyed, "keys": {n: adv[n]["public"] for n in NAMES},
                           "shares": {u: adv[u]["shares"][me] for u in NAMES if u != me}}  # fmt: skip
                    if me == "site-a" and not read:
                        held.append(_unread(agents, certs, msg))
                    else:
                        fed.links[me].post("masked", msg)
                answered += 1
                time.sleep(2.0)
            time.sleep(5.0)
            peak = _peak_mb(agents, "site-a")
        finally:
            for s in held:
                s.close()
            agents.stop()
    return before, peak, answered, refused


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--size", type=int, default=1 << 24, help="entries of each vector (default 2**24)")
    ap.add_argument("--connections", type=int, default=64, help="rounds whose answers are not read")
    args = ap.parse_args(argv)
    sys.path.insert(0, str(ROOT))
    from ensemble_dask.federated.site.https import MAX_BODIES

    print(f"vectors of {args.size:,} entries; site-a's peak resident memory, MB (MAX_BODIES = {MAX_BODIES})")
    print(f"{'case':<34} {'before':>8} {'peak':>8} {'rounds':>7} {'refused':>8}")
    one = run(args.size, 1, read=True)
    print(f"{'one round, answer read':<34} {one[0]:8.0f} {one[1]:8.0f} {one[2]:7d} {one[3]:8d}")
    many = run(args.size, args.connections, read=False)
    name = f"{args.connections} rounds, answers unread"
    print(f"{name:<34} {many[0]:8.0f} {many[1]:8.0f} {many[2]:7d} {many[3]:8d}")
    print(f"ratio (unread / read), peak: {many[1] / one[1]:.2f}")


if __name__ == "__main__":
    main()

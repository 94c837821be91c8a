"""``ensemble-dask site``: a site's own keys (``init``) and its agent (``serve``)."""

from __future__ import annotations

from ._options import csv_list


def add_parser(sub, common):
    p = sub.add_parser("site", help="a site's own keys (init) and its agent (serve)")
    p.set_defaults(run=run)
    site_sub = p.add_subparsers(dest="site_command", required=True, metavar="{init,serve}")
    q = site_sub.add_parser(
        "init",
        parents=[common],
        help="make the site's private keys here, and the request and public key it sends out",
    )
    q.add_argument("name", help="the site's name (its certificate's common name)")
    q.add_argument("--out", default=".", metavar="DIR", help="directory of the files (default: .)")
    q.add_argument(
        "--host",
        dest="hosts",
        action="extend",
        type=csv_list,
        default=[],
        metavar="H",
        help="a DNS name or IP address the site is reached by (repeatable, or comma-separated)",
    )
    q = site_sub.add_parser("serve", parents=[common], help="run the site's agent from its config file")
    q.add_argument("config", help="the agent's configuration file")


def run(args):
    if args.site_command == "serve":
        from ..federated.site.agent import serve_main

        return serve_main(args.config)
    from ..federated.protocol.certs import init_site

    paths = init_site(args.out, args.name, hosts=args.hosts)
    for path in paths:
        print(f"site: wrote {path}")
    key, csr, mask, pub = paths
    print(f"site: keep {key} and {mask} here (never send them)")
    print(f"site: next, send {csr} to the federation's CA (`ensemble-dask certs sign --ca DIR {csr.name}`)")
    print(f"site: and {pub} to the other sites, each of which pins it in its own site.yaml (federation:)")
    return 0

"""``ensemble-dask certs``: a federation's CA (``ca``), signed site requests (``sign``), or every party's keys
at once for a local demo."""

from __future__ import annotations

from pathlib import Path

from .._validation import EnsembleDaskError
from ._options import csv_list


def add_parser(sub, common):
    p = sub.add_parser(
        "certs",
        parents=[common],
        help="keys of a federation: a CA (ca), signed site requests (sign), or all at once for a demo",
        description="With --out and --names (no subcommand): the one-command local demo, which makes the "
        "CA and every party's private keys in one directory (whoever holds it can impersonate any party "
        "and unmask every site). A real federation runs `ensemble-dask site init` on each site, "
        "`certs ca` once and `certs sign` per request.",
    )
    p.add_argument(
        "--out", help="demo: directory for ca.pem, NAME.pem, NAME-key.pem, NAME-mask.* (all private keys)"
    )
    p.add_argument("--names", type=csv_list, help="demo: parties, e.g. coordinator,site-a,site-b")
    p.add_argument("--overwrite", action="store_true", help="demo: replace existing files (and the CA)")
    p.set_defaults(run=run)
    certs_sub = p.add_subparsers(dest="certs_command", metavar="{ca,sign}")
    q = certs_sub.add_parser(
        "ca", parents=[common], help="make the federation's CA (ca.pem, ca-key.pem); keep it offline"
    )
    q.add_argument("--out", dest="ca_out", metavar="DIR", required=True, help="directory of the CA")
    q = certs_sub.add_parser(
        "sign", parents=[common], help="sign a site's request NAME.csr with the CA: write NAME.pem"
    )
    q.add_argument("--ca", metavar="DIR", required=True, help="directory of ca.pem and ca-key.pem")
    q.add_argument("csr", help="the request, NAME.csr (from `ensemble-dask site init NAME`)")
    q.add_argument(
        "--out", dest="sign_out", metavar="DIR", help="directory of NAME.pem (default: the request's)"
    )


def run(args):
    from ..federated.protocol.certs import make_ca, make_certs, sign_csr

    if args.certs_command and (args.names or args.overwrite):
        raise EnsembleDaskError(
            f"--names and --overwrite are for `certs` alone, not `certs {args.certs_command}`"
        )
    if args.certs_command == "ca":
        ca_pem, ca_key = make_ca(args.ca_out)
        print(f"certs: CA {ca_pem}: send it to every party")
        print(f"certs: CA key {ca_key}: keep it offline, where requests are signed:")
        print(f"certs: next, per site: ensemble-dask certs sign --ca {args.ca_out} NAME.csr")
        return 0
    if args.certs_command == "sign":
        from cryptography import x509

        path = sign_csr(args.ca, args.csr, out=args.sign_out or args.out)
        cert = x509.load_pem_x509_certificate(path.read_bytes())
        names = cert.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
        hosts = ", ".join(str(getattr(n, "value", n)) for n in names)
        print(f"certs: signed {path} for {hosts}: check that these are the site's names")
        print(f"certs: send {path} and {Path(args.ca) / 'ca.pem'} back to the site")
        return 0
    if args.out is None or args.names is None:
        raise EnsembleDaskError(
            "certs needs --out DIR --names A,B,... (the local demo), or a subcommand: "
            "`certs ca --out DIR`, `certs sign --ca DIR NAME.csr`"
        )
    info = make_certs(args.out, args.names, overwrite=args.overwrite)
    for name in info["created"]:
        print(f"certs: {name}: {args.out}/{name}.pem, {name}-key.pem, {name}-mask.key, {name}-mask.pub")
    for name in info["kept"]:
        print(f"certs: {name}: kept (files exist; --overwrite replaces them)")
    print(f"certs: CA {info['ca']} (keep {args.out}/ca-key.pem offline)")
    return 0

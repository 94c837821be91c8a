"""The federation's commands: ``federated`` (a run over the sites), ``certs`` (a CA, signed requests, a demo's
keys) and ``site`` (a site's own keys and its agent)."""

from __future__ import annotations

import sys
from pathlib import Path

from .._validation import EnsembleDaskError


def _federated(spec, args, progress):
    from .. import pipeline
    from ..federated import SiteLostError, SiteRefusedError
    from ..stages.federated import StoreCheckpoint

    pipeline.check_workflow(spec)
    if args.restart:
        from ..io.store import RunStore

        store = spec.get("store") or f"runs/{spec.get('name', 'federated')}.zarr"
        StoreCheckpoint(RunStore(store, spec.get("storage_options"))).clear()
    try:
        # the federated run, then its report page
        result = pipeline.run_workflow(spec, progress=progress, take_over=args.take_over)
        summary = result["federated"]
    except SiteRefusedError as exc:
        print(f"ensemble-dask: error: {exc}", file=sys.stderr)
        print("ensemble-dask: (the site's own policy refused; its audit log says why)", file=sys.stderr)
        return 3
    except SiteLostError as exc:
        print(f"ensemble-dask: error: {exc}", file=sys.stderr)
        if (spec.get("federated") or {}).get("method") == "kcc":
            print(
                "ensemble-dask: (KCC runs are not checkpointed) bring the site back and run again",
                file=sys.stderr,
            )
            return 3
        print(
            "ensemble-dask: (alpha, beta) of the last complete iteration are checkpointed; bring the site "
            "back and run the same command to resume",
            file=sys.stderr,
        )
        return 3
    tls = "mutual TLS"
    if summary.get("method") == "kcc":
        print(
            f"federated KCC ({summary['mode']}, {tls}) over {len(summary['sites'])} sites "
            f"({summary['n_rows']} rows): {summary['iterations']} Lloyd iterations, objective "
            f"{summary['objective']:.6f}, {summary['seconds']:.1f} s"
            + (f", without {summary['dropped']} (dropped out)" if summary.get("dropped") else "")
        )
    else:
        print(
            f"federated BCE ({summary['mode']}, {tls}) over {len(summary['sites'])} sites "
            f"({summary['n_rows']} rows): {summary['iterations']} EM iterations, lower bound "
            f"{summary['lower_bound']:.4f}, {summary['seconds']:.1f} s"
            + (f", without {summary['dropped']} (dropped out)" if summary.get("dropped") else "")
            + (
                f", resumed at iteration {summary['resumed_from_iteration']}"
                if summary["resumed_from_iteration"]
                else ""
            )
        )
    if "H" in summary:
        print(
            f"whole federation vs reference: H={summary['H']:.4f} ARI={summary['ARI']:.4f} "
            f"NMI={summary['NMI']:.4f}"
        )
    print(f"report: {result['html']}")
    return 0


def _certs(args):
    from ..federated.certs import make_ca, make_certs, sign_csr

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


def _site(args):
    if args.site_command == "serve":
        from ..federated.agent import serve_main

        return serve_main(args.config)
    from ..federated.certs import init_site

    paths = init_site(args.out, args.name, hosts=args.hosts)
    for path in paths:
        print(f"site: wrote {path}")
    key, csr, mask, pub = paths
    print(f"site: keep {key} and {mask} here (never send them)")
    print(f"site: next, send {csr} to the federation's CA (`ensemble-dask certs sign --ca DIR {csr.name}`)")
    print(f"site: and {pub} to the other sites, each of which pins it in its own site.yaml (federation:)")
    return 0

"""The command line's parser, assembled from the commands' modules (each adds its own subcommands)."""

from __future__ import annotations

import argparse

from .. import __version__
from . import certs, coassoc, consensus, federated, generate, ingest, predict, report, run, site

#: in the order of ``ensemble-dask --help``
COMMANDS = (run, federated, certs, site, ingest, generate, coassoc, consensus, report, predict)


def parser():
    ap = argparse.ArgumentParser(prog="ensemble-dask", description="Consensus clustering at scale on Dask.")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    sub = ap.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub, common)
    return ap

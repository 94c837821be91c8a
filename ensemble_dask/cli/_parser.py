"""The command line's parser, assembled from the commands' modules (each adds its own subcommands)."""

from __future__ import annotations

import argparse

from .. import __version__
from . import certs, coassoc, consensus, federated, generate, ingest, predict, report, run, site

#: in the order of ``ensemble-dask --help``: the whole run, its stages in the data's order, the federation
COMMANDS = (run, ingest, generate, coassoc, consensus, report, predict, federated, certs, site)

#: each command's examples, the last part of its ``--help``
EXAMPLES = {
    "run": [
        "ensemble-dask run workflows/demo.yaml",
        "ensemble-dask run workflows/kdd99-pcc.yaml --data kdd.csv.gz",
    ],
    "ingest": [
        "ensemble-dask ingest data.csv --store runs/my.zarr --label-column class",
        "ensemble-dask ingest X.npy --store runs/my.zarr --no-standardize",
        "ensemble-dask ingest X.npy --store runs/my.zarr --labels y.npy",
    ],
    "generate": [
        "ensemble-dask generate --store runs/my.zarr -N 50 --rate 0.5 --n-clusters 8",
        "ensemble-dask generate --store runs/my.zarr -N 50 --rate 0.5 --k-min 8 --k-max sqrt --extend",
    ],
    "import-labels": [
        "ensemble-dask import-labels partitions.csv --store runs/my.zarr",
        "ensemble-dask import-labels partitions.npy --store runs/my.zarr --reference y.npy",
    ],
    "coassoc": ["ensemble-dask coassoc --store runs/my.zarr --n-clusters 8"],
    "consensus": [
        "ensemble-dask consensus pcc-kl --store runs/my.zarr --n-clusters 8",
        "ensemble-dask consensus graph --store runs/my.zarr --n-clusters 8",
    ],
    "report": ["ensemble-dask report --store runs/my.zarr"],
    "verify": [
        "ensemble-dask verify --store runs/my.zarr",
        "ensemble-dask verify --store runs/my.zarr --quick",
    ],
    "predict": [
        "ensemble-dask predict new.csv --store runs/my.zarr --method pcc-kl --out new-labels.parquet"
    ],
    "federated": ["ensemble-dask federated workflows/federated-bce.yaml"],
    "split-sites": ["ensemble-dask split-sites --store runs/my.zarr --out sites --names site-a,site-b"],
    "certs": ["ensemble-dask certs --out certs --names coordinator,site-a,site-b,site-c"],
    "certs ca": ["ensemble-dask certs ca --out ca"],
    "certs sign": ["ensemble-dask certs sign --ca ca site-a.csr"],
    "site": ["ensemble-dask site init site-a --out keys", "ensemble-dask site serve site.yaml"],
    "site init": ["ensemble-dask site init site-a --out keys --host site-a.example.org"],
    "site serve": ["ensemble-dask site serve site.yaml"],
}


class HelpFormatter(argparse.RawDescriptionHelpFormatter):
    """Descriptions and epilogs as written; each option's default after its help, where it has one worth
    saying (not None, not a flag's False, not one the help already states)."""

    def _get_help_string(self, action):
        text = action.help or ""
        default = action.default
        if (
            "%(default)" in text
            or "default" in text.lower()
            or any(default is v for v in (None, False, argparse.SUPPRESS))
            or default == []
            or not action.option_strings
        ):
            return text
        return f"{text} (default: %(default)s)"


def _subparsers(p, path=()):
    """``(command path, parser)`` of every subcommand under ``p``, depth first."""
    for action in p._actions:
        if isinstance(action, argparse._SubParsersAction):
            for name, sp in action.choices.items():
                yield (*path, name), sp
                yield from _subparsers(sp, (*path, name))


def parser():
    ap = argparse.ArgumentParser(prog="ensemble-dask", description="Consensus clustering at scale on Dask.")
    ap.add_argument("--version", action="version", version=f"%(prog)s {__version__}")
    common = argparse.ArgumentParser(add_help=False)
    common.add_argument("-v", "--verbose", action="count", default=0, help="more log output (-vv for debug)")
    common.add_argument(
        "-q", "--quiet", action="store_true", help="no progress bars or lines, and only errors in the log"
    )
    sub = ap.add_subparsers(dest="command", required=True)
    for command in COMMANDS:
        command.add_parser(sub, common)
    for path, sp in _subparsers(ap):
        sp.formatter_class = HelpFormatter
        examples = EXAMPLES.get(" ".join(path))
        if examples:
            lines = "\n".join(f"  {e}" for e in examples)
            sp.epilog = f"{sp.epilog}\n\nexamples:\n{lines}" if sp.epilog else f"examples:\n{lines}"
    return ap

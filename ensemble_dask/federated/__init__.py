"""Consensus across sites that never share their rows and do not trust the coordinator.

The tree follows the trust boundary:

* :mod:`.site` - what runs on a site: its agent (``ensemble-dask site serve``), its policy, its rows;
* :mod:`.coordinator` - what runs on the coordinator: calls to the agents, federated BCE and KCC;
* :mod:`.protocol` - what both share: the wire format, secure aggregation (SecAgg+), the certificates.

BCE and KCC on one Dask cluster's row blocks (not federated) are :mod:`ensemble_dask.rowblocks`.
"""

from ..runtime.imports import lazy_names

_EXPORTS = {
    "ColumnBCEResult": ".coordinator.columns",
    "run_column_distributed_bce": ".coordinator.columns",
    "Federation": ".coordinator.link",
    "SiteLostError": ".coordinator.link",
    "SiteRefusedError": ".coordinator.link",
    "SitesDropped": ".coordinator.link",
    "FederatedBCEResult": ".coordinator.bce",
    "ResumeRefusedWarning": ".coordinator.bce",
    "run_federated_bce": ".coordinator.bce",
    "FederatedKCCResult": ".coordinator.kcc",
    "run_federated_kcc": ".coordinator.kcc",
    "COORDINATOR": ".protocol.secure",
    "Message": ".protocol.secure",
    "MessageLog": ".protocol.secure",
    "decode_fixed": ".protocol.secure",
    "encode_fixed": ".protocol.secure",
}
__all__ = sorted(_EXPORTS)


# imported on first use: `site init` and the agent need no scikit-learn
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)

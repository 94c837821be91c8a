"""Consensus across sites that never share their rows and do not trust the coordinator.

* :mod:`.secure` - two-word fixed point, ChaCha20 keystreams (no network);
* :mod:`.secagg` - the SecAgg+ round: round keys, Shamir shares of mask seeds, masking and unmasking;
* :mod:`.wire` - the messages: msgpack maps of plain values and arrays, no pickle;
* :mod:`.agent` - the site agent (``ensemble-dask site serve``): the site's policy, its checks, mutual TLS;
* :mod:`.coordinator` - the coordinator's HTTPS calls to the agents and its secure sums;
* :mod:`.rows` - row-distributed BCE (papers/001 Sect. 5.2.1) over the agents;
* :mod:`.rows_kcc` - row-distributed KCC (papers/004) over the agents (``federated: method: kcc``);
* :mod:`.columns` - column-distributed BCE (Sect. 5.2.2);
* :mod:`.certs` - the CA, TLS certificates and masking keys (``ensemble-dask site init``, ``certs``).

BCE and KCC on one Dask cluster's row blocks (not federated) are :mod:`ensemble_dask.rowblocks`.
"""

from ..runtime.imports import lazy_names

_EXPORTS = {
    "ColumnBCEResult": ".columns",
    "run_column_distributed_bce": ".columns",
    "Federation": ".coordinator",
    "SiteLostError": ".coordinator",
    "SiteRefusedError": ".coordinator",
    "SitesDropped": ".coordinator",
    "FederatedBCEResult": ".rows",
    "ResumeRefusedWarning": ".rows",
    "run_federated_bce": ".rows",
    "FederatedKCCResult": ".rows_kcc",
    "run_federated_kcc": ".rows_kcc",
    "COORDINATOR": ".secure",
    "Message": ".secure",
    "MessageLog": ".secure",
    "decode_fixed": ".secure",
    "encode_fixed": ".secure",
}
__all__ = sorted(_EXPORTS)


# imported on first use: `site init` and the agent need no scikit-learn
__getattr__, __dir__ = lazy_names(__name__, _EXPORTS)

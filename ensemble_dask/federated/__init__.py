"""Consensus across sites that never share their rows and do not trust the coordinator, and BCE on row blocks.

* :mod:`.secure` - two-word fixed point, ChaCha20 keystreams (no network);
* :mod:`.secagg` - the SecAgg+ round: round keys, Shamir shares of mask seeds, masking and unmasking;
* :mod:`.wire` - the messages: msgpack maps of plain values and arrays, no pickle;
* :mod:`.agent` - the site agent (``ensemble-dask site serve``): the site's policy, its checks, mutual TLS;
* :mod:`.coordinator` - the coordinator's HTTPS calls to the agents and its secure sums;
* :mod:`.rows` - row-distributed BCE (papers/001 Sect. 5.2.1) over the agents;
* :mod:`.rows_kcc` - row-distributed KCC (papers/004) over the agents (``federated: method: kcc``);
* :mod:`.columns` - column-distributed BCE (Sect. 5.2.2);
* :mod:`.dask` - BCE's E-step on row blocks of ``labels`` on one Dask cluster (not federated);
* :mod:`.certs` - the CA, TLS certificates and masking keys (``ensemble-dask site init``, ``certs``).
"""

from .columns import ColumnBCEResult, run_column_distributed_bce
from .coordinator import Federation, SiteLostError, SiteRefusedError, SitesDropped
from .rows import FederatedBCEResult, run_federated_bce
from .rows_kcc import FederatedKCCResult, run_federated_kcc
from .secure import COORDINATOR, Message, MessageLog, decode_fixed, encode_fixed

__all__ = [
    "Message",
    "MessageLog",
    "FederatedBCEResult",
    "FederatedKCCResult",
    "ColumnBCEResult",
    "Federation",
    "SiteLostError",
    "SiteRefusedError",
    "SitesDropped",
    "run_federated_bce",
    "run_federated_kcc",
    "run_column_distributed_bce",
    "encode_fixed",
    "decode_fixed",
    "COORDINATOR",
]

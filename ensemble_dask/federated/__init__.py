"""Consensus across sites that never share their rows, and BCE on Dask row blocks.

* :mod:`.secure` - two-word fixed point, X25519/HKDF pair keys, ChaCha20 masks (no Dask);
* :mod:`.site` - the site side: a worker plugin holding the site's key and session state;
* :mod:`.aggregate` - the coordinator side: a secure sum of one vector per site per round (generic);
* :mod:`.rows` - row-distributed BCE (papers/001 Sect. 5.2.1) on top of it;
* :mod:`.rows_kcc` - row-distributed KCC (papers/004) on top of it (``federated: method: kcc``);
* :mod:`.columns` - column-distributed BCE (Sect. 5.2.2);
* :mod:`.dask` - BCE's E-step on row blocks of ``labels`` on a Dask cluster;
* :mod:`.certs` - the CA, TLS certificates and masking keys of a deployment (``ensemble-dask certs``).
"""

from .aggregate import SecureAggregator, SiteLostError
from .columns import ColumnBCEResult, run_column_distributed_bce
from .rows import FederatedBCEResult, run_federated_bce
from .rows_kcc import FederatedKCCResult, run_federated_kcc
from .secure import COORDINATOR, Message, MessageLog, decode_fixed, encode_fixed

__all__ = [
    "Message",
    "MessageLog",
    "FederatedBCEResult",
    "FederatedKCCResult",
    "ColumnBCEResult",
    "SecureAggregator",
    "SiteLostError",
    "run_federated_bce",
    "run_federated_kcc",
    "run_column_distributed_bce",
    "encode_fixed",
    "decode_fixed",
    "COORDINATOR",
]

"""Consensus across sites that never share their rows, and BCE on Dask row blocks.

* :mod:`.secure` - fixed-point encoding, key agreement and pairwise masks (secure aggregation);
* :mod:`.rows` - row-distributed BCE (papers/001 Sect. 5.2.1): sites' E-steps, one secure sum per EM iteration;
* :mod:`.columns` - column-distributed BCE (Sect. 5.2.2);
* :mod:`.dask` - BCE's E-step on row blocks of ``labels`` on a Dask cluster.
"""

from .columns import run_column_distributed_bce
from .rows import FederatedBCEResult, run_federated_bce
from .secure import COORDINATOR, Message, MessageLog, decode_fixed, encode_fixed

__all__ = [
    "Message",
    "MessageLog",
    "FederatedBCEResult",
    "run_federated_bce",
    "run_column_distributed_bce",
    "encode_fixed",
    "decode_fixed",
    "COORDINATOR",
]

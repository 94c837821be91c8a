"""What the coordinator and the sites share: the wire format, secure aggregation and the certificates.

* :mod:`.wire` - the messages: msgpack maps of plain values and arrays, no pickle;
* :mod:`.secure` - two-word fixed point and exact sums, ChaCha20 keystreams (no network);
* :mod:`.secagg` - the SecAgg+ round: round keys, Shamir shares of mask seeds, masking and unmasking;
* :mod:`.messages` - BCE's parameters as a message carries them;
* :mod:`.certs` - the CA, TLS certificates and masking keys (``ensemble-dask site init``, ``certs``).

Nothing here imports the site's or the coordinator's code.
"""

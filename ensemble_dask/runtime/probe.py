"""Whether anything listens at a Dask scheduler's address, before a command works on its data."""

from __future__ import annotations

from .._validation import InputError

__all__ = ["probe_scheduler"]


def probe_scheduler(address, timeout=5.0):
    """Stop with :class:`InputError` when nothing listens at a ``tcp://`` or ``tls://`` scheduler address: a
    command finds a mistyped address before it works on the data, not after (other schemes and Clients are
    left to :func:`~.clients.dask_client`)."""
    import socket

    from distributed.comm.addressing import parse_address, parse_host_port

    if not isinstance(address, str) or not address:
        return
    try:
        scheme, loc = parse_address(address)
        if scheme not in ("tcp", "tls"):
            return
        host, port = parse_host_port(loc)
    except ValueError as exc:
        raise InputError(f"the Dask scheduler address {address!r} is not host:port: {exc}") from None
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as exc:
        raise InputError(f"cannot reach the Dask scheduler at {address!r}: {exc}") from None

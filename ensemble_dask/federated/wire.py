"""The federation's wire format: msgpack maps of plain values and NumPy arrays, with no pickle anywhere.

A message is a map of strings to ``None``, booleans, integers, floats, strings, bytes, lists, maps and
NumPy arrays. An array travels as the msgpack extension type :data:`ARRAY_EXT` holding a tiny msgpack
header (dtype code, shape) and the raw little-endian bytes; only the dtypes of :data:`DTYPES` exist on
the wire, so decoding never builds an object from a type the sender names. Decoding is strict: unknown
extension types, non-string map keys, a wrong byte count or a body over ``max_bytes`` are refused with
:class:`WireError`.

>>> import numpy as np
>>> decode(encode({"round": 3, "alpha": np.arange(3.0)}))["alpha"]
array([0., 1., 2.])
"""

from __future__ import annotations

import msgpack
import numpy as np

from .._validation import InputError

__all__ = [
    "ARRAY_EXT",
    "DTYPES",
    "WireError",
    "encode",
    "decode",
    "MAX_BYTES",
    "MAX_ENTRIES",
    "MAX_LEN",
    "peer_name",
]

ARRAY_EXT = 1
#: the dtypes an array may have on the wire (code -> NumPy dtype, little-endian)
DTYPES = {
    "f8": np.dtype("<f8"),
    "i8": np.dtype("<i8"),
    "u8": np.dtype("<u8"),
    "i4": np.dtype("<i4"),
    "f4": np.dtype("<f4"),
}
_CODES = {dt: code for code, dt in DTYPES.items()}
MAX_BYTES = 1 << 31  # 2 GiB: a body larger than this is refused before it is parsed
#: entries of one list or map, and of all of them in a message with the lists and maps themselves (an array
#: is one entry): a message's bulk travels in arrays, which decode to their own size, while one byte of
#: msgpack can make an empty list of 56 bytes
MAX_LEN = 1 << 16
MAX_ENTRIES = 1 << 20
_MAX_DIMS = 4
#: an array's header, [dtype code, shape], takes at most 1 + 3 + 1 + 9 * _MAX_DIMS bytes
_MAX_HEADER = 64


class WireError(InputError):
    """A message that is not in the federation's wire format."""


def _array_parts(obj):
    """``(header, array)`` of an array on the wire: its little-endian C-contiguous form and the msgpack of
    ``[dtype code, shape]`` that precedes its bytes in the extension."""
    dt = obj.dtype.newbyteorder("<") if obj.dtype.byteorder == ">" else obj.dtype
    code = _CODES.get(np.dtype(dt))
    if code is None:
        raise WireError(f"arrays of dtype {obj.dtype} do not travel on the wire (allowed: {sorted(DTYPES)})")
    arr = np.ascontiguousarray(obj, dtype=DTYPES[code])
    return msgpack.packb([code, list(arr.shape)]), arr


def _default(obj):
    """msgpack's fallback for a value :func:`_pack` leaves to it (containers and arrays never reach it)."""
    if isinstance(obj, np.generic):
        return obj.item()
    raise WireError(f"{type(obj).__name__} values do not travel on the wire")


def _ext_header(size):
    """msgpack's framing of an extension of :data:`ARRAY_EXT` with ``size`` bytes (as msgpack writes it)."""
    fixed = {1: 0xD4, 2: 0xD5, 4: 0xD6, 8: 0xD7, 16: 0xD8}.get(size)
    if fixed is not None:
        return bytes((fixed, ARRAY_EXT))
    if size < 1 << 8:
        return bytes((0xC7, size, ARRAY_EXT))
    if size < 1 << 16:
        return b"\xc8" + size.to_bytes(2, "big") + bytes((ARRAY_EXT,))
    return b"\xc9" + size.to_bytes(4, "big") + bytes((ARRAY_EXT,))


def _pack(obj, out, packer):
    """Append the msgpack of ``obj`` to ``out`` as pieces: an array's bytes as a view of the array (no copy),
    the rest as msgpack writes it."""
    if isinstance(obj, dict):
        out.append(packer.pack_map_header(len(obj)))
        for key, value in obj.items():
            _pack(key, out, packer)
            _pack(value, out, packer)
    elif isinstance(obj, (list, tuple)):
        out.append(packer.pack_array_header(len(obj)))
        for value in obj:
            _pack(value, out, packer)
    elif isinstance(obj, np.ndarray):
        head, arr = _array_parts(obj)
        out += (_ext_header(len(head) + arr.nbytes), head, memoryview(arr.reshape(-1).view(np.uint8)))
    else:
        out.append(packer.pack(obj))


def _ext_hook(code, data):
    if code != ARRAY_EXT:
        raise WireError(f"unknown extension type {code} in a message")
    # the header is a few bytes at the front: the unpacker is fed those, not a copy of the whole array
    front = memoryview(data)[:_MAX_HEADER]
    unpacker = msgpack.Unpacker(raw=False, strict_map_key=True, max_buffer_size=len(front))
    unpacker.feed(front)
    try:
        head = next(unpacker)
    except (StopIteration, ValueError, msgpack.UnpackException) as exc:
        raise WireError(f"an array's header is not readable: {exc}") from exc
    offset = unpacker.tell()
    if (
        not isinstance(head, list)
        or len(head) != 2
        or head[0] not in DTYPES
        or not isinstance(head[1], list)
        or len(head[1]) > _MAX_DIMS
        or not all(isinstance(s, int) and not isinstance(s, bool) and s >= 0 for s in head[1])
    ):
        raise WireError(f"an array's header {head!r} is not [dtype code, shape]")
    dtype, shape = DTYPES[head[0]], tuple(head[1])
    size = int(np.prod(shape, dtype=np.int64)) * dtype.itemsize if shape else dtype.itemsize
    body = memoryview(data)[offset:]  # (a slice of the bytes would copy them)
    if len(body) != size:
        raise WireError(f"an array of shape {shape} and dtype {dtype} needs {size} bytes; got {len(body)}")
    return np.frombuffer(body, dtype=dtype).reshape(shape).copy()


def encode(message):
    """Bytes of a message (a map of plain values and NumPy arrays): msgpack's own bytes for it, with each
    array's bytes copied once, into the message (``msgpack.packb`` with the arrays as extensions made three
    copies of each: a site answering the largest vector held four times its size)."""
    if not isinstance(message, dict):
        raise WireError(f"a message is a map; got {type(message).__name__}")
    out = []
    _pack(message, out, msgpack.Packer(default=_default, use_bin_type=True, strict_types=False))
    return b"".join(out)


def decode(body, *, max_bytes=MAX_BYTES, max_entries=MAX_ENTRIES):
    """The message in ``body`` (bytes); refuses anything but the format above, and a message of more than
    ``max_entries`` list and map entries in all (or :data:`MAX_LEN` in one) before it builds them."""
    if len(body) > max_bytes:
        raise WireError(f"a message of {len(body)} bytes is over the limit of {max_bytes}")
    entries = 0

    def counted(container):  # msgpack calls it on each list and map as it completes, innermost first
        nonlocal entries
        entries += 1 + len(container)  # an empty one costs memory too
        if entries > max_entries:
            raise WireError(f"a message of more than {max_entries} list and map entries")
        return container

    try:
        msg = msgpack.unpackb(
            body, raw=False, strict_map_key=True, ext_hook=_ext_hook, list_hook=counted,
            object_hook=counted, max_array_len=MAX_LEN, max_map_len=MAX_LEN,
        )  # fmt: skip
    except WireError:
        raise
    except (ValueError, TypeError, msgpack.UnpackException) as exc:
        raise WireError(f"not a message: {type(exc).__name__}: {exc}") from exc
    if not isinstance(msg, dict):
        raise WireError(f"a message is a map; got {type(msg).__name__}")
    return msg


def peer_name(cert):
    """The common name of a peer certificate as ``ssl.getpeercert()`` gives it (None without one)."""
    for rdn in (cert or {}).get("subject", ()):
        for key, value in rdn:
            if key == "commonName":
                return value
    return None

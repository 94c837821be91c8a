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

import math

import msgpack
import numpy as np

from ..._validation import InputError

__all__ = [
    "ARRAY_EXT",
    "CANNOT_RESUME",
    "DTYPES",
    "WireError",
    "encode",
    "decode",
    "MAX_BYTES",
    "MAX_ENTRIES",
    "MAX_LEN",
    "peer_name",
]

#: the ``code`` of a site's refusal to resume from the checkpoint a ``prepare`` names (the coordinator then
#: fits afresh; any other refusal stops its run)
CANNOT_RESUME = "cannot-resume"

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
#: an array's header, [dtype code, shape], takes 1 + 3 + 1 + 9 * _MAX_DIMS bytes at most in msgpack's
#: shortest encoding, 53 in its longest
_MAX_HEADER = 64
#: containers holding large arrays are walked by :func:`_pack` to this depth (the package's messages: a few)
_MAX_DEPTH = 32
#: arrays of this many bytes or more are copied once into a message; smaller ones go through msgpack (three
#: copies of a few bytes, and their containers packed at msgpack's speed)
_INLINE_BYTES = 1 << 16


class WireError(InputError):
    """A message that is not in the federation's wire format."""


def _large(value):
    """Whether ``value`` is an array that :func:`encode` copies once into a message (64 KiB or more)."""
    return isinstance(value, np.ndarray) and value.nbytes >= _INLINE_BYTES


def _array_parts(obj):
    """``(header, array)`` of an array on the wire: its little-endian C-contiguous form and the msgpack of
    ``[dtype code, shape]`` that precedes its bytes in the extension."""
    dt = obj.dtype.newbyteorder("<") if obj.dtype.byteorder == ">" else obj.dtype
    code = _CODES.get(np.dtype(dt))
    if code is None:
        raise WireError(f"arrays of dtype {obj.dtype} do not travel on the wire (allowed: {sorted(DTYPES)})")
    arr = np.asarray(obj, dtype=DTYPES[code], order="C")  # (ascontiguousarray makes a 0-d array 1-d)
    return msgpack.packb([code, list(arr.shape)]), arr


def _default(obj):
    """msgpack's fallback for the values it does not know: a small array as its extension, a large one left to
    :func:`_pack` (``_HasArray``), a NumPy scalar as its Python value; anything else does not travel."""
    if isinstance(obj, np.ndarray):
        if _large(obj):
            raise _HasArray
        head, arr = _array_parts(obj)
        return msgpack.ExtType(ARRAY_EXT, head + arr.tobytes())
    if isinstance(obj, np.generic):
        return obj.item()
    raise WireError(f"{type(obj).__name__} values do not travel on the wire")


class _HasArray(Exception):
    """A value holds a large array: :func:`_pack` walks it."""


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


def _holders(obj, found, depth=0):
    """Whether ``obj`` holds a large array; maps the id of every container within it that does to the
    positions of its values that do, in ``found``. One pass over the values (containers deeper than
    :data:`_MAX_DEPTH` are not looked into: msgpack packs them, and refuses a large array there)."""
    if isinstance(obj, np.ndarray):
        return _large(obj)
    if isinstance(obj, dict):
        values = obj.values()
    elif isinstance(obj, (list, tuple)):
        values = obj
    else:
        return False
    if depth >= _MAX_DEPTH:
        return False
    held = [i for i, v in enumerate(values) if type(v) not in _PLAIN and _holders(v, found, depth + 1)]
    if held:
        found[id(obj)] = held
    return bool(held)


_PLAIN = frozenset({int, float, str, bytes, bool, type(None)})


def _pack(obj, out, headers, holders):
    """Append the msgpack of ``obj`` to ``out`` as pieces: msgpack's own bytes for a value that holds no large
    array (one call, at msgpack's speed), a large array's bytes as a view of the array (no copy), and a
    container among ``holders`` walked: the runs of its values that hold no large array packed by msgpack
    at once (``headers``: a ``msgpack.Packer`` for the maps' and lists' headers)."""
    if _large(obj):
        head, arr = _array_parts(obj)
        out += (_ext_header(len(head) + arr.nbytes), head, memoryview(arr.reshape(-1).view(np.uint8)))
        return
    held = holders.get(id(obj))
    if held is None:
        try:
            out.append(msgpack.packb(obj, default=_default, use_bin_type=True, strict_types=False))
        except _HasArray:  # one below the depth the walk looks
            raise WireError(
                f"arrays nested deeper than {_MAX_DEPTH} levels do not travel on the wire"
            ) from None
        return
    as_map = isinstance(obj, dict)
    items = list(obj.items()) if as_map else list(obj)
    out.append(headers.pack_map_header(len(items)) if as_map else headers.pack_array_header(len(items)))
    run = 0  # where the current run of values that hold no large array begins
    for i in [*held, len(items)]:
        if i > run:
            n = i - run
            part = dict(items[run:i]) if as_map else items[run:i]
            packed = msgpack.packb(part, default=_default, use_bin_type=True, strict_types=False)
            out.append(memoryview(packed)[1 if n < 16 else 3 if n < 1 << 16 else 5 :])  # its header off
        if i < len(items):
            if as_map:
                _pack(items[i][0], out, headers, holders)
            _pack(items[i][1] if as_map else items[i], out, headers, holders)
        run = i + 1


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
    size = math.prod(shape) * dtype.itemsize  # Python integers: no overflow, whatever the sender declares
    body = memoryview(data)[offset:]  # (a slice of the bytes would copy them)
    if len(body) != size:
        raise WireError(f"an array of shape {shape} and dtype {dtype} needs {size} bytes; got {len(body)}")
    return np.frombuffer(body, dtype=dtype).reshape(shape).copy()


def encode(message):
    """Bytes of a message (a map of plain values and NumPy arrays): msgpack's own bytes for it, with the bytes
    of each array of 64 KiB or more (little-endian, C-contiguous) copied once, into the message
    (``msgpack.packb`` with the arrays as extensions made three copies of each: a site answering the largest
    vector held four times its size). A message without such arrays is msgpack's at once; in one with them,
    the containers that hold them are found by a pass over the message's values in Python, which costs a few
    times what msgpack takes on many small values, and the rest is packed by msgpack at once."""
    if not isinstance(message, dict):
        raise WireError(f"a message is a map; got {type(message).__name__}")
    try:  # most messages hold no large array: msgpack alone, at once
        return msgpack.packb(message, default=_default, use_bin_type=True, strict_types=False)
    except _HasArray:
        pass
    out, holders = [], {}
    _holders(message, holders)
    _pack(message, out, msgpack.Packer(), holders)
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
        # msgpack decodes its timestamp extension (-1) itself, never through ext_hook: refused here
        if msgpack.Timestamp in map(type, container.values() if isinstance(container, dict) else container):
            raise WireError("unknown extension type -1 in a message")
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


def peer_name(sock):
    """The common name of the certificate a TLS socket's peer presented: None without one, with more than one
    (which name would it be?), or for a CA's certificate (no party's). The federation's CA signs neither
    kind; a site still takes no such certificate for a party's."""
    from cryptography import x509
    from cryptography.x509.oid import NameOID

    der = sock.getpeercert(binary_form=True) if sock is not None else None
    if not der:
        return None
    cert = x509.load_der_x509_certificate(der)
    try:
        if cert.extensions.get_extension_for_class(x509.BasicConstraints).value.ca:
            return None
    except x509.ExtensionNotFound:
        pass
    names = cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)
    return names[0].value if len(names) == 1 else None

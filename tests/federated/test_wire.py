"""The federation's wire format on its own: what a message may hold, and what decoding it may cost."""

import numpy as np
import pytest

from ensemble_dask.federated.protocol import wire


def _array_of(n, item=b"\x90"):
    """msgpack of a list of ``n`` copies of ``item`` (an empty list by default)."""
    head = b"\xdc" + n.to_bytes(2, "big") if n < 1 << 16 else b"\xdd" + n.to_bytes(4, "big")
    return head + item * n


def test_a_message_round_trips():
    msg = {"session": "ab" * 8, "args": [[np.arange(3)] * 200, 5, {"alpha": np.ones(3)}], "x": None}
    out = wire.decode(wire.encode(msg))
    assert out["args"][1] == 5 and len(out["args"][0]) == 200
    np.testing.assert_array_equal(out["args"][2]["alpha"], np.ones(3))


@pytest.mark.parametrize("shape", [(), (0,), (3,), (2, 0), (2, 3), (1, 1, 1)])
@pytest.mark.parametrize("dtype", sorted(set(wire.DTYPES.values()), key=str))
def test_an_array_keeps_its_shape_and_dtype(shape, dtype):
    """A 0-d array came back of shape (1,) (``np.ascontiguousarray`` gives at least one dimension)."""
    a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    for value in (a, np.array(a, order="F"), a.astype(a.dtype.newbyteorder(">"))):
        out = wire.decode(wire.encode({"a": value}))["a"]
        assert out.shape == a.shape and out.dtype == a.dtype
        np.testing.assert_array_equal(out, a)


def test_one_list_longer_than_the_limit_is_refused_before_it_is_built():
    body = b"\x81\xa1a" + _array_of(wire.MAX_LEN + 1)
    with pytest.raises(wire.WireError, match="max_array_len"):
        wire.decode(body)


def test_many_small_lists_are_refused_past_the_limit_of_entries():
    """One byte of msgpack (an empty list) decodes to a 56-byte Python list: a body of 6 MB of them took a
    site's agent from 72 to 530 MB (a review's attack, F15). Decoding stops once the lists and their
    entries pass ``MAX_ENTRIES``, whatever their nesting."""
    per = wire.MAX_LEN - 1
    outer = wire.MAX_ENTRIES // per + 2
    body = b"\x81\xa1a" + b"\xdc" + outer.to_bytes(2, "big") + _array_of(per) * outer
    with pytest.raises(wire.WireError, match="list and map entries"):
        wire.decode(body)
    maps = (
        b"\x81\xa1a"
        + b"\xdc"
        + outer.to_bytes(2, "big")
        + (b"\xdc" + per.to_bytes(2, "big") + b"\x80" * per) * outer
    )
    with pytest.raises(wire.WireError, match="list and map entries"):
        wire.decode(maps)


def _packb_encoding(message):
    """The former encoding, msgpack.packb with each array an extension: the bytes must not change (a site
    hashes the encoding of each request into its transcript, and every party must agree on it)."""
    import msgpack

    def default(obj):
        if isinstance(obj, np.ndarray):
            code = {"float64": "f8", "int64": "i8", "uint64": "u8", "int32": "i4", "float32": "f4"}[
                obj.dtype.name
            ]
            arr = np.asarray(obj, dtype=wire.DTYPES[code], order="C")
            return msgpack.ExtType(wire.ARRAY_EXT, msgpack.packb([code, list(arr.shape)]) + arr.tobytes())
        if isinstance(obj, np.generic):
            return obj.item()
        if isinstance(obj, tuple):
            return list(obj)
        raise TypeError(obj)

    return msgpack.packb(message, default=default, use_bin_type=True, strict_types=False)


@pytest.mark.parametrize(
    "shape, dtype",
    [
        ((0, 0, 0), "<f8"),  # an extension of 8 bytes (msgpack's fixext 8)
        ((1, 1, 1), "<f8"),  # of 16 (fixext 16)
        ((), "<f8"),  # 0-d
        ((3,), ">i8"),  # big-endian: travels little-endian
        ((30,), "<i4"),  # ext 8
        ((20, 300), "<f4"),  # ext 16
        ((5000, 4), "<u8"),  # ext 32
    ],
)
def test_the_encoding_is_msgpack_s_own_bytes(shape, dtype):
    a = np.arange(int(np.prod(shape)), dtype=dtype).reshape(shape)
    message = {
        "a": a,
        "nested": [1, (2.5, None), {"b": a.T, "c": [a, np.int64(7)]}, b"\x00raw", True, "s" * 40],
        "strided": np.arange(12.0)[::3],
        "many": list(range(wire.MAX_LEN)),  # a list header of 32 bits (and of 16 and 4 above)
        "map": {str(i): i for i in range(20)},
        "runs": [
            *range(40),
            np.zeros(9000),
            "x",
            {"k": np.zeros(9000), "j": (2, a)},
            *range(20),
        ],  # 72 KB each
    }
    assert wire.encode(message) == _packb_encoding(message)
    out = wire.decode(wire.encode(message))
    np.testing.assert_array_equal(out["a"], a)
    np.testing.assert_array_equal(out["nested"][2]["c"][0], a)


def test_an_array_is_encoded_with_one_copy():
    """``msgpack.packb`` with the array as an extension copied its bytes three times (into the extension's
    bytes, msgpack's buffer, then its result): a site's answer to the largest vector (256 MB) peaked at
    about 1 GB. Now one copy, into the message."""
    import tracemalloc

    a = np.arange(1 << 20, dtype=np.int64)  # 8 MB
    tracemalloc.start()
    try:
        body = wire.encode({"result": {"words": a}})
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert len(body) > a.nbytes
    assert peak < 1.2 * a.nbytes, peak / a.nbytes


def test_an_array_decodes_with_one_copy_beyond_msgpack_s_own():
    """msgpack hands the extension's bytes over as one object; decoding made three more copies of them (the
    header's unpacker was fed the whole array, then a slice, then the array's own copy): a 128 MB vector
    took 512 MB above its body, on a site for the coordinator's parameters as on the coordinator for each
    site's answer. Now the extension's bytes and the array: twice the array."""
    import tracemalloc

    a = np.arange(1 << 20, dtype=np.int64)  # 8 MB
    body = wire.encode({"masked": a, "round": 3})
    tracemalloc.start()
    try:
        msg = wire.decode(body)
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    np.testing.assert_array_equal(msg["masked"], a)
    assert msg["masked"].flags.writeable and msg["masked"].flags.owndata
    assert peak < 2.2 * a.nbytes, peak / a.nbytes


@pytest.mark.parametrize(
    "head",
    [
        [np.uint8(0)],  # not [code, shape]
        ["i8", [2] * 5],  # more dimensions than allowed
        ["i8", [2**62, 2**62, 2**62, 2**62]],  # a shape whose size overflows: a wrong byte count
        ["x" * 100, [1]],  # longer than any header: cut short where it is read
    ],
)
def test_an_array_header_that_is_not_one_is_refused(head):
    import msgpack

    packed = msgpack.packb([x.item() if isinstance(x, np.generic) else x for x in head])
    body = msgpack.packb({"a": msgpack.ExtType(wire.ARRAY_EXT, packed + b"\0" * 16)})
    with pytest.raises(wire.WireError, match="header|needs"):
        wire.decode(body)


def test_large_arrays_nested_too_deep_are_refused():
    """The encoder walks the containers that hold large arrays to a bounded depth (the package's messages
    nest a few levels); deeper, a WireError, never a RecursionError."""
    deep = [np.zeros(1 << 14)]
    for _ in range(40):
        deep = [deep]
    with pytest.raises(wire.WireError, match="nested deeper than"):
        wire.encode({"a": deep})
    shallow = [1]
    for _ in range(200):
        shallow = [shallow]
    assert wire.decode(wire.encode({"a": shallow, "b": np.zeros(1 << 14)}))["a"][0][0]


def test_a_message_without_large_arrays_is_msgpack_s_at_once(monkeypatch):
    """The pass over a message's values (in Python: a few times msgpack's own time on many small values) is
    for messages that carry arrays of 64 KiB or more; the others are packed by msgpack in one call."""
    walked = []
    real = wire._holders
    monkeypatch.setattr(wire, "_holders", lambda *a, **k: walked.append(1) or real(*a, **k))
    small = {"request": [list(range(1000)), {"alpha": np.ones(100)}, "x" * 40]}
    assert wire.decode(wire.encode(small))["request"][0] == list(range(1000)) and walked == []
    wire.encode({"result": {"words": np.zeros((2, 1 << 13), dtype=np.uint64)}})  # 128 KB
    assert walked  # (the pass, one call per container it looks into)


def test_msgpack_s_timestamps_and_overflowing_shapes_are_refused():
    """Two ways past the format that a review found: msgpack decodes its timestamp extension (type -1)
    itself, never asking the extension hook, so a message could hold a ``msgpack.Timestamp``; and a shape
    with a dimension of 2**63 or more warned in NumPy's product (an exception where warnings are errors)
    before it was refused (mended in d5e939b: Python's integers)."""
    import warnings

    import msgpack

    for value in ({"t": msgpack.Timestamp(1)}, [1, msgpack.Timestamp(2)], msgpack.Timestamp(3)):
        with pytest.raises(wire.WireError, match="unknown extension type -1"):
            wire.decode(msgpack.packb({"a": value}))
    header = msgpack.packb(["i8", [2**63, 2]])
    body = msgpack.packb({"a": msgpack.ExtType(wire.ARRAY_EXT, header + b"\0" * 16)})
    with warnings.catch_warnings():
        warnings.simplefilter("error")
        with pytest.raises(wire.WireError, match="needs"):
            wire.decode(body)

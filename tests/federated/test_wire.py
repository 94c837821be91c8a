"""The federation's wire format on its own: what a message may hold, and what decoding it may cost."""

import numpy as np
import pytest

from ensemble_dask.federated import wire


def _array_of(n, item=b"\x90"):
    """msgpack of a list of ``n`` copies of ``item`` (an empty list by default)."""
    head = b"\xdc" + n.to_bytes(2, "big") if n < 1 << 16 else b"\xdd" + n.to_bytes(4, "big")
    return head + item * n


def test_a_message_round_trips():
    msg = {"session": "ab" * 8, "args": [[np.arange(3)] * 200, 5, {"alpha": np.ones(3)}], "x": None}
    out = wire.decode(wire.encode(msg))
    assert out["args"][1] == 5 and len(out["args"][0]) == 200
    np.testing.assert_array_equal(out["args"][2]["alpha"], np.ones(3))


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

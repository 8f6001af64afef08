"""Host frame codec: limits, malformed input, interop with the guest's stdlib codec."""

from __future__ import annotations

import collections
import enum
import struct

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.bridge import frames
from codemode.bridge.frames import MAX_DEPTH, FrameDecoder, MalformedFrame, encode_frame
from codemode.heap import trim_heap
from codemode.sandbox.guest import wire

json_like = st.recursive(
    st.none()
    | st.booleans()
    | st.integers(-(2**63), 2**64 - 1)
    | st.floats(allow_nan=False)
    | st.text()
    | st.binary(),
    lambda children: (
        st.lists(children, max_size=5) | st.dictionaries(st.text(max_size=10), children, max_size=5)
    ),
    max_leaves=30,
)


@given(st.dictionaries(st.text(max_size=10), json_like, max_size=5))
def test_guest_encoding_decodes_on_host_and_back(value):
    frame = wire.encode_frame(value)
    assert FrameDecoder().feed(frame) == [value]
    assert wire.decode(encode_frame(value)[4:]) == value


def test_frames_split_across_reads_are_reassembled():
    data = encode_frame({"a": 1}) + encode_frame({"b": "x" * 1000})
    decoder = FrameDecoder()
    got = []
    for i in range(0, len(data), 7):
        got += decoder.feed(data[i : i + 7])
    assert got == [{"a": 1}, {"b": "x" * 1000}]


@pytest.mark.parametrize("keys", [4, 20])
def test_large_strings_at_the_top_of_a_map_round_trip_in_pieces(keys: int) -> None:
    # Encoded on their own (no copy behind the prefix); read into one buffer of the frame's
    # size, whether fed or received into ``pending()``.
    value = {f"k{i}": i for i in range(keys)} | {"value": "é" * 70_000 + "x", "more": "y" * 99_999}
    frame = encode_frame(value)
    assert msgpack.unpackb(frame[4:], raw=False) == value
    assert wire.decode(frame[4:]) == value
    fed = FrameDecoder()
    got = [item for i in range(0, len(frame), 4096) for item in fed.feed(frame[i : i + 4096])]
    assert got == [value]
    received = FrameDecoder()
    got = received.feed(frame[:1000])
    while (pending := received.pending()) is not None:
        count = min(len(pending), 50_000)
        offset = len(frame) - len(pending)
        pending[:count] = frame[offset : offset + count]
        got += received.filled(count)
    assert got == [value]


def test_oversized_frame_is_reported_skipped_and_stream_stays_in_sync():
    decoder = FrameDecoder(max_frame_bytes=100)
    big = encode_frame({"x": "y" * 500})
    out = decoder.feed(big[:50])
    out += decoder.feed(big[50:] + encode_frame({"ok": True}))
    assert isinstance(out[0], MalformedFrame)
    assert "exceeds" in out[0].reason
    assert out[1:] == [{"ok": True}]


def test_huge_length_prefix_does_not_allocate():
    decoder = FrameDecoder()
    out = decoder.feed(struct.pack(">I", 0xFFFFFFFF) + b"abc")
    assert isinstance(out[0], MalformedFrame)
    assert len(decoder._buffer) == 0


@pytest.mark.parametrize(
    ("body", "reason"),
    [
        (b"\xc1", "undecodable"),  # never-used type byte
        (msgpack.packb([1, 2]), "must be a map"),
        (b"\xd4\x01\x02", "undecodable"),  # extension type
        (msgpack.packb({1: "int key"}), "undecodable"),
        (msgpack.packb({"a": 1}) + b"\x00", "undecodable"),  # trailing bytes
    ],
)
def test_malformed_bodies_become_errors_not_exceptions(body, reason):
    (out,) = FrameDecoder().feed(struct.pack(">I", len(body)) + body)
    assert isinstance(out, MalformedFrame)
    assert reason in out.reason


def test_nesting_is_capped():
    value: object = "leaf"
    for _ in range(MAX_DEPTH + 5):
        value = [value]
    (out,) = FrameDecoder().feed(encode_frame({"args": value}))
    assert isinstance(out, MalformedFrame)
    assert "nested" in out.reason


def test_guest_refuses_unsendable_values():
    with pytest.raises(wire.WireError, match="cannot send a object"):
        wire.encode_frame({"x": object()})


def test_a_partial_frame_is_kept_as_a_copy_of_a_reused_buffer() -> None:
    # The runner receives into one buffer it reuses: whatever the decoder keeps of a read
    # must survive that buffer being overwritten by the next.
    first, second = encode_frame({"a": 1}), encode_frame({"b": "x" * 300})
    received = bytearray(first + second[:100])
    decoder = FrameDecoder()
    assert decoder.feed(memoryview(received)) == [{"a": 1}]
    received[:] = bytes(len(received))
    assert decoder.feed(memoryview(bytearray(second[100:]))) == [{"b": "x" * 300}]


@pytest.mark.parametrize(
    ("lists", "innermost", "refused"),
    [(MAX_DEPTH - 1, ["leaf"], False), (MAX_DEPTH, [], False), (MAX_DEPTH, ["leaf"], True)],
)
def test_nesting_cap_is_exact(lists: int, innermost: list[str], refused: bool) -> None:
    # {"args": [[...[leaf]...]]}: the args list is at depth 1, so its leaf is at lists + 1.
    value: list[object] = list(innermost)
    for _ in range(lists - 1):
        value = [value]
    (out,) = FrameDecoder().feed(encode_frame({"args": value}))
    assert isinstance(out, MalformedFrame) is refused


@pytest.mark.parametrize(("maps", "refused"), [(MAX_DEPTH - 1, False), (MAX_DEPTH, True)])
def test_nesting_cap_counts_maps_and_lists_alike(maps: int, refused: bool) -> None:
    # {"args": {"k": ... [{"leaf": 1}] ...}}: maps and lists in turn, among records whose
    # members hold nothing deeper; the innermost map's member is at depth maps + 1.
    value: object = {"leaf": 1}
    for level in range(maps - 1):
        value = [value] if level % 2 else {"k": value, "n": level}
    rows = [{"id": i, "tags": ["a"]} for i in range(50)]
    (out,) = FrameDecoder().feed(encode_frame({"rows": rows, "args": value}))
    assert isinstance(out, MalformedFrame) is refused


def test_a_large_guest_frame_sent_in_runs_is_the_encoded_frame() -> None:
    # Large pieces go out on their own, the small ones between them joined: the bytes on the
    # wire are those of encode_frame, in order, and the host decodes them.
    value = {
        "op": "call",
        "args": {"text": "é" * 700_000, "blob": b"\x01" * 200_000, "n": 7},
        "items": ["a", "b" * 70_000, "c"],
    }
    sent: list[bytes] = []

    class Socket:
        def sendall(self, data: bytes) -> None:
            sent.append(bytes(data))

    wire.send_frame(Socket(), value)
    assert len(sent) > 1
    assert b"".join(sent) == wire.encode_frame(value)
    assert FrameDecoder().feed(b"".join(sent)) == [value]


def receive(decoder: FrameDecoder, frame: bytes, step: int = 50_000) -> list[object]:
    """``frame`` (bytes of frames) fed in part, the rest of a large frame received into
    ``pending()`` as the runner does, what follows fed again."""
    got, at = decoder.feed(frame[:1000]), 1000
    while (pending := decoder.pending()) is not None:
        count = min(len(pending), step)
        pending[:count] = frame[at : at + count]
        at += count
        got += decoder.filled(count)
    return got + decoder.feed(frame[at:])


@pytest.fixture
def no_spare():
    frames.drop_spare_buffer()
    yield
    frames.drop_spare_buffer()


def test_a_large_frame_reuses_the_buffer_of_the_last_one(no_spare: None) -> None:
    first, second = {"value": "a" * 900_000}, {"value": "b" * 300_000, "n": 2}
    decoder = FrameDecoder()
    assert receive(decoder, encode_frame(first)) == [first]
    kept = frames._SPARE.buffer
    assert kept is not None and len(kept) >= 900_000
    # A smaller frame into the larger buffer: read up to its own end, nothing of the last one.
    assert receive(decoder, encode_frame(second) + encode_frame({"after": 1})) == [
        second,
        {"after": 1},
    ]
    assert frames._SPARE.buffer is kept
    assert decoder.feed(b"") == [] and decoder.pending() is None


def test_two_frames_under_way_at_once_never_share_a_buffer(no_spare: None) -> None:
    one, two = FrameDecoder(), FrameDecoder()
    receive(one, encode_frame({"value": "w" * 200_000}))  # leaves a spare
    frame_one, frame_two = (
        encode_frame({"value": "x" * 150_000}),
        encode_frame({"v": "y" * 150_000}),
    )
    one.feed(frame_one[:100])
    two.feed(frame_two[:100])
    assert one._big is not two._big
    assert receive(one, frame_one[100:]) + receive(two, frame_two[100:]) == [
        {"value": "x" * 150_000},
        {"v": "y" * 150_000},
    ]


def test_only_buffers_up_to_the_cap_are_kept_and_a_trim_lets_go(
    no_spare: None, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(frames, "SPARE_MAX", 500_000)
    receive(FrameDecoder(), encode_frame({"value": "z" * 600_000}))
    assert frames._SPARE.buffer is None
    receive(FrameDecoder(), encode_frame({"value": "z" * 400_000}))
    assert frames._SPARE.buffer is not None
    trim_heap()
    assert frames._SPARE.buffer is None


@pytest.fixture
def native_wire():
    """The guest's codec with the C ``msgpack`` in use, as in a sandbox whose site
    directories hold it (``wire.use_native``); the pure-Python one again after."""
    assert wire.use_native()
    try:
        yield wire
    finally:
        wire._native_pack = wire._native_unpack = None


@given(st.dictionaries(st.text(max_size=10), json_like, max_size=5))
def test_the_native_codec_round_trips_as_the_pure_one(value):
    assert wire.use_native()
    try:
        native = wire.encode_frame(value)
        assert FrameDecoder().feed(native) == [value]
        assert wire.decode(encode_frame(value)[4:]) == value
    finally:
        wire._native_pack = wire._native_unpack = None
    assert wire.decode(native[4:]) == value  # the pure decoder reads what the library wrote


class _Colour(enum.IntEnum):
    RED = 1


# What ``_enc`` converts (a tuple, a key that is no str, subclasses, a set) or passes as it is
# (a lone surrogate), and long strings it sends on their own: the host gets the same value.
_CONVERTED = [
    {"args": {"pair": (1, (2, "x"))}},
    {"args": {1: "one", None: [2]}},
    {"args": [{"nested": {2.5: "key"}}]},
    {"args": {"colour": _Colour.RED, "ordered": collections.OrderedDict(a=1)}},
    {"args": {"tags": {"only"}, "raw": bytearray(b"\x00\x01")}},
    {"args": {"text": "lone \ud800 surrogate"}},
    {"args": {"text": "x" * (1 << 17), "blob": b"\x02" * (1 << 16), "n": 3}},
]


@pytest.mark.parametrize("value", _CONVERTED)
def test_the_native_codec_leaves_to_the_pure_one_what_it_would_encode_otherwise(
    native_wire, value
) -> None:
    native = native_wire.encode_frame(value)
    wire._native_pack = None
    try:
        pure = wire.encode_frame(value)
    finally:
        wire.use_native()
    assert native == pure
    sent: list[bytes] = []

    class Socket:
        def sendall(self, data: bytes) -> None:
            sent.append(bytes(data))

    native_wire.send_frame(Socket(), value)
    assert b"".join(sent) == pure


def test_the_native_codec_sends_a_large_body_behind_its_length_without_a_copy(
    native_wire,
) -> None:
    rows = [{"id": i, "name": f"row {i}", "score": i / 3} for i in range(5000)]
    sent: list[bytes] = []

    class Socket:
        def sendall(self, data: bytes) -> None:
            sent.append(bytes(data))

    native_wire.send_frame(Socket(), {"op": "call", "args": {"rows": rows}})
    assert len(sent) == 2 and len(sent[0]) == 4  # the length, then the library's body
    assert FrameDecoder().feed(b"".join(sent)) == [{"op": "call", "args": {"rows": rows}}]


def test_the_native_codec_refuses_what_the_pure_one_refuses(native_wire) -> None:
    with pytest.raises(wire.WireError, match="cannot send a object"):
        native_wire.encode_frame({"x": object()})
    with pytest.raises(wire.WireError, match="64-bit range"):
        native_wire.encode_frame({"x": 1 << 70})
    for body in (b"\xc1", b"\xd4\x01\x02", msgpack.packb({"a": 1}) + b"\x00", b"\x81\xa1"):
        with pytest.raises(wire.WireError):
            native_wire.decode(body)
    assert native_wire.decode(msgpack.packb({1: "int key"})) == {1: "int key"}


def test_a_msgpack_that_does_not_round_trip_the_bridge_is_not_used(monkeypatch) -> None:
    # A site directory with another release (one without these options) leaves the guest on
    # its own codec rather than failing every frame.
    frame = encode_frame({"a": [1]})

    def old_packb(obj, **options):
        if "datetime" in options:
            raise TypeError("packb() got an unexpected keyword argument 'datetime'")
        return msgpack.packb(obj)

    monkeypatch.setattr(msgpack, "packb", old_packb)
    try:
        assert wire.use_native() is False
        assert wire._native_pack is None and wire._native_unpack is None
        assert wire.decode(frame[4:]) == {"a": [1]}
    finally:
        wire._native_pack = wire._native_unpack = None

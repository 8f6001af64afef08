"""Host frame codec: limits, malformed input, interop with the guest's stdlib codec."""

from __future__ import annotations

import struct

import msgpack
import pytest
from hypothesis import given
from hypothesis import strategies as st

from codemode.bridge.frames import MAX_DEPTH, FrameDecoder, MalformedFrame, encode_frame
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

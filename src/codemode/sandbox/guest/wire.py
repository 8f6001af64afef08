"""Bridge frames for the guest: a 4-byte big-endian length, then a MessagePack body.

Standard library only: this file runs inside the sandbox. It implements the MessagePack subset
the bridge uses (nil, bool, int, float, str, bin, array, map). The host decodes with the C
``msgpack`` library and strict limits; the guest only ever decodes what the host sent.

Where the sandbox's site directories hold that C library too (they hold codemode's own
dependencies unless ``[sandbox] python_paths`` says otherwise), ``use_native`` makes it encode
and decode: a tool call's request and its reply cost the guest 3.4 us instead of 6.7, 10,000
records sent and received 23 ms instead of 122. This code stays for what the library would
encode otherwise (``_plain``), and where there is none or one that does not round-trip a
sample frame.
"""

import struct

_pack_len = struct.Struct(">I").pack
_unpack_len = struct.Struct(">I").unpack_from
_F64 = struct.Struct(">d")
_B = struct.Struct(">B")
_H = struct.Struct(">H")
_I = struct.Struct(">I")
_Q = struct.Struct(">Q")
_b = struct.Struct(">b")
_h = struct.Struct(">h")
_i = struct.Struct(">i")
_q = struct.Struct(">q")


class WireError(Exception):
    pass


_FIXINT = [bytes((i,)) for i in range(128)]
_FIXMAP = [bytes((0x80 | i,)) for i in range(16)]
# Short strings as encoded before (names, keys): the same few recur in every call.
_SHORT = {}
_SHORT_KEPT = 512


def _enc(obj, out):
    t = type(obj)
    if t is str:
        if len(obj) < 32:
            done = _SHORT.get(obj)
            if done is not None:
                out.append(done)
                return
        if len(obj) >= _SEND_IN_RUNS and obj.isascii():
            # Left a str (its length is its size in bytes): send_frame encodes it a slice at
            # a time as it goes out, so it is never copied whole.
            out.append(b"\xdb" + _I.pack(len(obj)))
            out.append(obj)
            return
        data = obj.encode("utf-8", "surrogatepass")
        n = len(data)
        if n < 32:
            data = bytes((0xA0 | n,)) + data
            if len(_SHORT) < _SHORT_KEPT:
                _SHORT[obj] = data
        elif n < 0x100:
            out.append(b"\xd9" + _B.pack(n))
        elif n < 0x10000:
            out.append(b"\xda" + _H.pack(n))
        else:
            out.append(b"\xdb" + _I.pack(n))
        out.append(data)
    elif t is int:
        if 0 <= obj < 128:
            out.append(_FIXINT[obj])
        elif -32 <= obj < 0:
            out.append(bytes((obj & 0xFF,)))
        elif 0 <= obj < (1 << 64):
            out.append(b"\xcf" + _Q.pack(obj))
        elif -(1 << 63) <= obj < 0:
            out.append(b"\xd3" + _q.pack(obj))
        else:
            raise WireError("integer out of the 64-bit range; send it as a string")
    elif t is dict:
        n = len(obj)
        if n < 16:
            out.append(_FIXMAP[n])
        elif n < 0x10000:
            out.append(b"\xde" + _H.pack(n))
        else:
            out.append(b"\xdf" + _I.pack(n))
        for key, value in obj.items():
            if type(key) is not str:
                key = str(key)
            _enc(key, out)
            _enc(value, out)
    elif t is list or t is tuple:
        n = len(obj)
        if n < 16:
            out.append(bytes((0x90 | n,)))
        elif n < 0x10000:
            out.append(b"\xdc" + _H.pack(n))
        else:
            out.append(b"\xdd" + _I.pack(n))
        for item in obj:
            _enc(item, out)
    elif obj is None:
        out.append(b"\xc0")
    elif obj is True:
        out.append(b"\xc3")
    elif obj is False:
        out.append(b"\xc2")
    elif t is float:
        out.append(b"\xcb" + _F64.pack(obj))
    elif t is bytes or t is bytearray or t is memoryview:
        data = bytes(obj)
        n = len(data)
        if n < 0x100:
            out.append(b"\xc4" + _B.pack(n))
        elif n < 0x10000:
            out.append(b"\xc5" + _H.pack(n))
        else:
            out.append(b"\xc6" + _I.pack(n))
        out.append(data)
    elif isinstance(obj, bool):
        _enc(bool(obj), out)
    elif isinstance(obj, int):
        _enc(int(obj), out)
    elif isinstance(obj, float):
        _enc(float(obj), out)
    elif isinstance(obj, str):
        _enc(str(obj), out)
    elif isinstance(obj, dict):
        _enc(dict(obj), out)
    elif isinstance(obj, (list, tuple, set, frozenset)):
        _enc(list(obj), out)
    else:
        raise WireError(
            f"cannot send a {t.__name__} to a tool; use str, int, float, bool, None, "
            "bytes, list or dict"
        )


def use_native():
    """Encode and decode with the C ``msgpack`` where it can be imported (call this once the
    site directories are on ``sys.path``). Whether it is in use."""
    global _native_pack, _native_unpack
    try:
        import msgpack
    except Exception:  # none, or one this interpreter cannot load
        return False
    if getattr(msgpack.Packer, "__module__", "") != "msgpack._cmsgpack":
        return False  # its pure-Python fallback: slower than this module
    packb, unpackb, failed = msgpack.packb, msgpack.unpackb, msgpack.UnpackException

    def pack(obj):
        return packb(obj, use_bin_type=True, strict_types=True, datetime=False, default=_listed)

    def unpack(data):
        try:
            return unpackb(
                data,
                raw=False,
                strict_map_key=False,
                unicode_errors="surrogatepass",
                ext_hook=_no_ext,
            )
        except (ValueError, failed) as error:
            raise WireError(f"undecodable frame: {error}") from None

    # A site directory may hold another release than the host's (``python_paths``): one
    # that does not take these options, or encodes otherwise, is not used. (``encode_frame``
    # is still this module's own codec here.)
    sample = {"op": "call", "id": 1, "args": {"n": -(1 << 40), "x": 0.5, "b": b"\x00", "l": [None]}}
    try:
        if unpack(pack(sample)) != sample or unpack(encode_frame(sample)[4:]) != sample:
            return False
    except Exception:
        return False
    _native_pack, _native_unpack = pack, unpack
    return True


_native_pack = None
_native_unpack = None


def _listed(obj):
    """``msgpack``'s ``default``: a tuple as the list ``_enc`` makes of it; anything else not
    of a type it encodes exactly is left to ``_enc`` (``_native_body``)."""
    if type(obj) is tuple:
        return list(obj)
    raise TypeError(type(obj).__name__)


def _no_ext(code, data):
    raise WireError(f"unsupported MessagePack extension type {code}")


def _native_body(obj):
    """``obj``'s MessagePack body from the C library, or None where ``_enc`` must make it."""
    if _native_pack is None:
        return None
    try:
        if not _plain(obj):
            return None
        # TypeError: a type it does not encode exactly (a subclass: _enc converts it), a
        # ValueError a string that is not UTF-8 (a lone surrogate: _enc passes it) or one
        # nested too deep, an OverflowError an integer beyond 64 bits (_enc's error names it).
        return _native_pack(obj)
    except (TypeError, ValueError, OverflowError, RecursionError):
        return None


def _plain(obj):
    """Whether the C library encodes ``obj`` as ``_enc`` does: every map's keys are str
    (``_enc`` makes any other key a str) and no str or bytes is so long that ``send_frame``
    sends it on its own (the library would copy it into its body)."""
    t = type(obj)
    if t is dict:
        for key in obj:
            if type(key) is not str:
                return False
        members = obj.values()
    elif t is list or t is tuple:
        members = obj
    else:
        return not ((t is str or t is bytes) and len(obj) >= _OWN_SEND)
    for value in members:  # the leaves here, not in a call each: records hold thousands
        t = type(value)
        if t is str or t is bytes:
            if len(value) >= _OWN_SEND:
                return False
        elif (t is dict or t is list or t is tuple) and not _plain(value):
            return False
    return True


def encode_frame(obj):
    body = _native_body(obj)
    if body is not None:
        return _pack_len(len(body)) + body
    parts = [b""]
    _enc(obj, parts)
    size = sum(map(len, parts))
    parts[0] = _pack_len(size)
    if size >= _SEND_IN_RUNS:  # it may hold long ASCII strings left as str
        parts = [part.encode("ascii") if type(part) is str else part for part in parts]
    return b"".join(parts)


# A frame from this size on is sent in runs: each large piece (a long string's or bytes'
# body) as it is, the small ones between joined, so the body is never copied into one.
_SEND_IN_RUNS = 1 << 20
_OWN_SEND = 1 << 16
# A long ASCII string goes out in slices this long: small enough to come from the heap's
# free memory each time, not from fresh pages.
_SLICE = 1 << 16


def send_frame(sock, obj):
    body = _native_body(obj)
    if body is not None:
        if len(body) < _OWN_SEND:
            sock.sendall(_pack_len(len(body)) + body)
        else:  # not copied behind its length
            sock.sendall(_pack_len(len(body)))
            sock.sendall(body)
        return
    parts = [b""]
    _enc(obj, parts)
    size = sum(map(len, parts))
    parts[0] = _pack_len(size)
    if size < _SEND_IN_RUNS:
        sock.sendall(b"".join(parts))
        return
    run = []
    for piece in parts:
        if len(piece) < _OWN_SEND:
            run.append(piece)
            continue
        if run:
            sock.sendall(b"".join(run))
            run = []
        if type(piece) is str:
            for start in range(0, len(piece), _SLICE):
                sock.sendall(piece[start : start + _SLICE].encode("ascii"))
        else:
            sock.sendall(piece)
    if run:
        sock.sendall(b"".join(run))


def decode(data):
    if _native_unpack is not None:
        return _native_unpack(data)
    value, end = _dec(memoryview(data), 0)
    if end != len(data):
        raise WireError("trailing bytes in frame")
    return value


def _dec(buf, pos):
    b = buf[pos]
    pos += 1
    if b < 0x80:
        return b, pos
    if 0xA0 <= b <= 0xBF:
        end = pos + (b & 0x1F)
        return str(buf[pos:end], "utf-8", "surrogatepass"), end
    if b <= 0x8F:
        return _map(buf, pos, b & 0x0F)
    if b <= 0x9F:
        return _arr(buf, pos, b & 0x0F)
    if b >= 0xE0:
        return b - 0x100, pos
    if b == 0xC0:
        return None, pos
    if b == 0xC2:
        return False, pos
    if b == 0xC3:
        return True, pos
    if b in (0xD9, 0xDA, 0xDB):
        size = {0xD9: _B, 0xDA: _H, 0xDB: _I}[b]
        (n,) = size.unpack_from(buf, pos)
        pos += size.size
        return str(buf[pos : pos + n], "utf-8", "surrogatepass"), pos + n
    if b in (0xC4, 0xC5, 0xC6):
        size = {0xC4: _B, 0xC5: _H, 0xC6: _I}[b]
        (n,) = size.unpack_from(buf, pos)
        pos += size.size
        return bytes(buf[pos : pos + n]), pos + n
    fixed = _FIXED.get(b)
    if fixed is not None:
        (value,) = fixed.unpack_from(buf, pos)
        return value, pos + fixed.size
    if b in (0xDC, 0xDD):
        size = _H if b == 0xDC else _I
        (n,) = size.unpack_from(buf, pos)
        return _arr(buf, pos + size.size, n)
    if b in (0xDE, 0xDF):
        size = _H if b == 0xDE else _I
        (n,) = size.unpack_from(buf, pos)
        return _map(buf, pos + size.size, n)
    raise WireError(f"unsupported MessagePack type byte 0x{b:02x}")


_FIXED = {
    0xCA: struct.Struct(">f"),
    0xCB: _F64,
    0xCC: _B,
    0xCD: _H,
    0xCE: _I,
    0xCF: _Q,
    0xD0: _b,
    0xD1: _h,
    0xD2: _i,
    0xD3: _q,
}


def _arr(buf, pos, n):
    items = []
    append = items.append
    for _ in range(n):
        item, pos = _dec(buf, pos)
        append(item)
    return items, pos


def _map(buf, pos, n):
    # Short string keys and small int or short string values, the most of every reply,
    # decoded here rather than in a call of _dec each.
    result = {}
    for _ in range(n):
        b = buf[pos]
        if 0xA0 <= b <= 0xBF:
            pos += 1
            end = pos + (b & 0x1F)
            key, pos = str(buf[pos:end], "utf-8", "surrogatepass"), end
        else:
            key, pos = _dec(buf, pos)
        b = buf[pos]
        if b < 0x80:
            result[key] = b
            pos += 1
        elif 0xA0 <= b <= 0xBF:
            pos += 1
            end = pos + (b & 0x1F)
            result[key], pos = str(buf[pos:end], "utf-8", "surrogatepass"), end
        else:
            result[key], pos = _dec(buf, pos)
    return result, pos


def read_exact(sock, n):
    buf = bytearray(n)
    view = memoryview(buf)
    got = 0
    while got < n:
        k = sock.recv_into(view[got:], n - got)
        if k == 0:
            raise EOFError("bridge closed")
        got += k
    return buf


def read_frame(sock):
    (n,) = _unpack_len(read_exact(sock, 4))
    return decode(read_exact(sock, n))

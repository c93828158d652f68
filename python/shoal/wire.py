"""The frames of Shoal's worker wire protocol (docs/protocol.md): a 12-byte little-endian header
(length, version, kind, flags, seq) and a MessagePack body. Typed arrays travel as extension
0x74 (an element code, then the raw little-endian elements) and arrive as numpy arrays, viewing
the frame's bytes without a copy, when numpy is installed (``array.array`` otherwise)."""

import array
import struct
import sys

import msgpack

try:  # numpy is optional: tensors are numpy arrays when it is there
    import numpy
except ImportError:  # pragma: no cover - exercised where numpy is missing
    numpy = None

VERSION = 1
HEADER = struct.Struct("<IBBHI")
MAX_FRAME_BYTES = 2**30
FLAG_ERROR = 0x0001
TYPED_ARRAY = 0x74

KINDS = {
    "boot": 0x01, "batch": 0x02, "load": 0x03, "unload": 0x04, "stop": 0x05, "flow": 0x06,
    "ready": 0x81, "result": 0x82, "log": 0x83, "metrics": 0x84, "fatal": 0x85,
    "loaded": 0x86, "loadFailed": 0x87, "stopping": 0x88, "stream": 0x89,
}
KIND_NAMES = {code: name for name, code in KINDS.items()}

# Element codes of extension 0x74: numpy dtype, array.array typecode.
_ELEMENTS = {
    0: ("<i1", "b"), 1: ("<u1", "B"), 2: ("<u1", "B"), 3: ("<i2", "h"), 4: ("<u2", "H"),
    5: ("<i4", "i"), 6: ("<u4", "I"), 7: ("<f4", "f"), 8: ("<f8", "d"), 9: ("<i8", "q"), 10: ("<u8", "Q"),
}
_CODE_OF_DTYPE = {"int8": 0, "uint8": 1, "int16": 3, "uint16": 4, "int32": 5, "uint32": 6,
                  "float32": 7, "float64": 8, "int64": 9, "uint64": 10}
_CODE_OF_TYPECODE = {"b": 0, "B": 1, "h": 3, "H": 4, "i": 5, "I": 6, "f": 7, "d": 8, "q": 9, "Q": 10}


class ProtocolError(Exception):
    """A frame that breaks the protocol: the connection cannot be trusted after it."""


class TypedArray:
    """A typed array whose element code the SDK cannot map (Float16, say): its code and raw bytes."""

    def __init__(self, code: int, data: bytes):
        self.code = code
        self.data = data


def _default(value):
    if numpy is not None and isinstance(value, numpy.ndarray):
        code = _CODE_OF_DTYPE.get(value.dtype.name)
        if code is None:
            raise TypeError(f"a numpy array of {value.dtype} cannot travel; use one of {', '.join(_CODE_OF_DTYPE)}")
        data = numpy.ascontiguousarray(value, dtype=value.dtype.newbyteorder("<")).tobytes()
        return msgpack.ExtType(TYPED_ARRAY, bytes([code]) + data)
    if numpy is not None and isinstance(value, numpy.generic):
        return value.item()
    if isinstance(value, array.array):
        code = _CODE_OF_TYPECODE.get(value.typecode)
        if code is None:
            raise TypeError(f"an array.array of typecode {value.typecode!r} cannot travel")
        if sys.byteorder != "little":  # pragma: no cover
            value = array.array(value.typecode, value)
            value.byteswap()
        return msgpack.ExtType(TYPED_ARRAY, bytes([code]) + value.tobytes())
    if isinstance(value, TypedArray):
        return msgpack.ExtType(TYPED_ARRAY, bytes([value.code]) + value.data)
    if isinstance(value, (bytearray, memoryview)):
        return bytes(value)
    if isinstance(value, tuple):
        return list(value)
    raise TypeError(f"a {type(value).__name__} cannot travel between stages")


def _ext_hook(code: int, data: bytes):
    if code == TYPED_ARRAY:
        if not data:
            raise ProtocolError("a typed array without its element code")
        element = data[0]
        if element in (16, 17):  # ArrayBuffer, DataView: bytes
            return data[1:]
        kind = _ELEMENTS.get(element)
        if kind is None:
            return TypedArray(element, data[1:])
        if numpy is not None:
            return numpy.frombuffer(data, dtype=kind[0], offset=1)
        out = array.array(kind[1])
        out.frombytes(data[1:])
        if sys.byteorder != "little":  # pragma: no cover
            out.byteswap()
        return out
    if code == 0:  # JavaScript's undefined
        return None
    return msgpack.ExtType(code, data)


def pack(value) -> bytes:
    """A value in the protocol's MessagePack: bytes as bin, numpy and typed arrays as extension 0x74."""
    return msgpack.packb(value, use_bin_type=True, default=_default, datetime=True)


def unpack(data) -> object:
    """The value of a MessagePack body: bin as bytes, extension 0x74 as numpy arrays (or array.array)."""
    return msgpack.unpackb(data, raw=False, ext_hook=_ext_hook, timestamp=3, strict_map_key=False)


def encode_frame(kind: str, body: dict, seq: int = 0, flags: int = 0) -> bytes:
    """One frame of ``kind`` with ``body`` (every field but kind and seq)."""
    data = pack(body)
    length = HEADER.size + len(data)
    if length > MAX_FRAME_BYTES:
        raise ValueError(f"a {kind} frame of {length} bytes is over the limit of {MAX_FRAME_BYTES}")
    return HEADER.pack(length, VERSION, KINDS[kind], flags, seq & 0xFFFFFFFF) + data


def decode_frame(frame: bytes):
    """``(kind, seq, flags, body)`` of one whole frame; raises ProtocolError if it breaks the protocol."""
    if len(frame) < HEADER.size:
        raise ProtocolError(f"a frame of {len(frame)} bytes is shorter than its header")
    length, version, code, flags, seq = HEADER.unpack_from(frame)
    if length != len(frame):
        raise ProtocolError(f"the frame's length field says {length} bytes, but it has {len(frame)}")
    if version != VERSION:
        raise ProtocolError(f"protocol version {version}, not {VERSION}")
    kind = KIND_NAMES.get(code)
    if kind is None:
        raise ProtocolError(f"unknown frame kind 0x{code:02x}")
    try:
        body = unpack(memoryview(frame)[HEADER.size:])
    except ProtocolError:
        raise
    except Exception as err:
        raise ProtocolError(f"a {kind} frame whose body is not MessagePack: {err}") from err
    if not isinstance(body, dict):
        raise ProtocolError(f"a {kind} frame whose body is not a map")
    return kind, seq, flags, body


class FrameReader:
    """Cuts a byte stream into frames: a frame may come in many reads, and a read hold many frames."""

    def __init__(self):
        self._buffer = bytearray()

    def push(self, chunk: bytes):
        """The frames that ``chunk`` completes, decoded."""
        self._buffer += chunk
        frames = []
        while len(self._buffer) >= 4:
            (length,) = struct.unpack_from("<I", self._buffer)
            if length < HEADER.size or length > MAX_FRAME_BYTES:
                raise ProtocolError(f"a frame length of {length} bytes")
            if len(self._buffer) < length:
                break
            frame = bytes(self._buffer[:length])
            del self._buffer[:length]
            frames.append(decode_frame(frame))
        return frames

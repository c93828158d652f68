"""The SDK's frames against the shared test vectors (test/vectors/protocol.json)."""

import json
from pathlib import Path

import numpy
import pytest

from shoal import wire

VECTORS = json.loads((Path(__file__).resolve().parents[2] / "test" / "vectors" / "protocol.json").read_text())["vectors"]
WORKER_KINDS = {name for name, code in wire.KINDS.items() if code >= 0x80}


def expected(value):
    # The vectors' JSON markers as the values the SDK gives.
    if isinstance(value, dict):
        if set(value) == {"$bytes"}:
            return bytes.fromhex(value["$bytes"])
        if set(value) == {"$float32"}:
            return numpy.array(value["$float32"], dtype="<f4")
        return {k: expected(v) for k, v in value.items()}
    if isinstance(value, list):
        return [expected(v) for v in value]
    return value


def comparable(value):
    if isinstance(value, numpy.ndarray):
        return ("float32" if value.dtype == numpy.float32 else str(value.dtype), value.tolist())
    if isinstance(value, dict):
        return {k: comparable(v) for k, v in value.items()}
    if isinstance(value, list):
        return [comparable(v) for v in value]
    return value


def body_of(message):
    return {k: expected(v) for k, v in message.items() if k not in ("kind", "seq")}


@pytest.mark.parametrize("vector", VECTORS, ids=[v["name"] for v in VECTORS])
def test_decodes_every_vector(vector):
    kind, seq, flags, body = wire.decode_frame(bytes.fromhex(vector["hex"]))
    assert kind == vector["message"]["kind"]
    assert seq == vector["header"]["seq"]
    assert flags == vector["header"]["flags"]
    assert comparable(body) == comparable(body_of(vector["message"]))


@pytest.mark.parametrize("vector", [v for v in VECTORS if v["message"]["kind"] in WORKER_KINDS], ids=lambda v: v["name"])
def test_writes_every_worker_vector_byte_for_byte(vector):
    message = vector["message"]
    frame = wire.encode_frame(message["kind"], body_of(message), message.get("seq", 0), vector["header"]["flags"])
    assert frame.hex() == vector["hex"]


def test_typed_arrays_travel_both_ways():
    values = {"f32": numpy.arange(3, dtype=numpy.float32), "i64": numpy.array([-1, 2**40], dtype=numpy.int64), "u8": numpy.array([1, 2], dtype=numpy.uint8), "empty": numpy.zeros(0, dtype=numpy.float64)}
    back = wire.unpack(wire.pack(values))
    for name, array in values.items():
        assert back[name].dtype == array.dtype and back[name].tolist() == array.tolist()


def test_bytes_stay_bin_and_unknown_values_are_refused():
    assert wire.unpack(wire.pack({"b": b"\x00\x01"})) == {"b": b"\x00\x01"}
    with pytest.raises(TypeError):
        wire.pack({"x": object()})


def test_frames_split_and_joined():
    frames = b"".join(wire.encode_frame("log", {"level": "info", "msg": str(i)}) for i in range(3))
    reader = wire.FrameReader()
    got = []
    for i in range(len(frames)):
        got += reader.push(frames[i : i + 1])
    assert [body["msg"] for _, _, _, body in got] == ["0", "1", "2"]
    with pytest.raises(wire.ProtocolError):
        wire.FrameReader().push(b"\x05\x00\x00\x00" + b"\x00" * 8)

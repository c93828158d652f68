"""The V2 codec of the Python workers of the shared pool: requests with JSON and binary inputs
(REST bodies and gRPC pieces), raw bytes as read-only numpy views, and responses in JSON or binary."""

import json
import struct

import numpy
import pytest

from shoal import v2
from shoal.errors import BadRequestError


def body(header, *blobs):
    text = json.dumps(header).encode()
    return text + b"".join(blobs), {"headers": {v2.HEADER_LENGTH: str(len(text))}}


def test_a_rest_body_with_binary_data_after_its_json_header():
    x = numpy.arange(6, dtype="<f4").tobytes()
    payload, meta = body({"inputs": [
        {"name": "x", "datatype": "FP32", "shape": [2, 3], "parameters": {"binary_data_size": len(x)}},
        {"name": "n", "datatype": "INT32", "shape": [1], "data": [7]},
    ]}, x)
    header, raws = v2.read_request(payload, meta)
    assert [t["name"] for t in header["inputs"]] == ["x", "n"]
    assert raws[1] is None
    array = v2.unpack_raw("FP32", [2, 3], raws[0], as_array=True)
    assert array.tolist() == [[0, 1, 2], [3, 4, 5]]
    assert not array.flags.writeable, "a view of the request's bytes, not a copy"


def test_grpc_pieces_and_bytes_elements():
    words = b"".join(struct.pack("<I", len(w)) + w for w in [b"a", b"", b"shoal"])
    header = json.dumps({"inputs": [{"name": "t", "datatype": "BYTES", "shape": [3], "parameters": {"binary_data_size": len(words)}}]}).encode()
    parsed, raws = v2.read_request({"header": header, "parts": [words]}, {})
    assert v2.unpack_raw("BYTES", [3], raws[0], as_array=True) == [b"a", b"", b"shoal"]
    assert parsed["inputs"][0]["name"] == "t"


@pytest.mark.parametrize("payload,message", [
    (b"not json", "the request is not JSON"),
    (b'{"inputs": 1}', "a list of 'inputs'"),
])
def test_a_body_that_is_not_a_v2_request(payload, message):
    with pytest.raises(BadRequestError, match=message):
        v2.read_request(payload, {})


def test_binary_data_that_does_not_fit_the_body_or_the_shape():
    payload, meta = body({"inputs": [{"name": "x", "datatype": "FP32", "shape": [2], "parameters": {"binary_data_size": 8}}]}, b"1234")
    with pytest.raises(BadRequestError, match="past the end of the body"):
        v2.read_request(payload, meta)
    with pytest.raises(BadRequestError, match="takes 8 bytes, not 4"):
        v2.unpack_raw("FP32", [2], memoryview(b"1234"), as_array=True)


def test_responses_in_json_or_binary_as_the_request_asks():
    response = {"model_name": "m", "outputs": [{"name": "y", "datatype": "FP32", "shape": [2], "data": numpy.array([1.5, 2], dtype="<f4")}]}
    text, headers = v2.write_response(response, {"inputs": []})
    assert headers == {}
    assert json.loads(text)["outputs"][0]["data"] == [1.5, 2.0]
    data, headers = v2.write_response(response, {"inputs": [], "parameters": {"binary_data_output": True}})
    cut = int(headers[v2.HEADER_LENGTH])
    assert json.loads(data[:cut])["outputs"][0]["parameters"] == {"binary_data_size": 8}
    assert numpy.frombuffer(data[cut:], dtype="<f4").tolist() == [1.5, 2.0]
    # An output's own binary_data wins over the request's choice.
    text, headers = v2.write_response(response, {"inputs": [], "parameters": {"binary_data_output": True}, "outputs": [{"name": "y", "parameters": {"binary_data": False}}]})
    assert headers == {}


def test_datatypes_of_numpy_arrays():
    assert [v2.datatype_of(numpy.zeros(1, dtype=d)) for d in ["<f4", "<i8", "?", "<u1"]] == ["FP32", "INT64", "BOOL", "UINT8"]
    assert v2.datatype_of(numpy.array(["a"])) == "BYTES"

"""The V2 inference protocol as a model of Shoal's shared pool reads and writes it in a Python
worker: a request's JSON header and the raw bytes of its binary inputs (Triton's binary data
extension over REST; every input of a gRPC request), and a response in JSON or with binary
outputs, as the request asks. Raw bytes become numpy arrays without a copy where numpy is installed."""

import json
import struct
from typing import Any, Dict, List, Optional, Tuple

from .errors import BadRequestError, EncodingError

try:
    import numpy
except ImportError:  # pragma: no cover - exercised where numpy is missing
    numpy = None

HEADER_LENGTH = "inference-header-content-length"

#: numpy dtype of each V2 datatype (BYTES has none: its elements are bytes).
DTYPES = {
    "BOOL": "?", "UINT8": "<u1", "UINT16": "<u2", "UINT32": "<u4", "UINT64": "<u8",
    "INT8": "<i1", "INT16": "<i2", "INT32": "<i4", "INT64": "<i8",
    "FP16": "<f2", "FP32": "<f4", "FP64": "<f8",
}
_DATATYPE_OF_KIND = {"b": "BOOL", "u": "UINT", "i": "INT", "f": "FP"}
_STRUCT = {"BOOL": "?", "UINT8": "B", "UINT16": "H", "UINT32": "I", "UINT64": "Q", "INT8": "b", "INT16": "h",
           "INT32": "i", "INT64": "q", "FP16": "e", "FP32": "f", "FP64": "d"}


def as_bytes(value: Any) -> memoryview:
    """Bytes that came over the wire (bin, or a Uint8Array as a numpy array), without a copy."""
    if value is None:
        return memoryview(b"")
    if isinstance(value, (bytes, bytearray, memoryview)):
        return memoryview(value)
    if numpy is not None and isinstance(value, numpy.ndarray):
        return memoryview(value.view(numpy.uint8))
    raise BadRequestError(f"a request body of type {type(value).__name__}")


def read_request(payload: Any, meta: Dict[str, Any]) -> Tuple[Dict[str, Any], List[Optional[memoryview]]]:
    """A V2 request's JSON header and, per input, the raw bytes of its binary data (None for an
    input given as JSON ``data``). ``payload`` is the REST body (JSON, then binary data after
    ``Inference-Header-Content-Length`` bytes) or a gRPC request's pieces (``header``, ``parts``)."""
    if isinstance(payload, dict):
        header_bytes = as_bytes(payload.get("header"))
        parts = [as_bytes(p) for p in payload.get("parts") or []]
        body = None
    else:
        body = as_bytes(payload)
        length = (meta.get("headers") or {}).get(HEADER_LENGTH)
        try:
            cut = len(body) if length is None else int(length)
        except ValueError:
            raise BadRequestError(f"{HEADER_LENGTH} must be a whole number, not '{length}'")
        if not 0 <= cut <= len(body):
            raise BadRequestError(f"{HEADER_LENGTH} is {cut}, but the body has {len(body)} bytes")
        header_bytes, parts = body[:cut], []
    try:
        header = json.loads(bytes(header_bytes))
    except (ValueError, UnicodeDecodeError) as err:
        raise BadRequestError(f"the request is not JSON: {err}")
    if not isinstance(header, dict) or not isinstance(header.get("inputs"), list):
        raise BadRequestError("a V2 request is a JSON object with a list of 'inputs'")
    raws: List[Optional[memoryview]] = []
    at = len(header_bytes)
    for i, tensor in enumerate(header["inputs"]):
        if not isinstance(tensor, dict):
            raise BadRequestError(f"input {i} is not an object")
        size = (tensor.get("parameters") or {}).get("binary_data_size")
        if size is None:
            raws.append(None)
        elif body is None:
            if i >= len(parts):
                raise BadRequestError(f"input '{tensor.get('name')}' has no raw contents")
            raws.append(parts[i])
        else:
            if not isinstance(size, int) or size < 0 or at + size > len(body):
                raise BadRequestError(f"input '{tensor.get('name')}' says {size} bytes of binary data, past the end of the body")
            raws.append(body[at : at + size])
            at += size
    return header, raws


def unpack_raw(datatype: str, shape: List[int], raw: memoryview, as_array: bool) -> Any:
    """The elements of one tensor's raw bytes: a numpy array viewing them (``as_array``, numpy
    installed) or a flat list; BYTES elements (each after its 4-byte length) as a list of bytes."""
    if datatype == "BYTES":
        out, at = [], 0
        while at < len(raw):
            if at + 4 > len(raw):
                raise BadRequestError("BYTES data cut short in an element's length")
            (size,) = struct.unpack_from("<I", raw, at)
            if at + 4 + size > len(raw):
                raise BadRequestError("BYTES data cut short in an element")
            out.append(bytes(raw[at + 4 : at + 4 + size]))
            at += 4 + size
        return out
    if datatype not in DTYPES:
        raise BadRequestError(f"unknown datatype '{datatype}'")
    count = 1
    for d in shape:
        count *= d
    width = struct.calcsize(_STRUCT[datatype])
    if count * width != len(raw):
        raise BadRequestError(f"a {datatype} tensor of shape {shape} takes {count * width} bytes, not {len(raw)}")
    if as_array and numpy is not None:
        return numpy.frombuffer(raw, dtype=DTYPES[datatype]).reshape(shape)
    return list(struct.unpack(f"<{count}{_STRUCT[datatype]}", raw))


def pack_raw(datatype: str, data: Any) -> bytes:
    """One tensor's elements (flat or nested lists, or a numpy array) as the raw bytes of the binary data extension."""
    if datatype == "BYTES":
        out = bytearray()
        for element in flat(data):
            element = element.encode() if isinstance(element, str) else bytes(element)
            out += struct.pack("<I", len(element)) + element
        return bytes(out)
    if datatype not in DTYPES:
        raise EncodingError(f"unknown datatype '{datatype}'")
    if numpy is not None:
        return numpy.ascontiguousarray(numpy.asarray(data, dtype=DTYPES[datatype])).tobytes()
    elements = list(flat(data))
    return struct.pack(f"<{len(elements)}{_STRUCT[datatype]}", *elements)


def datatype_of(array: Any) -> str:
    """The V2 datatype of a numpy array."""
    kind = array.dtype.kind
    if kind in ("U", "S", "O"):
        return "BYTES"
    if kind == "b":
        return "BOOL"
    if kind not in _DATATYPE_OF_KIND:
        raise EncodingError(f"a numpy array of {array.dtype} has no V2 datatype")
    return f"{_DATATYPE_OF_KIND[kind]}{array.dtype.itemsize * 8}"


def binary_outputs(header: Dict[str, Any]) -> Tuple[bool, Dict[str, bool]]:
    """Which outputs a request asks as binary data: ``binary_data_output`` for all, and each
    requested output's own ``binary_data``."""
    every = (header.get("parameters") or {}).get("binary_data_output") is True
    own = {}
    for output in header.get("outputs") or []:
        if isinstance(output, dict) and isinstance((output.get("parameters") or {}).get("binary_data"), bool):
            own[output.get("name")] = output["parameters"]["binary_data"]
    return every, own


def write_response(response: Dict[str, Any], header: Dict[str, Any]) -> Tuple[bytes, Dict[str, str]]:
    """The bytes of a V2 response (a dict whose outputs hold their ``data``) and the headers that
    go with them: outputs the request asks for as binary data follow the JSON, whose length is
    then in ``Inference-Header-Content-Length``."""
    every, own = binary_outputs(header)
    blobs: List[bytes] = []
    outputs = []
    for output in response.get("outputs") or []:
        output = dict(output)
        if own.get(output.get("name"), every):
            blob = pack_raw(output["datatype"], output.pop("data", []))
            output["parameters"] = {**(output.get("parameters") or {}), "binary_data_size": len(blob)}
            blobs.append(blob)
        elif "data" in output:
            output["data"] = _jsonable(output["data"])
        outputs.append(output)
    text = json.dumps({**response, "outputs": outputs}, default=_plain, allow_nan=True, separators=(",", ":")).encode()
    if not blobs:
        return text, {}
    return text + b"".join(blobs), {HEADER_LENGTH: str(len(text))}


def flat(data: Any):
    """The elements of flat or nested lists, or of a numpy array, in row-major order."""
    if numpy is not None and isinstance(data, numpy.ndarray):
        yield from data.ravel().tolist()
        return
    for element in data:
        if isinstance(element, (list, tuple)):
            yield from flat(element)
        else:
            yield element


def _jsonable(data: Any) -> Any:
    if numpy is not None and isinstance(data, numpy.ndarray):
        data = data.tolist()
    if isinstance(data, list) and data and isinstance(data[0], (bytes, bytearray)):
        return [bytes(d).decode("utf-8", "replace") for d in data]
    return data


def _plain(value: Any) -> Any:
    if hasattr(value, "tolist"):
        return value.tolist()
    if isinstance(value, (bytes, bytearray)):
        return bytes(value).decode("utf-8", "replace")
    raise TypeError(f"{type(value).__name__} is not JSON serializable")

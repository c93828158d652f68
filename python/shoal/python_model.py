"""The ``"python"`` runtime of the shared pool: a class of one's own, named by the settings'
``class`` (``model.py:Classify``, from the model's folder), whose ``forward()`` takes a request's
inputs by name (numpy arrays viewing the bytes that came, where numpy is installed) and returns
its outputs by name."""

import inspect
from typing import Any, AsyncIterator, Dict, List, Tuple

from . import v2
from .errors import BadRequestError, EncodingError, ShoalError, to_wire
from .host import stream_policy
from .runner import load_class
from .worker import is_stream

try:
    import numpy
except ImportError:  # pragma: no cover - exercised where numpy is missing
    numpy = None


class PythonModel:
    """One loaded model: an instance of its class, with ``dir``, ``parameters``, ``model_name``,
    ``model_version`` and ``max_batch_size`` set before its ``init()`` runs."""

    def __init__(self, message: Dict[str, Any]):
        self.message = message
        self.name = message["name"]
        self.version = message.get("version") or None
        self.batched = int(message.get("maxBatchSize", 1)) > 1
        self.worker: Any = None

    async def load(self) -> Dict[str, Any]:
        m = self.message
        target = m.get("class") or ""
        where, _, cls_name = target.rpartition(":")
        # A file is found from the model's folder, whatever the worker's working directory.
        if where.endswith(".py") and not where.startswith("/"):
            target = f"{m['dir']}/{where}:{cls_name}"
        cls = load_class(target)
        worker = cls.__new__(cls)
        worker.dir, worker.parameters = m["dir"], dict(m.get("parameters") or {})
        worker.model_name, worker.model_version, worker.max_batch_size = self.name, m.get("version", ""), int(m.get("maxBatchSize", 1))
        cls.__init__(worker)
        init = getattr(worker, "init", None)
        if callable(init):
            done = init()
            if inspect.isawaitable(done):
                await done
        self.worker = worker
        streaming = bool(getattr(cls, "streaming", False))
        return {
            "platform": str(getattr(cls, "platform", "python")),
            "inputs": list(getattr(cls, "inputs", None) or m.get("inputs") or []),
            "outputs": list(getattr(cls, "outputs", None) or m.get("outputs") or []),
            **({"stream": stream_policy()} if streaming else {}),
        }

    async def unload(self) -> None:
        unload = getattr(self.worker, "unload", None)
        if callable(unload):
            done = unload()
            if inspect.isawaitable(done):
                await done

    async def run(self, items: List[Dict[str, Any]]) -> Tuple[List[Any], Dict[int, Any]]:
        results: List[Any] = [None] * len(items)
        decoded: Dict[int, Tuple[Dict[str, Any], Dict[str, Any]]] = {}
        for i, item in enumerate(items):
            try:
                decoded[i] = _decode(item)
            except Exception as err:
                results[i] = {"ok": False, "error": to_wire(err, "BAD_REQUEST")}
        live = list(decoded)
        if not live:
            return results, {}
        requests = [decoded[i][0] for i in live]
        outputs = self.worker.forward(requests) if self.batched else [self.worker.forward(requests[0])]
        if inspect.isawaitable(outputs):
            outputs = await outputs
        if not isinstance(outputs, (list, tuple)) or len(outputs) != len(live):
            raise ShoalError(f"forward() returned {len(outputs) if isinstance(outputs, (list, tuple)) else type(outputs).__name__} for a batch of {len(live)}: return one output per request")
        streams: Dict[int, Any] = {}
        for i, output in zip(live, outputs):
            request, header = decoded[i]
            if isinstance(output, BaseException):
                results[i] = {"ok": False, "error": to_wire(output)}
            elif is_stream(output) and items[i].get("stream"):
                streams[i] = self._stream(output, request, header)
                results[i] = {"ok": True, "value": None}
            else:
                results[i] = self._answer(_joined(list(output)) if is_stream(output) else output, request, header)
        return results, streams

    async def _stream(self, chunks: Any, request: Dict[str, Any], header: Dict[str, Any]) -> AsyncIterator[bytes]:
        try:
            for chunk in chunks:
                yield self._encode(chunk, request, header)[0]
        finally:
            if hasattr(chunks, "close"):
                chunks.close()

    def _answer(self, output: Any, request: Dict[str, Any], header: Dict[str, Any]) -> Dict[str, Any]:
        try:
            body, headers = self._encode(output, request, header)
        except Exception as err:
            return {"ok": False, "error": to_wire(err, "ENCODING")}
        answer: Dict[str, Any] = {"ok": True, "value": body, "contentType": "application/octet-stream" if headers else "application/json"}
        if headers:
            answer["headers"] = headers
        return answer

    def _encode(self, output: Any, request: Dict[str, Any], header: Dict[str, Any]) -> Tuple[bytes, Dict[str, str]]:
        if not isinstance(output, dict):
            raise EncodingError(f"forward() returned a {type(output).__name__}: return a dict of outputs by name")
        tensors = [_tensor(name, value) for name, value in output.items()]
        asked = [o.get("name") for o in header.get("outputs") or [] if isinstance(o, dict)]
        if asked:
            by_name = {t["name"]: t for t in tensors}
            missing = [n for n in asked if n not in by_name]
            if missing:
                raise BadRequestError(f"unknown output '{missing[0]}': the model gives {', '.join(by_name)}")
            tensors = [by_name[n] for n in asked]
        response: Dict[str, Any] = {"model_name": self.name, "outputs": tensors}
        if self.version is not None:
            response["model_version"] = self.version
        if request.get("id") is not None:
            response["id"] = request["id"]
        return v2.write_response(response, header)


def _decode(item: Dict[str, Any]) -> Tuple[Dict[str, Any], Dict[str, Any]]:
    header, raws = v2.read_request(item.get("payload"), item.get("meta") or {})
    inputs: Dict[str, Any] = {}
    for tensor, raw in zip(header["inputs"], raws):
        name, datatype, shape = tensor.get("name"), tensor.get("datatype"), tensor.get("shape")
        if not isinstance(name, str) or not isinstance(datatype, str) or not isinstance(shape, list):
            raise BadRequestError("each input needs a 'name', a 'datatype' and a 'shape'")
        if raw is not None:
            inputs[name] = v2.unpack_raw(datatype, shape, raw, as_array=True)
        elif datatype == "BYTES":
            inputs[name] = [d.encode() if isinstance(d, str) else d for d in v2.flat(tensor.get("data") or [])]
        elif numpy is not None:
            try:
                inputs[name] = numpy.asarray(tensor.get("data"), dtype=v2.DTYPES[datatype]).reshape(shape)
            except (KeyError, ValueError, TypeError) as err:
                raise BadRequestError(f"input '{name}': {err}")
        else:
            inputs[name] = list(v2.flat(tensor.get("data") or []))
    request = {"inputs": inputs, "parameters": header.get("parameters") or {}, "outputs": [o.get("name") for o in header.get("outputs") or []]}
    if header.get("id") is not None:
        request["id"] = header["id"]
    return request, header


def _tensor(name: str, value: Any) -> Dict[str, Any]:
    if isinstance(value, dict):
        return {"name": name, **value}
    if numpy is not None and not isinstance(value, (list, tuple)):
        array = numpy.asarray(value)
        return {"name": name, "datatype": v2.datatype_of(array), "shape": list(array.shape), "data": array}
    data = list(v2.flat(value))
    datatype = "BYTES" if data and isinstance(data[0], (str, bytes)) else "FP64"
    return {"name": name, "datatype": datatype, "shape": [len(data)], "data": data}


def _joined(chunks: List[Dict[str, Any]]) -> Dict[str, Any]:
    # A stream's chunks for a client that takes one answer: each output joined along its first axis.
    if not chunks:
        return {}
    if numpy is None:
        return {name: [v for chunk in chunks for v in v2.flat(chunk[name])] for name in chunks[0]}
    return {name: numpy.concatenate([numpy.atleast_1d(numpy.asarray(chunk[name])) for chunk in chunks]) for name in chunks[0]}

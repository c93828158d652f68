"""MLServer's custom runtimes served unchanged: a ``model-settings.json`` in MLServer's format
whose ``implementation`` names an ``MLModel`` subclass. The ``mlserver`` package's own types do
the work: ``ModelSettings`` reads the settings (and imports the class from the settings' folder),
``InferenceRequest`` checks each request, ``BatchedRequests`` merges a batch into one request and
splits the answer (MLServer's adaptive batching), and ``load``, ``predict``, ``predict_stream``
and ``unload`` run as MLServer runs them. Answers are as MLServer gives them: the request's id
(a new UUID when it has none), ``parameters.headers`` as response headers, CloudEvents headers."""

import inspect
import json
import os
import uuid
from typing import Any, AsyncIterator, Dict, List, Optional, Tuple

from . import v2
from .errors import BadRequestError, ServerError, ShoalError, ValidationError, named, to_wire
from .host import stream_policy

try:
    import mlserver
    from mlserver.batching.requests import BatchedRequests
    from mlserver.errors import MLServerError
    from mlserver.handlers.custom import get_custom_handlers
    from mlserver.model import MLModel
    from mlserver.settings import ModelSettings
    from mlserver.types import InferenceRequest, InferenceResponse, Parameters, RequestInput
    from pydantic import ValidationError as SchemaError
except ImportError:  # pragma: no cover - exercised where mlserver is missing
    mlserver = None

def mapped(err: BaseException) -> BaseException:
    """An ``MLServerError`` from the runtime as MLServer's inference pool answers it (its
    ``WorkerError``): its status (the coordinator answers the row of Shoal's error table with that
    status) and the text ``module.Class: message``. Any other error as it is (``_wire`` words it
    the same way, with 500)."""
    if mlserver is not None and isinstance(err, MLServerError):
        return _with_status(ServerError(named(err)), getattr(err, "status_code", 400))
    return err


def _with_status(error: ShoalError, status: int) -> ShoalError:
    error.status = status
    return error


def _refused(err: "SchemaError", grpc: bool) -> ShoalError:
    """A request MLServer's types refuse, as MLServer answers it: over REST, FastAPI's 422 with
    pydantic's errors as its ``detail`` list, located in the body; over gRPC, where MLServer's
    converters build each input as a ``RequestInput``, the exception's text with 500."""
    if grpc:
        return _with_status(ServerError(str(err)), 500)
    error = ValidationError(str(err))
    # What FastAPI's encoder makes of them: JSON values (an exception in `ctx` as its text).
    error.detail = json.loads(json.dumps([{**e, "loc": ["body", *e["loc"]]} for e in err.errors(include_url=False)], default=str))
    return error


class MLServerModel:
    """One loaded ``MLModel``: its settings, its instance, and the strict checks its settings ask for."""

    def __init__(self, message: Dict[str, Any]):
        if mlserver is None:
            raise ServerError("the model's settings name an MLServer runtime, and the mlserver package is not installed in the Python workers' environment")
        raw = dict(message.get("mlserver") or {})
        raw["name"] = message["name"]
        parameters = dict(raw.get("parameters") or {})
        # MLServer's repository points an unset uri at the settings' folder.
        parameters.setdefault("uri", message["dir"])
        raw["parameters"] = parameters
        self.name = message["name"]
        self.version = message.get("version") or None
        self.strict = raw.pop("strict_inputs", False) is True
        # MLServer imports `implementation` with the folder of the settings' file first on sys.path.
        self.settings = ModelSettings.model_validate({**raw, "_source": os.path.join(message["dir"], "model-settings.json")})
        self.model: Any = None
        self.streams = False
        self.handlers: Dict[str, Any] = {}

    async def load(self) -> Dict[str, Any]:
        try:
            self.model = self.settings.implementation(self.settings)
            ready = await self.model.load()
        except BaseException as err:
            raise mapped(err) from err
        if ready is False:
            raise ServerError(f"{type(self.model).__name__}.load() returned False")
        self.model.ready = True
        self.streams = type(self.model).predict_stream is not MLModel.predict_stream
        # Its custom handlers, by method name; those MLServer's REST app would route.
        found = get_custom_handlers(self.model)
        self.handlers = {method.__name__: method for _, method in found}
        metadata = await self.model.metadata()
        return {
            "platform": metadata.platform or "",
            "inputs": [_tensor(t) for t in metadata.inputs or []],
            "outputs": [_tensor(t) for t in metadata.outputs or []],
            "runtimeVersion": mlserver.__version__,
            # What MLServer answers for the model's metadata: its metadata() as it is.
            "answer": metadata.model_dump(mode="json", exclude_none=True),
            "handlers": [{"path": h.rest_path, "method": h.rest_method.upper(), "name": m.__name__} for h, m in found],
            # A model that streams by its nature; any other answers /infer_stream with predict() once, as MLServer does.
            **({"stream": stream_policy()} if self.streams else {}),
        }

    async def unload(self) -> None:
        if self.model is not None:
            await self.model.unload()
            self.model.ready = False

    async def run(self, items: List[Dict[str, Any]]) -> Tuple[List[Any], Dict[int, Any]]:
        """One result per item, and the streams of the items whose clients take one. A model that
        streams answers a client that takes one answer with its responses joined."""
        results: List[Any] = [None] * len(items)
        requests: Dict[int, Tuple[Any, Dict[str, Any]]] = {}
        for i, item in enumerate(items):
            handler = ((item.get("meta") or {}).get("v2") or {}).get("handler")
            if handler is not None:
                results[i] = await self._custom(handler, item.get("payload"))
                continue
            try:
                requests[i] = self._request(item)
            except Exception as err:
                results[i] = {"ok": False, "error": _wire(err)}
        streams = {i: self._stream(*requests.pop(i), isinstance(items[i].get("payload"), dict)) for i in list(requests) if items[i].get("stream")}
        for i in streams:
            results[i] = {"ok": True, "value": None}
        if requests and self.streams:
            for i, (request, header) in requests.items():
                results[i] = await self._gathered(request, header)
        elif requests:
            for i, answer in (await self._predict(requests)).items():
                results[i] = answer
        return results, streams

    # A custom handler's call, as FastAPI makes it of a JSON body: a handler of one parameter takes
    # the whole body, one of several takes the body's fields by name; its answer is JSON.
    async def _custom(self, name: str, payload: Any) -> Dict[str, Any]:
        try:
            body = json.loads(bytes(v2.as_bytes(payload)) or b"null")
        except ValueError as err:
            return {"ok": False, "error": _wire(BadRequestError(f"the body is not JSON: {err}"))}
        try:
            method = self.handlers[name]
            parameters = list(inspect.signature(method).parameters)
            if len(parameters) == 1:
                value = await method(body)
            elif isinstance(body, dict):
                value = await method(**{k: body[k] for k in parameters if k in body})
            else:
                raise ValidationError(f"{name}() takes {', '.join(parameters)}: send a JSON object of them")
            return {"ok": True, "value": json.dumps(value, default=_jsonable, separators=(",", ":")).encode(), "contentType": "application/json"}
        except BaseException as err:
            return {"ok": False, "error": _wire(mapped(err))}

    # The responses of predict_stream() as one: each output's elements joined along the first axis.
    async def _gathered(self, request: Any, header: Dict[str, Any]) -> Dict[str, Any]:
        try:
            responses = [response async for response in self.model.predict_stream(_one(request))]
        except BaseException as err:
            return {"ok": False, "error": _wire(mapped(err))}
        if not responses:
            return {"ok": False, "error": {"code": "SERVER", "message": "predict_stream() gave no response"}}
        joined = responses[0].model_copy(deep=True)
        for output in joined.outputs:
            parts = [o for r in responses for o in r.outputs if o.name == output.name]
            output.data = [v for o in parts for v in o.data]
            output.shape = [sum(o.shape[0] for o in parts), *output.shape[1:]]
        return self._answer(joined, request, header)

    # A batch in one predict(), merged and split by MLServer's own BatchedRequests; an error
    # fails every request of the batch, as MLServer's adaptive batching does.
    async def _predict(self, requests: Dict[int, Tuple[Any, Dict[str, Any]]]) -> Dict[int, Any]:
        try:
            if len(requests) == 1:
                [(i, (request, _header))] = requests.items()
                responses = {i: await self.model.predict(request)}
            else:
                batch = BatchedRequests({str(i): request for i, (request, _header) in requests.items()})
                merged = await self.model.predict(batch.merged_request)
                responses = {int(i): r for i, r in batch.split_response(merged).items()}
        except BaseException as err:
            error = _wire(mapped(err))
            return {i: {"ok": False, "error": error} for i in requests}
        return {i: self._answer(responses[i], *requests[i]) for i in requests}

    async def _stream(self, request: Any, header: Dict[str, Any], grpc: bool) -> AsyncIterator[bytes]:
        try:
            async for response in self.model.predict_stream(_one(request)):
                body, _headers = self._encode(response, request, header, "grpc" if grpc else "sse")
                yield body
        except BaseException as err:
            raise mapped(err) from err

    def _request(self, item: Dict[str, Any]) -> Tuple[Any, Dict[str, Any]]:
        meta = item.get("meta") or {}
        header, raws = v2.read_request(item.get("payload"), meta)
        grpc = isinstance(item.get("payload"), dict)
        inputs = []
        try:
            for tensor, raw in zip(header["inputs"], raws):
                tensor = dict(tensor)
                if raw is not None:
                    # As MLServer's gRPC takes raw contents: the elements in `data`.
                    parameters = {k: v for k, v in (tensor.get("parameters") or {}).items() if k != "binary_data_size"}
                    tensor["parameters"] = parameters or None
                    if grpc:
                        # MLServer's converters build each input as a RequestInput first.
                        RequestInput.model_validate({**tensor, "data": []})
                    tensor["data"] = v2.unpack_raw(tensor.get("datatype"), tensor.get("shape") or [], raw, as_array=False)
                inputs.append(tensor)
            parameters = {k: v for k, v in (header.get("parameters") or {}).items() if k != "binary_data_output"}
            # MLServer gives a model the request's headers in its parameters, in place of any sent there.
            parameters["headers"] = {k: (", ".join(v) if isinstance(v, list) else v) for k, v in (meta.get("headers") or {}).items()}
            request = InferenceRequest.model_validate({**header, "inputs": inputs, "parameters": parameters})
        except SchemaError as err:
            raise _refused(err, grpc) from err
        # MLServer gives a REST request without an id a new one; a gRPC request's is its
        # message's field, "" when not set, which it keeps.
        if request.id is None:
            request.id = "" if grpc else str(uuid.uuid4())
        if self.strict:
            self._check(request)
        return request, header

    # The strict checks a settings key turns on: every input declared, of its datatype and shape.
    def _check(self, request: Any) -> None:
        declared = {t.name: t for t in self.settings.inputs or []}
        for tensor in request.inputs:
            spec = declared.get(tensor.name)
            if spec is None:
                raise BadRequestError(f"unknown input '{tensor.name}': the model takes {', '.join(declared) or 'none'}")
            if tensor.datatype != spec.datatype:
                raise BadRequestError(f"input '{tensor.name}' is {tensor.datatype}, and the model takes {spec.datatype}")
            if len(tensor.shape) != len(spec.shape) or any(d != -1 and d != s for d, s in zip(spec.shape, tensor.shape)):
                raise BadRequestError(f"input '{tensor.name}' has shape {tensor.shape}, and the model takes {spec.shape}")

    def _answer(self, response: Any, request: Any, header: Dict[str, Any]) -> Dict[str, Any]:
        try:
            body, headers = self._encode(response, request, header)
        except Exception as err:
            return {"ok": False, "error": _wire(err, "ENCODING")}
        answer: Dict[str, Any] = {"ok": True, "value": body, "contentType": "application/octet-stream" if v2.HEADER_LENGTH in headers else "application/json"}
        if headers:
            answer["headers"] = headers
        return answer

    # The response as MLServer's data plane sends it: the request's id in place of the model's,
    # the name and version the model gave, `parameters.headers` moved to the response's headers,
    # with CloudEvents' beside them.
    def _encode(self, response: Any, request: Any, header: Dict[str, Any], event: Optional[str] = None) -> Tuple[bytes, Dict[str, str]]:
        """The response's bytes and headers. A stream's ``event`` has no headers of its own and
        keeps them in its ``parameters``: those of REST (``"sse"``) as MLServer's Server-Sent
        Events do, those of gRPC (``"grpc"``) for the coordinator to send the last one's as the
        call's trailing metadata, as MLServer does."""
        if not isinstance(response, InferenceResponse):
            raise ShoalError(f"predict() returned a {type(response).__name__}, not an InferenceResponse")
        response.id = request.id
        response.model_name = response.model_name or self.name
        own = response.parameters.headers if response.parameters is not None else None
        headers = {**self._cloud_events(request.id), **{str(k): str(v) for k, v in (own or {}).items()}}
        if response.parameters is None:
            response.parameters = Parameters()
        response.parameters.headers = headers if event is not None else None
        plain = response.model_dump(exclude_none=True)
        # MLServer's answers keep their parameters, empty once the headers are out of them, before the outputs.
        outputs = plain.pop("outputs")
        plain.setdefault("parameters", {})
        plain["outputs"] = outputs
        body, binary = v2.write_response(plain, header)
        return body, {} if event is not None else {**{k.lower(): v for k, v in headers.items()}, **binary}

    def _cloud_events(self, request_id: Optional[str]) -> Dict[str, str]:
        # The CloudEvents headers MLServer's data plane gives each response, in its spelling
        # (without the ids of a response that has none).
        headers = {
            "Ce-Specversion": "0.3",
            "Ce-Source": "io.seldon.serving.deployment.mlserver",
            "Ce-Type": "io.seldon.serving.inference.response",
            "Ce-Modelid": self.name,
            "Ce-Inferenceservicename": "mlserver",
            "Ce-Endpoint": self.name,
        }
        if request_id:
            headers["Ce-Id"] = headers["Ce-Requestid"] = request_id
        return headers


async def _one(request: Any) -> AsyncIterator[Any]:
    # predict_stream() takes an async iterator of requests: here, the one.
    yield request


def _tensor(metadata: Any) -> Dict[str, Any]:
    tensor = {"name": metadata.name, "datatype": metadata.datatype, "shape": list(metadata.shape)}
    if metadata.parameters is not None:
        # As MLServer's metadata gives them: the content type that drives decoding, say.
        tensor["parameters"] = metadata.parameters.model_dump(exclude_none=True)
    return tensor


def _jsonable(value: Any) -> Any:
    # What FastAPI's encoder makes of a handler's answer: pydantic models and numpy values as JSON.
    if hasattr(value, "model_dump"):
        return value.model_dump()
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"a {type(value).__name__} is not JSON")


def _wire(err: BaseException, code: str = "INTERNAL") -> Dict[str, Any]:
    error = to_wire(err, code)
    if not error["message"] and not isinstance(err, ShoalError):
        error["message"] = named(err)
    return error

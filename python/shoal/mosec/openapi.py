"""Mosec's OpenAPI document of a server's routes (served at ``/openapi/metadata.json``): for each
route a POST whose request body is described when its first stage's ``forward()`` is annotated,
and whose answer is when its last stage's is, as JSON Schemas made by msgspec (installed with
the typed mixin); an unannotated end, or one msgspec cannot describe, is left undescribed."""

from typing import Any, Dict, List

from ..worker import get_logger
from .annotations import forward_type

ERRORS = {
    "400": "the body could not be decoded, or the client can fix the request",
    "408": "no answer within the server's or the stage's timeout",
    "413": "the body is larger than --max-request-size",
    "422": "the request decoded but is invalid",
    "429": "a stage's queue is full",
    "500": "the server failed",
    "503": "the server is starting or stopping",
}


def document(routes: Dict[str, List[Any]], version: str) -> Dict[str, Any]:
    """The document of ``routes`` (each a list of Runtimes, first stage to last)."""
    components: Dict[str, Any] = {}
    paths: Dict[str, Any] = {
        "/": {"get": {"summary": "Liveness", "responses": {"200": _described("the server is up", "text/plain", {"type": "string"}), "503": {"description": "the server is stopping"}}}},
        "/metrics": {"get": {"summary": "Prometheus metrics", "responses": {"200": _described("the metrics", "text/plain; version=0.0.4", {"type": "string"})}}},
    }
    for path, runtimes in routes.items():
        first, last = runtimes[0], runtimes[-1]
        operation: Dict[str, Any] = {"summary": " → ".join(r.worker.__name__ for r in runtimes)}
        request = _schema(forward_type(first.worker, first.max_batch_size > 1), components, path)
        if request is not None:
            operation["requestBody"] = {"required": True, "content": {first.worker.req_mime_type: {"schema": request}}}
        response = _schema(forward_type(last.worker, last.max_batch_size > 1, returned=True), components, path)
        ok: Dict[str, Any] = {"description": "the answer"}
        if response is not None:
            ok["content"] = {last.worker.resp_mime_type: {"schema": response}}
        operation["responses"] = {"200": ok, **{code: {"description": text} for code, text in ERRORS.items()}}
        paths[path] = {"post": operation}
    return {"openapi": "3.1.0", "info": {"title": "Mosec API on Shoal", "version": version}, "paths": paths, "components": {"schemas": components}}


def _described(description: str, content_type: str, schema: Dict[str, Any]) -> Dict[str, Any]:
    return {"description": description, "content": {content_type: {"schema": schema}}}


def _schema(kind: Any, components: Dict[str, Any], path: str):
    if kind is Any:
        return None
    try:
        import msgspec

        (schema,), found = msgspec.json.schema_components([kind], ref_template="#/components/schemas/{name}")
    except ImportError:
        return None
    except (TypeError, ValueError) as err:
        get_logger().warning("%s: no schema for %r: %s", path, kind, err)
        return None
    components.update(found)
    return schema

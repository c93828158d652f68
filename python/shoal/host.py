"""A worker of Shoal's shared model pool that is a Python process: it loads, runs and unloads the
models whose ``model-settings.json`` names a Python runtime, on the coordinator's word
(docs/protocol.md, ``load``, ``unload``, ``batch`` with ``model``). Each request arrives as the
V2 bytes the client sent and leaves as the V2 bytes it gets: the coordinator decodes neither.

Two runtimes: ``"python"``, a class of one's own with ``forward()`` over numpy arrays by input
name (python_model.py), and ``"mlserver"``, an ``MLModel`` subclass run with the ``mlserver``
package's own types and codecs (mlserver_model.py)."""

import asyncio
import logging
import queue
from typing import Any, Dict, List

from . import wire
from .errors import ServerError, named, to_wire
from .jobs import STOP, Flow, read_jobs
from .worker import LOGGER_NAME

#: What a streamed item's client may leave unread before its stream waits (the coordinator's default).
STREAM_BUFFER_BYTES = 1024 * 1024


def _runtime(message: Dict[str, Any]):
    runtime = message.get("runtime")
    if runtime == "python":
        from .python_model import PythonModel

        return PythonModel(message)
    if runtime == "mlserver":
        from .mlserver_model import MLServerModel

        return MLServerModel(message)
    raise ServerError(f"a Python worker has no runtime '{runtime}' (it runs \"python\" and \"mlserver\")")


class ModelHost:
    """One Python worker of the shared pool: its models by instance key, and the batches for them."""

    def __init__(self, connection: Any):
        self.connection = connection
        self.models: Dict[str, Any] = {}
        self.queue: "queue.Queue[Any]" = queue.Queue()
        self.loop = asyncio.new_event_loop()
        self.flow = Flow()

    def start(self, _boot: Dict[str, Any]) -> None:
        """Says ready at once: the models come later, one ``load`` each."""
        self.connection.send("ready", {"contentType": "application/json"})

    # The reader thread: loads, unloads and batches in order to the queue, flow control to the streams.
    def read(self) -> None:
        read_jobs(self.connection, self.queue, self.flow, ("batch", "load", "unload"))

    def serve(self) -> None:
        while True:
            job = self.queue.get()
            if job is STOP:
                for model in list(self.models.values()):
                    self._unload(model)
                return
            kind, seq, body = job
            if kind == "load":
                self._load(body)
            elif kind == "unload":
                model = self.models.pop(body.get("model"), None)
                if model is not None:
                    self._unload(model)
            else:
                self._batch(seq, body)

    def _load(self, message: Dict[str, Any]) -> None:
        key = message.get("model")
        try:
            model = _runtime(message)
            loaded = self.loop.run_until_complete(model.load())
        except BaseException as err:
            logging.getLogger(LOGGER_NAME).debug("model %s failed to load: %s", message.get("name"), err)
            error = to_wire(err, "SERVER")
            if not error["message"]:
                error["message"] = named(err)
            self.connection.send("loadFailed", {"model": key, "error": error})
            return
        self.models[key] = model
        self.connection.send("loaded", {"model": key, **loaded})

    def _unload(self, model: Any) -> None:
        try:
            self.loop.run_until_complete(model.unload())
        except Exception as err:  # an unload that fails leaves the model gone all the same
            logging.getLogger(LOGGER_NAME).warning("unloading %s failed: %s", model.name, err)

    def _batch(self, seq: int, body: Dict[str, Any]) -> None:
        model = self.models.get(body.get("model"))
        if model is None:
            error = {"code": "NOT_READY", "message": f"model instance {body.get('model')} is not loaded on this worker"}
            self.connection.send("result", {"error": error}, seq, wire.FLAG_ERROR)
            return
        items: List[Dict[str, Any]] = body.get("items", [])
        try:
            results, streams = self.loop.run_until_complete(model.run(items))
        except BaseException as err:
            self.connection.send("result", {"error": to_wire(err)}, seq, wire.FLAG_ERROR)
            return
        if streams:
            self._stream(seq, streams)
        self.connection.send("result", {"results": results}, seq)

    # Each streamed item's chunks in turn (an async iterator of bytes each), as its client lets
    # it: a paused stream waits for resume, a cancelled one is closed and says nothing more.
    def _stream(self, seq: int, streams: Dict[int, Any]) -> None:
        self.flow.begin(seq, streams)
        try:
            for i, chunks in streams.items():
                self.loop.run_until_complete(self._one_stream(seq, i, chunks))
        finally:
            self.flow.end()

    async def _one_stream(self, seq: int, index: int, chunks: Any) -> None:
        try:
            async for chunk in chunks:
                flow = self.flow
                with flow.cond:
                    while flow.states[index] == "pause":
                        flow.cond.wait(timeout=1.0)
                    if flow.states[index] == "cancel":
                        await chunks.aclose()
                        return
                self.connection.send("stream", {"index": index, "chunk": chunk}, seq)
        except Exception as err:
            self.connection.send("stream", {"index": index, "end": True, "error": to_wire(err, "SERVER")}, seq, wire.FLAG_ERROR)
            return
        self.connection.send("stream", {"index": index, "end": True}, seq)


def stream_policy() -> Dict[str, Any]:
    """How a streaming model's streams wait for a slow client: as a TypeScript model's by default."""
    return {"bufferBytes": STREAM_BUFFER_BYTES, "whenFull": "pause", "transport": "sse"}

"""Runs a Worker class as one worker process of a Shoal stage: connects to ``SHOAL_SOCKET``, takes
its boot, starts the Worker (init, warm-up), says ready, then answers each batch with one result
and streams chunks under the coordinator's flow control (docs/protocol.md)."""

import importlib
import importlib.util
import logging
import os
import queue
import socket
import sys
import threading
from pathlib import Path
from typing import Any, Dict, List, Optional

from . import wire
from .errors import ShoalError, to_wire
from .jobs import STOP, Flow, read_jobs
from .worker import LOGGER_NAME, Worker, is_stream

SOCKET_ENV = "SHOAL_SOCKET"
#: The argument that makes the process a worker of the shared model pool (host.py).
HOST_ARG = "--models"
_LEVELS = {logging.DEBUG: "debug", logging.INFO: "info", logging.WARNING: "warn", logging.ERROR: "error"}
# The connection of this process, once it runs under Shoal (for the logger and report_metrics).
_connection: Optional["Connection"] = None


class Connection:
    """The Unix socket to the coordinator; frames are written whole, from any thread."""

    def __init__(self, path: str):
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(path)
        self._lock = threading.Lock()
        self._reader = wire.FrameReader()
        self._pending: List[Any] = []

    def send(self, kind: str, body: Dict[str, Any], seq: int = 0, flags: int = 0) -> None:
        frame = wire.encode_frame(kind, body, seq, flags)
        with self._lock:
            self.sock.sendall(frame)

    def receive(self):
        """The next frame, or None once the coordinator has closed the connection."""
        while not self._pending:
            chunk = self.sock.recv(1 << 20)
            if not chunk:
                return None
            self._pending.extend(self._reader.push(chunk))
        return self._pending.pop(0)


class _LogHandler(logging.Handler):
    # Lines of the worker's logger, as log frames.
    def emit(self, record: logging.LogRecord) -> None:
        connection = _connection
        if connection is None:
            return
        level = _LEVELS.get(record.levelno, "error" if record.levelno > logging.WARNING else "debug")
        body: Dict[str, Any] = {"level": level, "msg": record.getMessage()}
        fields = getattr(record, "fields", None)
        if isinstance(fields, dict) and fields:
            body["fields"] = fields
        try:
            connection.send("log", body)
        except Exception:  # a log line never fails the work
            pass


def report_metrics(metrics: List[Dict[str, Any]]) -> None:
    """Sends the worker's own Prometheus metrics, in the shape of prom-client's
    ``getMetricsAsJSON()`` (docs/protocol.md, ``metrics``); each report replaces the last.
    Does nothing outside a server."""
    if _connection is not None:
        _connection.send("metrics", {"metrics": metrics})


def load_class(target: str):
    """The Worker class ``target`` names: ``path/to/file.py:Class`` or ``package.module:Class``."""
    where, sep, name = target.rpartition(":")
    if not sep or not where or not name:
        raise ValueError(f"'{target}' does not name a class: write file.py:Class or module:Class")
    if where.endswith(".py") or os.sep in where:
        path = Path(where).resolve()
        if not path.is_file():
            raise FileNotFoundError(f"no Python file {path}")
        # Its folder first on the path, so that the file imports its neighbours as a script would.
        sys.path.insert(0, str(path.parent))
        spec = importlib.util.spec_from_file_location(path.stem, path)
        module = importlib.util.module_from_spec(spec)
        sys.modules[path.stem] = module
        spec.loader.exec_module(module)
    else:
        module = importlib.import_module(where)
    cls = getattr(module, name, None)
    if cls is None:
        raise AttributeError(f"{where} has no class {name}")
    if not callable(getattr(cls, "forward", None)):
        raise TypeError(f"{name} has no forward() method")
    return cls


class Runner:
    """One worker process: the boot, the Worker, and the batches."""

    def __init__(self, connection: Connection, target: str):
        self.connection = connection
        self.target = target
        self.worker: Any = None
        self.batched = False
        self.queue: "queue.Queue[Any]" = queue.Queue()
        self.flow = Flow()

    def start(self, boot: Dict[str, Any]) -> None:
        cls = load_class(self.target)
        worker = cls()
        worker.max_batch_size = int(boot.get("maxBatchSize", 1))
        worker.worker_id = int(boot.get("workerId", 0))
        worker.num = int(boot.get("num", 1))
        worker.stage = str(boot.get("stageName", ""))
        self.batched = worker.max_batch_size > 1
        init = getattr(worker, "init", None)
        if callable(init):
            init()
        self.worker = worker
        try:
            self._warm_up()
        except ShoalError as err:
            if getattr(worker, "warm_up_required", True):
                raise
            logging.getLogger(LOGGER_NAME).warning(err.message)
        ready: Dict[str, Any] = {"contentType": getattr(worker, "content_type", "application/json")}
        examples = list(getattr(worker, "examples", []) or [])
        if examples:
            ready["example"] = examples[0]
        self.connection.send("ready", ready)

    def _warm_up(self) -> None:
        examples = list(getattr(self.worker, "examples", []) or [])
        size = max(1, self.worker.max_batch_size)
        for i in range(0, len(examples), size):
            chunk = examples[i : i + size]
            try:
                outputs = self.worker.forward(chunk) if self.batched else [self.worker.forward(chunk[0])]
                for output in outputs:
                    if isinstance(output, BaseException):
                        raise output
                    if is_stream(output):
                        list(output)
            except Exception as err:
                raise ShoalError(f"warm-up of {self.worker.stage} worker {self.worker.worker_id} failed on example {i + 1}: {err}") from err

    # The reader thread: batches to the queue, flow control to the streams, stop at once.
    def read(self) -> None:
        read_jobs(self.connection, self.queue, self.flow, ("batch",))

    def serve(self) -> None:
        while True:
            job = self.queue.get()
            if job is STOP:
                return
            _kind, seq, body = job
            self.batch(seq, body.get("items", []))

    def batch(self, seq: int, items: List[Dict[str, Any]]) -> None:
        results: List[Optional[Dict[str, Any]]] = [None] * len(items)
        values: List[Any] = [None] * len(items)
        for i, item in enumerate(items):
            if item.get("ingress"):
                try:
                    values[i] = self.worker.decode(bytes(item.get("payload") or b""), item.get("meta", {}))
                except Exception as err:
                    results[i] = _failed(err, "DECODING")
            else:
                try:
                    values[i] = self.worker.from_stage(item.get("payload"))
                except Exception as err:
                    results[i] = _failed(err)
        live = [i for i in range(len(items)) if results[i] is None]
        pushed: Dict[int, List[Any]] = {}
        self.worker._push = lambda chunk, index: self._push(seq, items, live, pushed, chunk, index)
        try:
            if not live:
                outputs: List[Any] = []
            elif self.batched:
                outputs = self.worker.forward([values[i] for i in live])
                if not isinstance(outputs, (list, tuple)) or len(outputs) != len(live):
                    raise ShoalError(f"forward() returned {_count(outputs)} for a batch of {len(live)}: return one output per item")
            else:
                outputs = [self.worker.forward(values[i]) for i in live]
        except Exception as err:
            self._end_pushed(seq, items, pushed, err)
            self.connection.send("result", {"error": to_wire(err)}, seq, wire.FLAG_ERROR)
            return
        finally:
            self.worker._push = None
        streams: Dict[int, Any] = {}
        for i, output in zip(live, outputs):
            item = items[i]
            if i in pushed:
                # Chunks sent from inside forward(): the stream was the answer.
                results[i] = {"ok": True, "value": None} if items[i].get("stream") else self._answer(item, pushed[i])
            elif isinstance(output, BaseException):
                results[i] = _failed(output)
            elif is_stream(output) and item.get("stream") and item.get("egress"):
                streams[i] = output
            else:
                if is_stream(output):
                    try:
                        output = list(output)
                    except Exception as err:
                        results[i] = _failed(err)
                        continue
                results[i] = self._answer(item, output)
        self._end_pushed(seq, items, pushed)
        if streams:
            for i in streams:
                results[i] = {"ok": True, "value": None}
            self._stream(seq, items, dict(streams))
        try:
            self.connection.send("result", {"results": results}, seq)
        except TypeError:
            # A value that cannot travel fails its own item only.
            for i, result in enumerate(results):
                if result is not None and result.get("ok"):
                    try:
                        wire.pack(result["value"])
                    except TypeError as err:
                        results[i] = {"ok": False, "error": {"code": "ENCODING", "message": str(err)}}
            self.connection.send("result", {"results": results}, seq)

    # A chunk that forward() sends for the item at `index` of the batch it was given (Mosec's
    # send_stream_event): out at once to a client that takes a stream, else kept to be gathered.
    def _push(self, seq: int, items: List[Dict[str, Any]], live: List[int], pushed: Dict[int, List[Any]], chunk: Any, index: int) -> None:
        if not 0 <= index < len(live):
            raise IndexError(f"no item {index} in a batch of {len(live)}")
        i = live[index]
        pushed.setdefault(i, [])
        if items[i].get("stream"):
            self.connection.send("stream", {"index": i, "chunk": self.worker.encode(chunk, items[i].get("meta", {}))}, seq)
        else:
            pushed[i].append(chunk)

    def _end_pushed(self, seq: int, items: List[Dict[str, Any]], pushed: Dict[int, List[Any]], error: Optional[BaseException] = None) -> None:
        for i in pushed:
            if items[i].get("stream"):
                if error is None:
                    self.connection.send("stream", {"index": i, "end": True}, seq)
                else:
                    self.connection.send("stream", {"index": i, "end": True, "error": to_wire(error, "SERVER")}, seq, wire.FLAG_ERROR)

    def _answer(self, item: Dict[str, Any], output: Any) -> Dict[str, Any]:
        if not item.get("egress"):
            try:
                return {"ok": True, "value": self.worker.to_stage(output)}
            except Exception as err:
                return _failed(err, "ENCODING")
        meta = item.get("meta", {})
        try:
            answer: Dict[str, Any] = {"ok": True, "value": self.worker.encode(output, meta)}
            kind = self.worker.response_type(meta)
        except Exception as err:
            return _failed(err, "ENCODING")
        if kind:
            answer["contentType"] = kind
        return answer

    # Pulls the batch's streams a chunk at a time in turn, each as its client lets it: a paused
    # stream waits for resume, a cancelled one is closed and says nothing more.
    def _stream(self, seq: int, items: List[Dict[str, Any]], streams: Dict[int, Any]) -> None:
        flow = self.flow
        flow.begin(seq, streams)
        try:
            while streams:
                with flow.cond:
                    for i in [i for i in streams if flow.states[i] == "cancel"]:
                        _close(streams.pop(i))
                    turn = [i for i in streams if flow.states[i] == "go"]
                    if streams and not turn:
                        flow.cond.wait(timeout=1.0)
                        continue
                for i in turn:
                    meta = items[i].get("meta", {})
                    try:
                        chunk = next(streams[i])
                    except StopIteration:
                        del streams[i]
                        self.connection.send("stream", {"index": i, "end": True}, seq)
                        continue
                    except Exception as err:
                        del streams[i]
                        self.connection.send("stream", {"index": i, "end": True, "error": to_wire(err, "SERVER")}, seq, wire.FLAG_ERROR)
                        continue
                    try:
                        data = self.worker.encode(chunk, meta)
                    except Exception as err:
                        _close(streams.pop(i))
                        self.connection.send("stream", {"index": i, "end": True, "error": to_wire(err, "ENCODING")}, seq, wire.FLAG_ERROR)
                        continue
                    self.connection.send("stream", {"index": i, "chunk": data}, seq)
        finally:
            flow.end()


def _close(stream: Any) -> None:
    if hasattr(stream, "close"):
        stream.close()


def _failed(err: BaseException, code: str = "INTERNAL") -> Dict[str, Any]:
    return {"ok": False, "error": to_wire(err, code)}


def _count(outputs: Any) -> str:
    return f"{len(outputs)} outputs" if isinstance(outputs, (list, tuple)) else f"a {type(outputs).__name__}"


def main(argv: List[str]) -> int:
    """``python -m shoal path/to/file.py:Class``, as the server starts each worker of a Python
    stage, or ``python -m shoal --models``, a Python worker of the shared model pool."""
    global _connection
    if len(argv) != 1:
        print("usage: python -m shoal path/to/file.py:Class | --models (the server starts it, with SHOAL_SOCKET set)", file=sys.stderr)
        return 2
    path = os.environ.get(SOCKET_ENV)
    if not path:
        print(f"{SOCKET_ENV} is not set: a Shoal server starts this worker for a Python stage", file=sys.stderr)
        return 2
    connection = Connection(path)
    frame = connection.receive()
    if frame is None:
        return 0
    kind, _seq, _flags, boot = frame
    if kind != "boot":
        print(f"protocol error: the first frame is {kind}, not boot", file=sys.stderr)
        return 1
    _connection = connection
    logger = logging.getLogger(LOGGER_NAME)
    logger.addHandler(_LogHandler())
    logger.setLevel(logging.DEBUG)
    logger.propagate = False
    if argv[0] == HOST_ARG:
        from .host import ModelHost

        runner = ModelHost(connection)
    elif boot.get("host"):
        connection.send("fatal", {"error": {"code": "SERVER", "message": f"a worker of the shared pool is started with {HOST_ARG}"}})
        return 1
    else:
        runner = Runner(connection, argv[0])
    try:
        runner.start(boot)
    except BaseException as err:
        message = err.message if isinstance(err, ShoalError) and err.message else f"{type(err).__name__}: {err}"
        connection.send("fatal", {"error": {"code": "SERVER", "message": message}})
        return 1
    reader = threading.Thread(target=_guarded(runner.read), daemon=True)
    reader.start()
    runner.serve()
    connection.sock.close()
    return 0


def _guarded(fn):
    # A protocol error on the reader's side ends the process: the connection cannot be trusted.
    def run():
        try:
            fn()
        except BaseException as err:
            print(f"protocol error: {err}", file=sys.stderr)
            os._exit(1)

    return run

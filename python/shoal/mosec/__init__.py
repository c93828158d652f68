"""Mosec's user API on Shoal: a Mosec server runs with one import changed,
``from shoal.mosec import Server, Worker, ...`` for ``from mosec import ...``.

``python server.py`` parses Mosec's flags and starts Shoal's front (the ``shoal`` command) with
the script's stages as Python process workers, as Mosec's Python starts its Rust binary, asking
it to answer as Mosec does. ``shoal.mosec.mixin`` and ``shoal.mosec.errors`` are Mosec's
``mosec.mixin`` and ``mosec.errors``. What differs from Mosec is listed in docs/python.md."""

import argparse
import atexit
import json
import os
import pickle
import shutil
import signal
import subprocess
import sys
from typing import Any, Dict, List, Optional, Sequence, Union

from ..worker import Worker as _ShoalWorker
from ..worker import get_logger as _get_logger
from .errors import ClientError, DecodingError, EncodingError, MosecError, ServerError, ValidationError

__all__ = [
    "Server", "Worker", "SSEWorker", "Runtime", "get_logger",
    "ValidationError", "DecodingError", "EncodingError", "ClientError", "ServerError", "MosecError",
]


def get_logger():
    """Mosec's ``get_logger()``: the worker's logger, whose lines reach the server's log."""
    return _get_logger()


class Worker(_ShoalWorker):
    """Mosec's Worker: ``forward(data)``, ``serialize``/``deserialize`` for the route's bodies (JSON),
    ``serialize_ipc``/``deserialize_ipc`` between stages (pickle, as Mosec's default), ``example``
    or ``multi_examples`` for the warm-up, and ``worker_id`` and ``max_batch_size`` set by the server."""

    example: Any = None
    multi_examples: Optional[List[Any]] = None
    req_mime_type = "application/json"
    resp_mime_type = "application/json"

    def __init__(self):
        pass

    def serialize(self, data: Any) -> bytes:
        try:
            return json.dumps(data, indent=2).encode()
        except (TypeError, ValueError) as err:
            raise EncodingError(f"serialize failed: {err}") from err

    def deserialize(self, data: bytes) -> Any:
        if not data:
            return {}
        try:
            return json.loads(data)
        except (ValueError, UnicodeDecodeError) as err:
            raise DecodingError(f"JSON decode error: {err}") from err

    def serialize_ipc(self, data: Any) -> bytes:
        return pickle.dumps(data)

    def deserialize_ipc(self, data: bytes) -> Any:
        return pickle.loads(data)

    # How the SDK's runner calls them.
    def decode(self, payload, meta):
        return self.deserialize(payload)

    def encode(self, output, meta):
        return self.serialize(output)

    def from_stage(self, value):
        return self.deserialize_ipc(value)

    def to_stage(self, output):
        return self.serialize_ipc(output)

    @property
    def content_type(self):  # type: ignore[override]
        return self.resp_mime_type

    # A warm-up that fails is logged, and the worker starts all the same, as in Mosec.
    warm_up_required = False

    @property
    def examples(self):  # type: ignore[override]
        # Mosec's examples are in forward()'s input shape: a list of items each when batching.
        declared = list(self.multi_examples or []) or ([] if self.example is None else [self.example])
        if self.max_batch_size > 1:
            return [item for example in declared for item in (example if isinstance(example, list) else [example])]
        return declared


class SSEWorker(Worker):
    """Mosec's SSEWorker: ``forward`` sends each event with ``send_stream_event(text, index)``."""

    _push = None

    def send_stream_event(self, text: str, index: int = 0) -> None:
        if self._push is None:
            raise RuntimeError("send_stream_event() is called from forward() under a server")
        self._push(text, index)

    def encode(self, output, meta):
        # An event's text goes as it is; a gathered answer (a client that takes no stream) as JSON.
        if isinstance(output, str):
            return output.encode()
        return super().encode(output, meta)


class Runtime:
    """One stage as Mosec's ``Runtime``: a Worker class and how many processes, batches and time it has."""

    def __init__(self, worker: type, num: int = 1, max_batch_size: int = 1, max_wait_time: int = 0,
                 timeout: float = 0, start_method: str = "spawn", env: Union[None, List[Dict[str, str]]] = None):
        if not (isinstance(worker, type) and issubclass(worker, _ShoalWorker)):
            raise TypeError(f"{worker!r} is not a Worker class")
        if num < 1 or max_batch_size < 1 or max_wait_time < 0 or timeout < 0:
            raise ValueError("num and max_batch_size must be 1 or more, max_wait_time and timeout 0 or more")
        if start_method not in ("spawn", "fork"):
            raise ValueError(f"start_method must be 'spawn' or 'fork', not {start_method!r}")
        if env is not None and len(env) != num:
            raise ValueError(f"env has {len(env)} entries for num {num}: give one per worker")
        self.worker, self.num, self.max_batch_size = worker, num, max_batch_size
        self.max_wait_time, self.timeout, self.env = max_wait_time, timeout, env


class Server:
    """Mosec's Server: ``append_worker``, ``register_runtime``, ``register_daemon``, ``run``."""

    def __init__(self):
        self._routes: Dict[str, List[Runtime]] = {}
        self._daemons: List[Any] = []

    def append_worker(self, worker: type, num: int = 1, max_batch_size: int = 1, max_wait_time: int = 0,
                      start_method: str = "spawn", env: Union[None, List[Dict[str, str]]] = None,
                      timeout: float = 0, route: Union[str, Sequence[str]] = "/inference") -> None:
        runtime = Runtime(worker, num, max_batch_size, max_wait_time, timeout, start_method, env)
        for path in [route] if isinstance(route, str) else list(route):
            self._add(path, runtime)

    def _add(self, path: str, runtime: Runtime) -> None:
        if path in _RESERVED:
            raise ValueError(f"'{path}' is reserved, try another one")
        self._routes.setdefault(path, []).append(runtime)

    def register_runtime(self, routes: Dict[str, List[Runtime]]) -> None:
        if self._routes:
            raise RuntimeError("register_runtime() is for a server with no worker appended yet")
        for path, runtimes in routes.items():
            for runtime in runtimes:
                self._add(path, runtime)

    def register_daemon(self, name: str, proc: Any) -> None:
        """A process that lives as long as the server (a ``subprocess.Popen``); it is ended with the server."""
        self._daemons.append((name, proc))

    def _stages(self, script: str, timeout_ms: int) -> List[Dict[str, Any]]:
        # A Runtime in several routes is one stage of each (one pool), as in Mosec; zero wait and
        # timeout take Mosec's defaults (10 ms; the server's --timeout).
        stages: Dict[int, Dict[str, Any]] = {}
        for path, runtimes in self._routes.items():
            for runtime in runtimes:
                if id(runtime) in stages:
                    stages[id(runtime)]["route"].append(path)
                    continue
                stages[id(runtime)] = {
                    "target": f"{script}:{runtime.worker.__name__}",
                    "interpreter": sys.executable,
                    "streaming": issubclass(runtime.worker, SSEWorker),
                    "num": runtime.num,
                    "maxBatchSize": runtime.max_batch_size,
                    "maxWaitMs": runtime.max_wait_time or DEFAULT_WAIT_MS,
                    "timeoutMs": int(runtime.timeout * 1000) or timeout_ms,
                    "route": [path],
                    **({"env": runtime.env} if runtime.env is not None else {}),
                }
        return [stages[key] for key in self._order()]

    def _order(self) -> List[int]:
        # Shoal takes a route's stages in the order they are given: one order that keeps every
        # route's (a Runtime shared by routes comes after what comes before it in each), the
        # first declared first among those free to go.
        before: Dict[int, set] = {}
        for runtimes in self._routes.values():
            for i, runtime in enumerate(runtimes):
                before.setdefault(id(runtime), set()).update(id(r) for r in runtimes[:i])
        order: List[int] = []
        while len(order) < len(before):
            free = next((key for key, needs in before.items() if key not in order and needs <= set(order)), None)
            if free is None:
                raise ValueError("the routes take shared Runtimes in orders that contradict each other")
            order.append(free)
        return order

    def run(self) -> None:
        """Parses Mosec's flags and runs Shoal's front with these stages until it stops."""
        if not self._routes:
            raise RuntimeError("no worker: call append_worker() first")
        args, _unknown = _flags().parse_known_args()
        script = os.path.abspath(sys.modules["__main__"].__file__)
        # Mosec's answers, metric names and OpenAPI document (docs/python.md).
        compat = {"namespace": args.namespace, "openapi": openapi.document(self._routes, _version())}
        command = _shoal_command() + ["python", "--stages", json.dumps(self._stages(script, args.timeout)), "--mosec", json.dumps(compat)]
        command += ["--port", str(args.port), "--address", args.address, "--timeout", str(args.timeout), "--capacity", str(args.capacity), "--max-request-size", str(args.max_request_size)]
        command += ["--log-level", "debug" if args.debug else {"warning": "warn"}.get(args.log_level, args.log_level)]
        for _, proc in self._daemons:
            atexit.register(_end, proc)
        front = subprocess.Popen(command, cwd=os.path.dirname(script))
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda s, _f: front.send_signal(s))
        code = front.wait()
        for _, proc in self._daemons:
            _end(proc)
        sys.exit(code)


DEFAULT_WAIT_MS = 10
_RESERVED = ("/", "/metrics", "/openapi")


def _version() -> str:
    try:
        from importlib.metadata import version

        return version("shoal-worker")
    except Exception:
        return "unknown"


def _end(proc: Any) -> None:
    if hasattr(proc, "poll") and proc.poll() is None:
        proc.terminate()


def _flags() -> argparse.ArgumentParser:
    # The flags of Mosec's server that Shoal's front has.
    parser = argparse.ArgumentParser(description="A Mosec server, run on Shoal")
    parser.add_argument("--port", type=int, default=int(os.environ.get("MOSEC_PORT", 8000)))
    parser.add_argument("--address", default=os.environ.get("MOSEC_ADDRESS", "0.0.0.0"))
    parser.add_argument("--timeout", type=int, default=int(os.environ.get("MOSEC_TIMEOUT", 3000)), help="a request's time in ms")
    parser.add_argument("--capacity", type=int, default=int(os.environ.get("MOSEC_CAPACITY", 1024)), help="most items each stage may hold queued; more get 429")
    parser.add_argument("--max-request-size", type=int, default=int(os.environ.get("MOSEC_MAX_REQUEST_SIZE", 10 * 1024 * 1024)), help="largest request body in bytes; larger ones get 413")
    parser.add_argument("--namespace", default=os.environ.get("MOSEC_NAMESPACE", "mosec_service"), help="prefix of Mosec's metric names")
    # Shoal inflates gzip, deflate and zstd bodies, and compresses large answers, always.
    parser.add_argument("--compression", action="store_true")
    parser.add_argument("--debug", action="store_true")
    parser.add_argument("--log-level", default=os.environ.get("MOSEC_LOG_LEVEL", "info"), choices=["debug", "info", "warning", "warn", "error"])
    return parser


def _shoal_command() -> List[str]:
    """The ``shoal`` command: ``$SHOAL_CLI`` (a path to its main.js, run with node), or ``shoal`` on the PATH."""
    cli = os.environ.get("SHOAL_CLI")
    if cli:
        return [os.environ.get("SHOAL_NODE", "node"), cli] if cli.endswith(".js") else [cli]
    found = shutil.which("shoal")
    if found is None:
        raise RuntimeError("the shoal command is not on the PATH: install the npm package (npm i -g shoal), or set SHOAL_CLI to its dist/cli/main.js")
    return [found]


# The mixins of ``mosec.mixin``, here too (they build on Worker above).
from .mixin import MsgpackMixin, NumBinIPCMixin, TypedMsgPackMixin  # noqa: E402
from . import openapi  # noqa: E402

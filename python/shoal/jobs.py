"""The reader side of a Python worker, the same for a stage's worker and a model host: frames that
are work go to a queue in the order they came, flow control goes at once to the batch being
streamed, and a stop is answered at once (docs/protocol.md)."""

import os
import queue
import threading
from typing import Any, Dict, Iterable, Optional

from . import wire

#: Put on the queue after a stop: the worker ends once the work before it is done.
STOP = object()


class Flow:
    """The flow control of the batch being streamed: its seq, and each streamed item's state
    (``go``, ``pause`` or ``cancel``), under ``cond``, which is notified on every change."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.seq: Optional[int] = None
        self.states: Dict[int, str] = {}

    def begin(self, seq: int, indices: Iterable[int]) -> None:
        with self.cond:
            self.seq = seq
            self.states = {i: "go" for i in indices}

    def end(self) -> None:
        with self.cond:
            self.seq = None
            self.states = {}

    def apply(self, seq: int, body: Dict[str, Any]) -> None:
        with self.cond:
            index = body.get("index")
            if seq == self.seq and index in self.states and self.states[index] != "cancel":
                self.states[index] = {"pause": "pause", "resume": "go"}.get(body.get("action"), "cancel")
                self.cond.notify_all()


def read_jobs(connection: Any, jobs: "queue.Queue[Any]", flow: Flow, kinds: Iterable[str]) -> None:
    """The reader thread: frames of ``kinds`` to ``jobs`` as ``(kind, seq, body)``, ``flow`` frames
    to ``flow``, a ``stop`` answered with ``stopping`` and queued as STOP; any other frame breaks the
    protocol. The process exits once the coordinator has closed the connection."""
    kinds = set(kinds)
    while True:
        frame = connection.receive()
        if frame is None:
            # The coordinator is gone: so is this worker, whatever it is doing.
            os._exit(0)
        kind, seq, _flags, body = frame
        if kind in kinds:
            jobs.put((kind, seq, body))
        elif kind == "flow":
            flow.apply(seq, body)
        elif kind == "stop":
            connection.send("stopping", {})
            jobs.put(STOP)
        else:
            raise wire.ProtocolError(f"a {kind} frame for this worker")

"""The Worker a Python stage of Shoal runs: the same class you call offline."""

import json
import logging
import types
from typing import Any, Iterable, List, Optional

from .errors import DecodingError, EncodingError

LOGGER_NAME = "shoal.worker"


def get_logger() -> logging.Logger:
    """The worker's logger: its lines reach the server's log, labelled with the stage and worker
    id (as ``log`` frames), once the worker runs under Shoal; on stderr before that and offline."""
    return logging.getLogger(LOGGER_NAME)


class Worker:
    """A stage's work in Python. Override ``forward()``; load the model in ``__init__`` or ``init()``.

    With ``max_batch_size`` 1 (the stage's default) ``forward`` takes one item and returns its
    output; with ``max_batch_size`` > 1 it takes a list of 1..max_batch_size items and returns
    one output per item, in order: an output that is an exception fails only its item (a
    ``ValidationError`` is a 422, say), while an exception raised by ``forward`` fails the whole
    batch. A ``forward`` that returns a generator (or one generator per item) streams: each
    value it yields is one chunk, sent as it comes to a client that takes a stream.

    The first stage of a route decodes each request body with ``decode`` (JSON by default) and
    the last encodes each answer with ``encode`` (JSON by default, as ``content_type`` says);
    between stages, values travel in MessagePack, numpy arrays as raw bytes.
    """

    #: Content type of the bodies ``encode`` writes.
    content_type: str = "application/json"
    #: Inputs run through ``forward`` before the worker takes work (warm-up); a failure stops it,
    #: unless ``warm_up_required`` is False (then it is logged, and the worker starts).
    examples: List[Any] = []
    warm_up_required: bool = True

    #: Set by the server before ``init()``: the stage's largest batch, this worker's id (1..num),
    #: the stage's worker count and name.
    max_batch_size: int = 1
    worker_id: int = 0
    num: int = 1
    stage: str = ""

    def init(self) -> None:
        """Loads what the worker needs, once, before the warm-up; an exception stops the worker from starting."""

    def forward(self, data: Any) -> Any:
        """One item's output, or one output per item of a batch (``max_batch_size`` > 1)."""
        raise NotImplementedError(f"{type(self).__name__} has no forward()")

    def decode(self, payload: bytes, meta: dict) -> Any:
        """A request body to the item ``forward`` takes (first stage only). Raise DecodingError or ValidationError for a bad body."""
        try:
            return json.loads(payload)
        except (ValueError, UnicodeDecodeError) as err:
            raise DecodingError(f"the body is not JSON: {err}") from err

    def encode(self, output: Any, meta: dict) -> bytes:
        """An output (or one chunk of a stream) to response bytes (last stage only)."""
        if isinstance(output, (bytes, bytearray)):
            return bytes(output)
        try:
            return json.dumps(output, default=_plain).encode()
        except (TypeError, ValueError) as err:
            raise EncodingError(f"the output is not JSON: {err}") from err

    def from_stage(self, value: Any) -> Any:
        """The value the stage before sent (any stage but the first): as it came, by default."""
        return value

    def to_stage(self, output: Any) -> Any:
        """An output for the next stage (any stage but the last): as it is, by default, in MessagePack."""
        return output

    def response_type(self, meta: dict) -> Optional[str]:
        """The content type of one response, when it is not ``content_type``."""
        return None


def _plain(value: Any) -> Any:
    # numpy arrays and scalars, as JSON holds them.
    if hasattr(value, "tolist"):
        return value.tolist()
    raise TypeError(f"{type(value).__name__} is not JSON serializable")


def is_stream(value: Any) -> bool:
    """Whether a forward() output is a stream of chunks: a generator or another iterator."""
    return isinstance(value, types.GeneratorType) or (
        hasattr(value, "__next__") and hasattr(value, "__iter__") and not isinstance(value, (str, bytes, dict, list))
    )


def chunks_of(value: Iterable[Any]) -> List[Any]:
    """A stream's chunks gathered, for an item whose client takes one answer."""
    return list(value)

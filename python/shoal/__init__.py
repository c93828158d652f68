"""Python workers for Shoal: a Worker class with ``forward()``, served by Shoal's batching server."""

from .errors import BadRequestError, DecodingError, EncodingError, ServerError, ShoalError, ValidationError
from .runner import report_metrics
from .worker import Worker, get_logger

__all__ = [
    "Worker", "get_logger", "report_metrics",
    "ShoalError", "BadRequestError", "DecodingError", "ValidationError", "EncodingError", "ServerError",
]

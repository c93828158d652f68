"""Errors a worker raises, each with the code of Shoal's error table that sets its HTTP status."""


class ShoalError(Exception):
    """An error whose message the client may see. ``code`` picks the status (docs/protocol.md, section 5)."""

    code = "SERVER"
    #: An HTTP status of the runtime's choosing (an MLServer runtime's): the coordinator answers the row of it.
    status = None
    #: What a dialect answers in place of the message (FastAPI's ``detail`` list for MLServer's 422).
    detail = None

    def __init__(self, message: object = ""):
        # Mosec's code raises ValidationError(KeyError("x")): its text is the client's detail ('x').
        super().__init__(message)
        self.message = message if isinstance(message, str) else str(message)


class BadRequestError(ShoalError):
    """400: the client can fix the request."""

    code = "BAD_REQUEST"


class DecodingError(ShoalError):
    """400: the request body could not be decoded."""

    code = "DECODING"


class NotFoundError(ShoalError):
    """404: what the request names is not there."""

    code = "NOT_FOUND"


class ValidationError(ShoalError):
    """422: the input decoded but is invalid."""

    code = "VALIDATION"


class EncodingError(ShoalError):
    """500: the output could not be encoded."""

    code = "ENCODING"


class ServerError(ShoalError):
    """500 with a message the client sees."""

    code = "SERVER"


def to_wire(err: BaseException, code: str = "INTERNAL") -> dict:
    """The error map of the protocol: a ShoalError's code and message; anything else is ``code``
    (INTERNAL by default) with its traceback for the server's log only."""
    if isinstance(err, ShoalError):
        wire = {"code": err.code, "message": err.message}
        if err.status is not None:
            wire["status"] = err.status
        if err.detail is not None:
            wire["detail"] = err.detail
        return wire
    import traceback

    stack = "".join(traceback.format_exception(type(err), err, err.__traceback__))
    return {"code": code, "message": "", "stack": stack}


def named(err: BaseException) -> str:
    """An exception's text with its class, as MLServer's inference pool words one: ``builtins.Exception: bar``."""
    return f"{type(err).__module__}.{type(err).__name__}: {err}"

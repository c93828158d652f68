"""Mosec's errors (``mosec.errors``), as the SDK's: the same statuses and message prefixes."""

from .. import errors as _errors

__all__ = ["MosecError", "ClientError", "ValidationError", "DecodingError", "EncodingError", "ServerError"]

MosecError = _errors.ShoalError
ClientError = _errors.BadRequestError
ValidationError = _errors.ValidationError
DecodingError = _errors.DecodingError
EncodingError = _errors.EncodingError
ServerError = _errors.ServerError

"""Mosec's worker mixins (``mosec.mixin``) that matter on Shoal: MessagePack bodies, typed
MessagePack bodies checked against ``forward()``'s annotation, and numpy arrays between stages."""

from typing import Any

import msgpack as _msgpack

from .. import wire
from . import Worker
from .annotations import forward_type
from .errors import DecodingError, EncodingError, ValidationError

__all__ = ["MsgpackMixin", "TypedMsgPackMixin", "NumBinIPCMixin"]


class MsgpackMixin:
    """Request and response bodies in MessagePack."""

    req_mime_type = "application/msgpack"
    resp_mime_type = "application/msgpack"

    def serialize(self, data: Any) -> bytes:
        try:
            return _msgpack.packb(data, use_bin_type=True)
        except Exception as err:
            raise EncodingError(f"msgpack encode error: {err}") from err

    def deserialize(self, data: bytes) -> Any:
        try:
            return _msgpack.unpackb(data, raw=False)
        except Exception as err:
            raise DecodingError(f"msgpack decode error: {err}") from err


class TypedMsgPackMixin(Worker):
    """Request bodies in MessagePack decoded by msgspec into the type ``forward()`` is annotated
    with (one item's: ``List[T]`` is ``T`` when the stage batches), a body that does not fit it
    being a 422; answers encoded by msgspec. msgspec must be installed, as with Mosec."""

    req_mime_type = "application/msgpack"
    resp_mime_type = "application/msgpack"
    _input_type: Any = None

    def deserialize(self, data: bytes) -> Any:
        import msgspec

        if self._input_type is None:
            self._input_type = forward_type(type(self), batched=self.max_batch_size > 1)
        try:
            return msgspec.msgpack.decode(data, type=self._input_type)
        except msgspec.ValidationError as err:
            raise ValidationError(err) from err
        except msgspec.DecodeError as err:
            raise DecodingError(f"msgpack decode error: {err}") from err

    def serialize(self, data: Any) -> bytes:
        import msgspec

        try:
            return msgspec.msgpack.encode(data)
        except (TypeError, ValueError) as err:
            raise EncodingError(f"msgpack encode error: {err}") from err


class NumBinIPCMixin:
    """numpy arrays between stages as the SDK's wire carries them: their raw bytes, with their
    dtype and shape, arriving as read-only arrays over the bytes that came (Mosec's NumBin)."""

    def serialize_ipc(self, data: Any) -> bytes:
        try:
            return wire.pack(data)
        except (TypeError, ValueError) as err:
            raise EncodingError(f"numpy IPC encode error: {err}") from err

    def deserialize_ipc(self, data: bytes) -> Any:
        try:
            return wire.unpack(data)
        except Exception as err:
            raise DecodingError(f"numpy IPC decode error: {err}") from err

"""What a Mosec Worker's ``forward()`` is annotated to take and give, per item: read by the
typed mixin to decode bodies and by the OpenAPI document to describe them."""

import typing
from typing import Any


def forward_type(cls: type, batched: bool, returned: bool = False) -> Any:
    """The type of one item ``forward()`` takes (or, ``returned``, gives): its first parameter's
    annotation (its return's), ``T`` for ``List[T]`` when the stage batches; ``Any`` when none."""
    forward = getattr(cls, "forward")
    try:
        hints = typing.get_type_hints(forward)
    except Exception:  # an annotation that does not resolve describes nothing
        hints = {}
    if returned:
        kind = hints.get("return", Any)
    else:
        kind = next((v for k, v in hints.items() if k != "return"), Any)
    if batched and typing.get_origin(kind) in (list, typing.List):
        args = typing.get_args(kind)
        kind = args[0] if len(args) == 1 else Any
    return kind

"""What a step may return: JSON, within the payload cap. Both plain and atomic
steps check their result here before it is stored."""

from __future__ import annotations

from .. import conf
from ..errors import StepOutputInvalidError
from ..payload import NotJSON, check_json, encode


def check_output(name: str, value: object) -> None:
    """Refuse a step result that is not JSON or is over the payload cap."""
    try:
        check_json(value, f"step {name!r}")
    except NotJSON as error:
        raise StepOutputInvalidError(f"{error.path}: {error.reason}") from None
    encode(value, limit=conf.get().max_payload_bytes, what=f"the output of step {name!r}")

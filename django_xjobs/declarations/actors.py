"""``Actor``: who an enqueue is made on behalf of (SPEC ENQ-04). Attribution only: it grants
nothing, it is recorded on the row (``enqueued_by``, ``tenant_id``) for the run to read."""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from ..errors import InvariantError


@dataclass(frozen=True)
class Actor:
    """Someone a job is enqueued for: ``id`` becomes the row's ``enqueued_by``, ``tenant_id``
    its tenant::

        send_receipt.enqueue_as(Actor(id="user:42", tenant_id="acme"), order_id=7)
        send_receipt.enqueue_as(Actor.from_request(request, tenant_id=request.tenant), order_id=7)
    """

    id: str
    tenant_id: str | None = None

    def __post_init__(self) -> None:
        if not isinstance(self.id, str) or not self.id or "\x00" in self.id:
            raise InvariantError(
                f"Actor(id={self.id!r}) must be a non-empty string",
                hint='e.g. Actor(id="user:42"); Actor.from_user(user) builds one from a user',
            )
        if self.tenant_id is not None and (
            not isinstance(self.tenant_id, str) or not self.tenant_id or "\x00" in self.tenant_id
        ):
            raise InvariantError(
                f"Actor(tenant_id={self.tenant_id!r}) must be a non-empty string or None",
                hint="leave it None for an actor of no tenant",
            )

    @classmethod
    def from_user(cls, user: Any, *, tenant_id: str | None = None) -> Actor:
        """``user:<pk>`` for a Django user, ``anonymous`` for an anonymous one."""
        if user is None or not getattr(user, "is_authenticated", False) or user.pk is None:
            return cls(id="anonymous", tenant_id=tenant_id)
        return cls(id=f"user:{user.pk}", tenant_id=tenant_id)

    @classmethod
    def from_request(cls, request: object, *, tenant_id: str | None = None) -> Actor:
        """The actor of a web request: its user (``AuthenticationMiddleware`` sets it)."""
        return cls.from_user(getattr(request, "user", None), tenant_id=tenant_id)

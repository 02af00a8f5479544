"""``ctx.step`` for ``async def`` handlers: the same runner, with awaitable methods.

Bookkeeping touches the database, which Django refuses to do on an event loop's thread, so it
runs through ``sync_to_async``; the step's own function may be sync or async.
"""

from __future__ import annotations

import asyncio
import inspect
from collections.abc import Awaitable, Callable, Mapping, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast, overload

from asgiref.sync import sync_to_async

from ..durations import Duration, format_seconds
from ..errors import JobTimeoutError
from . import Steps, _takes_argument
from .atomic import AsyncAtomic, Atomic, acall

T = TypeVar("T")


class AsyncSteps:
    """Awaitable twins of ``Steps``::

        async def handler(ctx, url):
            body = await ctx.step.run("fetch", lambda: fetch(url))
            await ctx.step.sleep("cool-off", "1h")

    An ``async def`` handler's ``ctx.step`` is one of these.
    """

    def __init__(self, steps: Steps) -> None:
        self._steps = steps

    @property
    def used_names(self) -> list[str]:
        return self._steps.used_names

    @property
    def replayed_names(self) -> list[str]:
        return self._steps.replayed_names

    # an async fn first: its result is what its awaitable gives, not the awaitable
    @overload
    async def run(self, name: str, fn: Callable[..., Awaitable[T]]) -> T: ...

    @overload
    async def run(self, name: str, fn: Callable[..., T]) -> T: ...

    async def run(self, name: str, fn: Callable[..., Awaitable[T] | T]) -> T:
        steps = self._steps
        done, stored = await sync_to_async(steps.begin)(name)
        if done:
            # replayed: what fn returned on the run's first pass, stored as JSON
            return cast(T, stored)
        try:
            value = await self._call(name, fn)
        except BaseException as error:
            await sync_to_async(steps.fail)(name, error)
            raise
        return await sync_to_async(steps.finish)(name, value)

    async def _call(self, name: str, fn: Callable[..., Awaitable[T] | T]) -> T:
        steps = self._steps
        signal = steps.signal.child() if steps.step_timeout else steps.signal
        result = fn(signal) if _takes_argument(fn) else fn()
        if not inspect.isawaitable(result):
            return result
        if steps.step_timeout is None:
            return await result
        try:
            return await asyncio.wait_for(result, steps.step_timeout)
        except TimeoutError:
            error = JobTimeoutError(
                f"step {name!r} passed its step_timeout of {format_seconds(steps.step_timeout)}"
            )
            signal.abort(error)
            raise error from None

    @overload
    def atomic(self, name: str) -> AsyncAtomic: ...

    @overload
    def atomic(self, name: str, fn: Callable[[], Awaitable[T]]) -> Awaitable[T]: ...

    @overload
    def atomic(self, name: str, fn: Callable[[], T]) -> Awaitable[T]: ...

    def atomic(
        self, name: str, fn: Callable[[], Awaitable[T] | T] | None = None
    ) -> AsyncAtomic | Awaitable[T]:
        """``async with ctx.step.atomic(name) as step:``, or ``await ctx.step.atomic(name, fn)``
        (``fn`` sync or async): the async forms of ``Steps.atomic``."""
        block = AsyncAtomic(Atomic(self._steps, name))
        return block if fn is None else acall(block, fn)

    async def patched(self, name: str) -> bool:
        """``Steps.patched`` for an ``async def`` handler: ``await ctx.step.patched(name)``."""
        return await sync_to_async(self._steps.patched)(name)

    async def sleep(self, name: str | Duration, duration: Duration | None = None) -> None:
        await sync_to_async(self._steps.sleep)(name, duration)

    async def sleep_until(self, name: str, when: datetime) -> None:
        await sync_to_async(self._steps.sleep_until)(name, when)

    async def wait_for_event(self, name: str, event: str, **options: Any) -> Any:
        return await sync_to_async(self._steps.wait_for_event)(name, event, **options)

    async def call(
        self, handle: object, input: Mapping[str, object] | None = None, **options: Any
    ) -> Any:
        return await sync_to_async(self._steps.call)(handle, input, **options)

    async def call_many(
        self, handle: object, inputs: Sequence[Mapping[str, object]], **options: Any
    ) -> Any:
        return await sync_to_async(self._steps.call_many)(handle, inputs, **options)

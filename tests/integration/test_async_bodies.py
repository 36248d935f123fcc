"""Workflow bodies stay synchronous: async code in a workflow is refused, clearly."""

from __future__ import annotations

import asyncio
from collections.abc import Coroutine
from typing import Any

import pytest

import durable_workflow as dw
from durable_workflow import AsyncWorkflowCodeError, Workflow, WorkflowParkedError, WorkflowStub

pytestmark = pytest.mark.django_db(transaction=True)


class LoopInBody(Workflow):
    type_key = "tests.async-body.loop"
    unsafe_calls = "allow"  # let the loop start, to reach the durable helper

    def handle(self) -> int:
        async def nap() -> int:
            dw.timer(1)
            return 1

        return asyncio.run(nap())


class CoroutineDrivenByHand(Workflow):
    type_key = "tests.async-body.send"

    def handle(self) -> Any:
        async def now() -> Any:
            return dw.now()

        coroutine = now()
        try:
            coroutine.send(None)
        finally:
            coroutine.close()


class SyncHelperUnderALoop(Workflow):
    type_key = "tests.async-body.callback"
    unsafe_calls = "allow"

    def handle(self) -> Any:
        loop = asyncio.new_event_loop()
        try:
            return loop.run_until_complete(_call_soon(loop))
        finally:
            loop.close()


async def _call_soon(loop: asyncio.AbstractEventLoop) -> Any:
    done: asyncio.Future[Any] = loop.create_future()

    def callback() -> None:  # plain `def`, but the event loop is running
        try:
            done.set_result(dw.uuid4())
        except BaseException as exc:
            done.set_exception(exc)

    loop.call_soon(callback)
    return await done


class AwaitableFromHandle(Workflow):
    type_key = "tests.async-body.returns-coroutine"

    def handle(self) -> Coroutine[Any, Any, int]:
        return self._later()

    async def _later(self) -> int:
        return 1


def parked_failure(type_key: str, instance_id: str, inline: Any) -> WorkflowParkedError:
    stub = WorkflowStub.make(type_key, instance_id)
    stub.start()
    inline.run()
    with pytest.raises(WorkflowParkedError) as parked:
        stub.result(timeout=0)
    return parked.value


@pytest.mark.parametrize(
    ("type_key", "says"),
    [
        ("tests.async-body.loop", "durable_workflow.timer() was called from `async def nap`"),
        ("tests.async-body.send", "durable_workflow.now() was called from `async def now`"),
        ("tests.async-body.callback", "durable_workflow.uuid4() was called while an event loop"),
        ("tests.async-body.returns-coroutine", "handle() returned an awaitable"),
    ],
)
def test_async_code_in_a_body_fails_the_task_with_a_clear_error(inline, type_key, says):
    failure = parked_failure(type_key, type_key.rsplit(".", 1)[1], inline)
    assert failure.exception_type.endswith("AsyncWorkflowCodeError")
    assert says in failure.message
    assert "synchronous greenlets" in failure.message and "activity" in failure.message


def test_an_async_handle_is_refused_when_the_class_is_defined():
    with pytest.raises(AsyncWorkflowCodeError, match=r"AsyncHandle.handle\(\) is `async def`"):

        class AsyncHandle(Workflow):
            type_key = "tests.async-body.refused"

            async def handle(self) -> int:
                return 1

    from durable_workflow import registry

    with pytest.raises(LookupError):
        registry.workflow_class("tests.async-body.refused")


def test_an_async_generator_handle_is_refused_too():
    with pytest.raises(AsyncWorkflowCodeError, match="is `async def`"):

        class AsyncGeneratorHandle(Workflow):
            async def handle(self) -> Any:
                yield 1


@pytest.mark.parametrize("decorator", [dw.signal("s"), dw.query("q"), dw.update("u")])
def test_async_handlers_are_refused_when_decorated(decorator):
    with pytest.raises(AsyncWorkflowCodeError, match=r"@dw\.\w+ .*on_message is `async def`"):

        async def on_message(self: Any) -> None:
            return None

        decorator(on_message)


def test_bare_decorators_and_validators_refuse_async_too():
    with pytest.raises(AsyncWorkflowCodeError, match="is `async def`"):

        @dw.query
        async def bare(self: Any) -> int:
            return 1

    @dw.update("checked")
    def checked(self: Any, value: int) -> int:
        return value

    with pytest.raises(AsyncWorkflowCodeError, match="the validator of update 'checked'"):

        @checked.validator
        async def validate(self: Any, value: int) -> None:
            return None

"""The Agent Protocol's part of the supervisor's lifecycle: records, the run worker, the manager."""
from __future__ import annotations

from contextlib import AsyncExitStack

from ..settings import SupervisorSettings
from .runs import RunManager, RunWorker
from .store import RunStore


async def open_agent_protocol(stack: AsyncExitStack, service, graph, asker, settings: SupervisorSettings) -> RunManager:
    store = await RunStore.open(service.bus.jetstream)
    worker = RunWorker(service.bus, store, asker, instance=service.instance, max_concurrent=settings.max_concurrent_runs, ack_wait_s=settings.run_ack_wait_s)
    await worker.start()
    stack.push_async_callback(worker.stop)  # before the bus closes: unwound first
    return RunManager(service.bus, store, graph, run_deadline_s=asker.total_timeout_s + settings.run_ack_wait_s * 2, max_question_chars=settings.max_question_chars)

"""Async views that drive a workflow through the awaitable client (no sync_to_async)."""

from __future__ import annotations

import json

from django.http import HttpRequest, JsonResponse

from durable_workflow import WorkflowStub
from durable_workflow.visibility import alist_runs


async def start(request: HttpRequest, instance_id: str) -> JsonResponse:
    stub = await WorkflowStub.amake("tests.async-tally", instance_id)
    started = await stub.astart(int(request.GET.get("from", "0")))
    return JsonResponse({"run_id": started.run_id, "status": stub.status()})


async def add(request: HttpRequest, instance_id: str) -> JsonResponse:
    stub = await WorkflowStub.aload(instance_id)
    amount = json.loads(request.body)["amount"]
    return JsonResponse({"total": await stub.aupdate("add", amount, wait_timeout=90)})


async def total(request: HttpRequest, instance_id: str) -> JsonResponse:
    stub = await WorkflowStub.aload(instance_id)
    return JsonResponse({"total": await stub.aquery("total")})


async def close(request: HttpRequest, instance_id: str) -> JsonResponse:
    stub = await WorkflowStub.aload(instance_id)
    sent = await stub.asignal("close")
    return JsonResponse({"accepted": sent.accepted})


async def result(request: HttpRequest, instance_id: str) -> JsonResponse:
    stub = await WorkflowStub.aload(instance_id)
    output = await stub.aresult(timeout=float(request.GET.get("timeout", "60")))
    description = await stub.adescribe()
    return JsonResponse({"output": output, "status": description.status})


async def runs(request: HttpRequest) -> JsonResponse:
    found = await alist_runs(workflow_type="tests.async-tally")
    return JsonResponse({"instances": sorted(run.instance_id for run in found)})

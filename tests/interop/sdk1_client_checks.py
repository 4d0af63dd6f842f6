#!/usr/bin/env python3
"""Drives an agentry A2A server with the official Python SDK client, a2a-sdk 1.x (protocol 1.0).

    python sdk1_client_checks.py BASE_URL [--token TOKEN] [--binding jsonrpc|rest|grpc]

The server must run the `conformance` agent with push notifications to loopback allowed and an
extended card behind TOKEN. The card is read by the SDK's own resolver and the transport chosen
by its own ClientFactory (which must pick the v1.0 JSON-RPC transport, not the 0.3 compat one);
every answer is parsed into the SDK's protobuf types, so a field it cannot read fails the check.
With `--binding grpc` the SDK's gRPC transport (grpcio, `a2a-sdk[grpc]`) dials the card's GRPC
interface: the same checks, over protobuf and HTTP/2.
Prints one line per check and "N passed, M failed"; exits non-zero on any failure.
"""

import argparse
import asyncio
import json
import sys
import threading
import uuid
from http.server import BaseHTTPRequestHandler, HTTPServer

import httpx
from google.protobuf.json_format import ParseDict
from a2a.client import A2ACardResolver, ClientCallContext, ClientConfig, ClientFactory
from a2a.client.transports.jsonrpc import JsonRpcTransport
from a2a.client.transports.rest import RestTransport
from a2a.types import (
    CancelTaskRequest,
    DeleteTaskPushNotificationConfigRequest,
    GetExtendedAgentCardRequest,
    GetTaskPushNotificationConfigRequest,
    GetTaskRequest,
    ListTaskPushNotificationConfigsRequest,
    ListTasksRequest,
    Message,
    Part,
    Role,
    SendMessageConfiguration,
    SendMessageRequest,
    StreamResponse,
    SubscribeToTaskRequest,
    TaskNotCancelableError,
    TaskNotFoundError,
    TaskPushNotificationConfig,
    TaskState,
    UnsupportedOperationError,
)

RESULTS: list[tuple[str, bool, str]] = []


class Webhook(BaseHTTPRequestHandler):
    received: list[tuple[dict, dict]] = []

    def do_POST(self):  # noqa: N802
        n = int(self.headers.get("content-length", "0"))
        body = json.loads(self.rfile.read(n) or b"{}")
        Webhook.received.append((dict(self.headers), body))
        self.send_response(200)
        self.end_headers()

    def log_message(self, *a):
        pass


def start_webhook() -> str:
    srv = HTTPServer(("127.0.0.1", 0), Webhook)
    threading.Thread(target=srv.serve_forever, daemon=True).start()
    return f"http://127.0.0.1:{srv.server_address[1]}/hook"


def msg(text: str, mid: str | None = None, task_id: str = "", context_id: str = "") -> Message:
    return Message(
        role=Role.ROLE_USER,
        parts=[Part(text=text)],
        message_id=mid or str(uuid.uuid4()),
        task_id=task_id,
        context_id=context_id,
    )


async def check(name, coro):
    print(f"... {name}", file=sys.stderr, flush=True)
    try:
        await asyncio.wait_for(coro, 60)
        RESULTS.append((name, True, ""))
    except Exception as e:  # noqa: BLE001
        RESULTS.append((name, False, f"{type(e).__name__}: {e}"))


def expect(cond, what):
    if not cond:
        raise AssertionError(what)


async def expect_error(coro, cls):
    try:
        await coro
    except cls:
        return
    except Exception as e:  # noqa: BLE001
        raise AssertionError(f"expected {cls.__name__}, got {type(e).__name__}: {e}") from e
    raise AssertionError(f"expected {cls.__name__}, got success")


async def rpc(http, url, method, params, headers=None):
    r = await http.post(
        url,
        headers={"A2A-Version": "1.0", **(headers or {})},
        json={"jsonrpc": "2.0", "id": str(uuid.uuid4()), "method": method, "params": params},
    )
    return r


async def main(base: str, token: str | None, binding: str) -> int:
    hook = start_webhook()
    wanted = {"jsonrpc": "JSONRPC", "rest": "HTTP+JSON", "grpc": "GRPC"}[binding]
    if binding == "grpc":
        import grpc
        from a2a.client.transports.grpc import GrpcTransport

        transport = GrpcTransport
    else:
        transport = {"jsonrpc": JsonRpcTransport, "rest": RestTransport}[binding]
    async with httpx.AsyncClient(timeout=30) as http:
        card = await A2ACardResolver(http, base).get_agent_card()
        iface = next(
            i
            for i in card.supported_interfaces
            if i.protocol_version.startswith("1.") and i.protocol_binding == wanted
        )
        rpc_url = next(i.url for i in card.supported_interfaces if i.protocol_binding == "JSONRPC")
        if binding == "grpc":
            t = GrpcTransport(grpc.aio.insecure_channel(iface.url), card)
        else:
            t = transport(http, card, iface.url)

        async def card_check():
            expect(card.name == "conformance", f"card name {card.name}")
            expect(card.capabilities.streaming, "streaming capability")
            expect(card.capabilities.extended_agent_card, "extendedAgentCard capability")
            factory = ClientFactory(
                ClientConfig(
                    httpx_client=http,
                    streaming=True,
                    supported_protocol_bindings=[wanted],
                    grpc_channel_factory=grpc.aio.insecure_channel if binding == "grpc" else None,
                )
            )
            client = factory.create(card)
            kind = type(client._transport).__module__ + "." + type(client._transport).__name__
            want = f"{transport.__module__}.{transport.__name__}"
            expect(kind == want, f"factory picked {kind}, not {want}")

        await check(f"card read by the 1.x resolver; factory picks {wanted} 1.0", card_check())

        state = {}

        async def send_blocking():
            r = await t.send_message(SendMessageRequest(message=msg("hello sdk1")))
            expect(r.HasField("task"), f"expected a task, got {r}")
            task = r.task
            expect(task.status.state == TaskState.TASK_STATE_WORKING, f"state {task.status.state}")
            expect(task.artifacts[0].parts[0].text == "hello sdk1", "echo artifact")
            expect(task.status.timestamp.seconds > 0, "status timestamp")
            state["task"] = task

        await check("SendMessage blocking -> working (turn over, task open)", send_blocking())

        async def follow_up():
            task = state["task"]
            r = await t.send_message(
                SendMessageRequest(message=msg("second turn", task_id=task.id, context_id=task.context_id))
            )
            expect(r.task.id == task.id, "same task")
            texts = [p.text for m in r.task.history for p in m.parts]
            expect(texts == ["hello sdk1", "echo: hello sdk1", "second turn", "echo: second turn"], f"history {texts}")

        await check("multi-turn keeps history", follow_up())

        async def history_length():
            r = await t.get_task(GetTaskRequest(id=state["task"].id, history_length=1))
            expect(len(r.history) == 1 and r.history[0].parts[0].text == "echo: second turn", f"history {r.history}")

        await check("GetTask historyLength", history_length())

        async def complete():
            r = await t.send_message(
                SendMessageRequest(message=msg("hi", mid=f"tck-complete-task-{uuid.uuid4().hex[:8]}"))
            )
            expect(r.task.status.state == TaskState.TASK_STATE_COMPLETED, f"{r}")
            expect(r.task.status.message.parts[0].text == "Hello from TCK", "status message")
            expect(r.task.status.message.role == Role.ROLE_AGENT, "agent role")
            await expect_error(
                t.send_message(
                    SendMessageRequest(message=msg("more", task_id=r.task.id, context_id=r.task.context_id))
                ),
                UnsupportedOperationError,
            )
            await expect_error(t.cancel_task(CancelTaskRequest(id=r.task.id)), TaskNotCancelableError)

        await check("completed task: no more messages, not cancelable", complete())

        async def artifacts():
            r = await t.send_message(SendMessageRequest(message=msg("f", mid="tck-artifact-file-1")))
            p = r.task.artifacts[0].parts[0]
            expect(p.raw == b"tck" and p.filename == "output.txt" and p.media_type == "text/plain", f"{p}")
            r = await t.send_message(SendMessageRequest(message=msg("u", mid="tck-artifact-file-url-1")))
            p = r.task.artifacts[0].parts[0]
            expect(p.url == "https://example.com/output.txt", f"{p}")
            r = await t.send_message(SendMessageRequest(message=msg("d", mid="tck-artifact-data-1")))
            d = r.task.artifacts[0].parts[0].data
            expect(d.struct_value["key"] == "value" and d.struct_value["count"] == 42, f"{d}")

        await check("raw, url and data parts", artifacts())

        async def direct_message():
            r = await t.send_message(SendMessageRequest(message=msg("hi", mid="tck-message-response-1")))
            expect(r.HasField("message") and r.message.parts[0].text == "Direct message response", f"{r}")

        await check("direct message response", direct_message())

        async def stream():
            kinds = []
            async for ev in t.send_message_streaming(SendMessageRequest(message=msg("s", mid="tck-stream-001-x"))):
                which = ev.WhichOneof("payload")
                if which == "status_update":
                    which += ":" + TaskState.Name(ev.status_update.status.state)
                kinds.append(which)
            want = ["task", "status_update:TASK_STATE_WORKING", "artifact_update",
                    "status_update:TASK_STATE_COMPLETED"]
            expect(kinds == want, f"{kinds}")

        await check("SendStreamingMessage event order", stream())

        async def subscribe_and_cancel():
            r = await t.send_message(
                SendMessageRequest(
                    message=msg("hi", mid="test-resubscribe-message-id-1"),
                    configuration=SendMessageConfiguration(return_immediately=True),
                )
            )
            task = r.task
            expect(task.status.state in (TaskState.TASK_STATE_SUBMITTED, TaskState.TASK_STATE_WORKING),
                   f"returnImmediately: {task.status}")
            events = []
            async for ev in t.subscribe(SubscribeToTaskRequest(id=task.id)):
                events.append(ev)
                if len(events) == 3:
                    c = await t.cancel_task(CancelTaskRequest(id=task.id))
                    expect(c.status.state == TaskState.TASK_STATE_CANCELED, "canceled")
            expect(events[0].WhichOneof("payload") == "task", f"first event {events[0]}")
            expect(any(e.WhichOneof("payload") == "artifact_update" for e in events), "artifact chunks")
            last = events[-1]
            expect(last.status_update.status.state == TaskState.TASK_STATE_CANCELED, f"last {last}")

        await check("returnImmediately, SubscribeToTask, CancelTask", subscribe_and_cancel())

        async def unknown():
            await expect_error(t.get_task(GetTaskRequest(id="no-such-task")), TaskNotFoundError)
            await expect_error(t.cancel_task(CancelTaskRequest(id="no-such-task")), TaskNotFoundError)

        await check("unknown task: TaskNotFoundError", unknown())

        async def listing():
            ctx = str(uuid.uuid4())
            ids = []
            for i in range(3):
                r = await t.send_message(SendMessageRequest(message=msg(f"list {i}", context_id=ctx)))
                ids.append(r.task.id)
            page = await t.list_tasks(ListTasksRequest(context_id=ctx, page_size=2))
            expect([x.id for x in page.tasks] == ids[::-1][:2], f"first page {[x.id for x in page.tasks]}")
            expect(page.total_size == 3 and page.next_page_token, f"{page.total_size} {page.next_page_token!r}")
            rest = await t.list_tasks(ListTasksRequest(context_id=ctx, page_size=2, page_token=page.next_page_token))
            expect([x.id for x in rest.tasks] == ids[:1] and not rest.next_page_token, f"second page {rest}")
            done = await t.list_tasks(ListTasksRequest(context_id=ctx, status=TaskState.TASK_STATE_COMPLETED))
            expect(len(done.tasks) == 0, "no completed task in this context")

        await check("ListTasks by context, pages, status filter", listing())

        async def push():
            r = await t.send_message(SendMessageRequest(message=msg("push me")))
            task = r.task
            s = await t.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, id="hook1", url=hook, token="tok-1")
            )
            expect(s.url == hook and s.id == "hook1", f"create echoes config: {s}")
            await t.create_task_push_notification_config(
                TaskPushNotificationConfig(task_id=task.id, id="hook2", url=hook, token="tok-2")
            )
            g = await t.get_task_push_notification_config(GetTaskPushNotificationConfigRequest(task_id=task.id, id="hook1"))
            expect(g.token == "tok-1", f"get {g}")
            lst = await t.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
            expect(len(lst.configs) == 2, f"list {lst}")
            await t.delete_task_push_notification_config(
                DeleteTaskPushNotificationConfigRequest(task_id=task.id, id="hook2")
            )
            lst = await t.list_task_push_notification_configs(ListTaskPushNotificationConfigsRequest(task_id=task.id))
            expect(len(lst.configs) == 1, "one left after delete")
            Webhook.received.clear()
            await t.send_message(SendMessageRequest(message=msg("again", task_id=task.id, context_id=task.context_id)))
            for _ in range(50):
                if Webhook.received:
                    break
                await asyncio.sleep(0.1)
            expect(Webhook.received, "webhook received nothing")
            # A config made over 1.0 gets 1.0 bodies: a StreamResponse, read by the SDK's types.
            headers, body = Webhook.received[-1]
            event = ParseDict(body, StreamResponse())
            expect(event.WhichOneof("payload") == "task" and event.task.id == task.id, f"body {body}")
            tok = {k.lower(): v for k, v in headers.items()}.get("x-a2a-notification-token")
            expect(tok == "tok-1", f"token header {tok}")

        await check("push configs create/get/list/delete and delivery", push())

        async def extended():
            r = (await rpc(http, rpc_url, "GetExtendedAgentCard", {})).json()
            expect("error" in r, f"no credentials must fail: {r}")
            if binding == "grpc":
                # Credentials are gRPC metadata; without them the call is refused.
                try:
                    await t.get_extended_agent_card(GetExtendedAgentCardRequest())
                    raise AssertionError("the extended card over gRPC without credentials")
                except AssertionError:
                    raise
                except Exception as e:  # noqa: BLE001
                    expect("UNAUTHENTICATED" in str(e), f"refused as {e}")
                ctx = ClientCallContext(service_parameters={"Authorization": f"Bearer {token}"})
                ext = await t.get_extended_agent_card(GetExtendedAgentCardRequest(), context=ctx)
            else:
                authed = transport(
                    httpx.AsyncClient(timeout=30, headers={"Authorization": f"Bearer {token}"}), card, iface.url
                )
                ext = await authed.get_extended_agent_card(GetExtendedAgentCardRequest())
            expect(ext.name, f"{ext}")

        await check("GetExtendedAgentCard needs credentials", extended())

        async def version_errors():
            r = await rpc(http, rpc_url, "GetTask", {"id": "x"}, headers={"A2A-Version": "99.0"})
            body = r.json()
            expect(body["error"]["code"] == -32009 and r.status_code == 400, f"{r.status_code} {body}")
            expect(body["error"]["data"][0]["reason"] == "VERSION_NOT_SUPPORTED", f"{body}")
            r = await rpc(http, rpc_url, "message/send", {}, headers={"A2A-Version": "1.0"})
            expect(r.json()["error"]["code"] == -32601, f"{r.text}")
            bad = await rpc(http, rpc_url, "SendMessage",
                            {"message": {"role": "ROLE_USER", "messageId": "x", "parts": []}})
            expect(bad.json()["error"]["code"] == -32602, f"{bad.text}")
            if binding == "rest":
                r = await http.get(iface.url.rstrip("/") + "/tasks/no-such-task")
                err = r.json()["error"]
                expect(r.status_code == 404 and err["status"] == "NOT_FOUND", f"{r.status_code} {r.text}")
                expect(err["details"][0]["reason"] == "TASK_NOT_FOUND", f"{r.text}")

        await check("A2A-Version 99.0 -> -32009 (HTTP 400); bad params -> -32602", version_errors())

    failed = 0
    for name, ok, why in RESULTS:
        print(("PASS " if ok else "FAIL ") + name + ("" if ok else f": {why}"))
        failed += 0 if ok else 1
    print(f"sdk1 client checks ({wanted}): {len(RESULTS) - failed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    ap = argparse.ArgumentParser()
    ap.add_argument("base")
    ap.add_argument("--token")
    ap.add_argument("--binding", choices=["jsonrpc", "rest", "grpc"], default="jsonrpc")
    a = ap.parse_args()
    sys.exit(asyncio.run(main(a.base, a.token, a.binding)))

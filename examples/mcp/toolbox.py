"""A small MCP server (the official Python SDK, `mcp` 2.x) for agentwire's
example agent and its MCP tests.

    python toolbox.py                        # stdio
    python toolbox.py http 127.0.0.1 8931    # Streamable HTTP at http://127.0.0.1:8931/mcp
    MCP_REQUIRE_TOKEN=a,b python toolbox.py http ...   # 401 unless "Authorization: Bearer a" (or b)

Tools: add, echo, slow_count (reports progress), fail (an isError result),
add_tool (registers a tool and sends notifications/tools/list_changed),
crash (the process exits mid-call), whoami (the Authorization header seen,
over HTTP), trace_context (the `traceparent` of the call: its HTTP header
and its `_meta`'s), picture (an image and a text block), hang (never answers),
wait_for_cancel (writes a file when the client cancels it), environment (the
names of the process's environment variables, and the values of those asked),
research (marked `execution.taskSupport: "required"`: a client that does not
run tasks must leave it out), freeze (stops the process with SIGSTOP: it
answers nothing more, not even a ping). The server sends `instructions` at
initialize.

    MCP_UNKNOWN_SESSION=400 python toolbox.py http ...   # an unknown session id gets
        400 (as the reference TypeScript server answers it) instead of 404
"""

import json
import os
import signal
import sys

import anyio
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ImageContent, TextContent, ToolExecution

INSTRUCTIONS = "Toolbox rules: add numbers with add; never guess a sum."

mcp = MCPServer("agentwire-toolbox", version="0.1.0", instructions=INSTRUCTIONS)


@mcp.tool(description="Add two numbers")
def add(a: float, b: float) -> str:
    return str(a + b)


@mcp.tool(description="Echo the text back")
def echo(text: str) -> str:
    return text


@mcp.tool(description="Count to n, reporting progress after each step")
async def slow_count(n: int, ctx: Context, delay: float = 0.05) -> str:
    for i in range(1, n + 1):
        await anyio.sleep(delay)
        await ctx.report_progress(i, total=n, message=f"step {i}/{n}")
    return f"counted {n}"


@mcp.tool(description="Always fails: the result has isError")
def fail(message: str = "boom") -> str:
    raise ToolError(message)


@mcp.tool(description="Register a new tool and say the tool list changed")
async def add_tool(name: str, ctx: Context) -> str:
    def dynamic() -> str:
        return f"hello from {name}"

    mcp.add_tool(dynamic, name=name, description=f"added at run time: {name}")
    await ctx.session.send_tool_list_changed()
    return f"added {name}"


@mcp.tool(description="Exit the server process in the middle of the call")
async def crash() -> str:
    await anyio.sleep(0.05)
    os._exit(3)


@mcp.tool(description="Never answers")
async def hang() -> str:
    await anyio.sleep(3600)
    return "woke up"


@mcp.tool(description="Waits until cancelled, then writes `cancelled` to the file `marker`")
async def wait_for_cancel(marker: str, ctx: Context) -> str:
    await ctx.report_progress(0, total=1, message="waiting to be cancelled")
    try:
        await anyio.sleep(3600)
    except anyio.get_cancelled_exc_class():
        with open(marker, "w") as f:
            f.write("cancelled")
        raise
    return "not cancelled"


@mcp.tool(description="The Authorization header the server saw (HTTP)")
def whoami(ctx: Context) -> str:
    headers = ctx.headers or {}
    return headers.get("authorization", "<none>")


@mcp.tool(description="The trace context of this call: the traceparent header (HTTP) and the one in _meta")
def trace_context(ctx: Context) -> str:
    headers = ctx.headers or {}
    params = ctx.request_context.params or {}
    meta = params.get("_meta") or {}
    return json.dumps({"header": headers.get("traceparent"), "meta": meta.get("traceparent")})


@mcp.tool(description="A one-pixel picture, with a caption")
def picture() -> list:
    png = "iVBORw0KGgoAAAANSUhEUgAAAAEAAAABCAYAAAAfFcSJAAAADUlEQVR42mP8/5+hHgAHggJ/PchI7wAAAABJRU5ErkJggg=="
    return [ImageContent(type="image", data=png, mimeType="image/png"),
            TextContent(type="text", text="a red pixel")]


@mcp.tool(description="The names of this process's environment variables, and the values of `names`")
def environment(names: list[str]) -> str:
    return json.dumps({"keys": sorted(os.environ), "values": {n: os.environ.get(n) for n in names}})


@mcp.tool(description="Stop this process (SIGSTOP): it answers nothing more")
def freeze() -> str:
    os.kill(os.getpid(), signal.SIGSTOP)
    return "thawed"


@mcp.tool(description="A long research job, run only as a task")
def research(query: str) -> str:
    return f"researched {query}"


_list_tools = mcp.list_tools


async def list_tools_marking_tasks():
    tools = await _list_tools()
    for tool in tools:
        if tool.name == "research":
            tool.execution = ToolExecution(task_support="required")
    return tools


mcp.list_tools = list_tools_marking_tasks


def answer_unknown_sessions_with_400(app):
    """Answers a request naming a session this process never issued with 400
    and a JSON-RPC error, as the reference TypeScript server does."""
    issued = set()

    async def wrapped(scope, receive, send):
        if scope["type"] != "http":
            await app(scope, receive, send)
            return
        session = dict(scope["headers"]).get(b"mcp-session-id")
        if session is not None and session not in issued:
            body = b""
            while True:
                message = await receive()
                body += message.get("body", b"")
                if not message.get("more_body"):
                    break
            try:
                request_id = json.loads(body).get("id") if body else None
            except ValueError:
                request_id = None
            error = {"jsonrpc": "2.0", "id": request_id,
                     "error": {"code": -32000, "message": "Bad Request: No valid session ID provided"}}
            await send({"type": "http.response.start", "status": 400,
                        "headers": [(b"content-type", b"application/json")]})
            await send({"type": "http.response.body", "body": json.dumps(error).encode()})
            return

        async def noting(message):
            if message["type"] == "http.response.start":
                for name, value in message.get("headers", []):
                    if name.lower() == b"mcp-session-id":
                        issued.add(value)
            await send(message)

        await app(scope, receive, noting)

    return wrapped


def main() -> None:
    args = sys.argv[1:]
    if not args or args[0] == "stdio":
        mcp.run("stdio")
        return
    host = args[1] if len(args) > 1 else "127.0.0.1"
    port = int(args[2]) if len(args) > 2 else 8931
    tokens = [t for t in os.environ.get("MCP_REQUIRE_TOKEN", "").split(",") if t]
    unknown_session = os.environ.get("MCP_UNKNOWN_SESSION", "404")
    if not tokens and unknown_session == "404":
        mcp.run("streamable-http", host=host, port=port)
        return
    import uvicorn

    app = mcp.streamable_http_app(host=host)
    if unknown_session == "400":
        app = answer_unknown_sessions_with_400(app)

    async def guarded(scope, receive, send):
        if scope["type"] == "http" and tokens:
            auth = dict(scope["headers"]).get(b"authorization", b"").decode()
            if auth not in [f"Bearer {t}" for t in tokens]:
                await send({"type": "http.response.start", "status": 401,
                            "headers": [(b"www-authenticate", b'Bearer realm="toolbox"')]})
                await send({"type": "http.response.body", "body": b"unauthorized"})
                return
        await app(scope, receive, send)

    uvicorn.run(guarded, host=host, port=port, log_level="warning")


if __name__ == "__main__":
    main()

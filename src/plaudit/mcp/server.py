"""plaudit as an MCP server, on the official `mcp` SDK's low-level `Server`.

The low-level server rather than `MCPServer`: the tools' schemas and one-line errors are
plaudit's own (`plaudit.mcp.tools`), where the decorator layer would derive schemas from
Python signatures and report bad arguments as multi-line pydantic errors prefixed with the
tool's name.

Tool calls run the (synchronous) library in a worker thread, under the call's trace context:
the `traceparent` argument, else the request's `_meta.traceparent` (which MCP clients
instrumented with OpenTelemetry send), else the HTTP request's `traceparent` header.
"""

from __future__ import annotations

import functools
import logging
from typing import TYPE_CHECKING, Any

import anyio
import msgspec
from mcp.server.lowlevel import Server
from mcp.shared.exceptions import MCPError
from mcp_types import (
    INVALID_PARAMS,
    CallToolRequestParams,
    CallToolResult,
    ListResourcesResult,
    ListResourceTemplatesResult,
    ListToolsResult,
    PaginatedRequestParams,
    ReadResourceRequestParams,
    ReadResourceResult,
    Resource,
    ResourceTemplate,
    TextContent,
    TextResourceContents,
    Tool,
    ToolAnnotations,
)

from plaudit import __version__
from plaudit.errors import PlauditError, ValidationError
from plaudit.mcp import tools
from plaudit.tracecontext import TraceContext, parse_traceparent, trace_context

if TYPE_CHECKING:
    from mcp.server.context import ServerRequestContext

    from plaudit.core import Plaudit

log = logging.getLogger("plaudit.mcp")

INSTRUCTIONS = (
    "plaudit gives an agent reinforcement feedback. Before a run, call choose_context with the "
    "candidate prompt components and a token budget, and include only the ids it returns; "
    "after the run, call report_run with its run_id, the output text and the tool calls. "
    "Record rewards and penalties with record_reward; read the score with read_score."
)
INTERNAL = "error: internal error; the server's log has the details"


def _json(value: Any) -> str:
    return msgspec.json.encode(value).decode()


def _tool_list() -> list[Tool]:
    return [
        Tool(
            name=t.name,
            description=t.description,
            input_schema=t.schema,
            annotations=ToolAnnotations(
                read_only_hint=not t.writes,
                destructive_hint=False,
                idempotent_hint=not t.writes,
                open_world_hint=False,
            ),
        )
        for t in tools.TOOLS.values()
    ]


def call_trace(ctx: ServerRequestContext[Any, Any], arguments: Any) -> TraceContext | None:
    """The trace context a tool call runs under (see the module's docstring)."""
    if isinstance(arguments, dict) and arguments.get("traceparent") is not None:
        return parse_traceparent(arguments["traceparent"])
    meta = ctx.meta if isinstance(ctx.meta, dict) else {}
    if isinstance(meta.get("traceparent"), str):
        return parse_traceparent(
            meta["traceparent"], tracestate=meta.get("tracestate"), field="_meta.traceparent"
        )
    headers = getattr(ctx.request, "headers", None)
    value = headers.get("traceparent") if headers is not None else None
    if value:
        return parse_traceparent(
            value, tracestate=headers.get("tracestate"), field="traceparent header"
        )
    return None


def _run_tool(
    p: Plaudit, name: str, arguments: Any, root: str | None, tc: TraceContext | None
) -> Any:
    with trace_context(tc):
        return tools.call_tool(p, name, arguments, root=root)


def build_server(p: Plaudit, *, root: str | None = tools.LOCAL) -> Server[Any]:
    """The MCP server over `p`. `root`: where exports may go (`tools.LOCAL`: anywhere the
    local user points; a directory: only under it; None: nowhere)."""
    listed = _tool_list()

    async def list_tools(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListToolsResult:
        return ListToolsResult(tools=listed)

    async def call_tool(
        ctx: ServerRequestContext[Any, Any], params: CallToolRequestParams
    ) -> CallToolResult:
        try:
            tc = call_trace(ctx, params.arguments)
            work = functools.partial(_run_tool, p, params.name, params.arguments, root, tc)
            result = await anyio.to_thread.run_sync(work)
        except PlauditError as exc:
            return _error(f"error: {exc}")
        except Exception:
            log.exception("MCP tool %r failed", params.name)
            return _error(INTERNAL)
        text = _json(result)
        structured = result if isinstance(result, dict) else {"result": result}
        return CallToolResult(
            content=[TextContent(type="text", text=text)],
            structured_content=msgspec.to_builtins(structured),
        )

    async def list_resources(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourcesResult:
        return ListResourcesResult(
            resources=[
                Resource(uri=uri, name=name, description=text, mime_type="application/json")
                for uri, (name, text) in tools.RESOURCES.items()
            ]
        )

    async def list_templates(
        ctx: ServerRequestContext[Any, Any], params: PaginatedRequestParams | None
    ) -> ListResourceTemplatesResult:
        return ListResourceTemplatesResult(
            resource_templates=[
                ResourceTemplate(
                    uri_template=tools.POSTERIORS_TEMPLATE,
                    name="posteriors of a context",
                    description="Each component's posterior usefulness for one task type.",
                    mime_type="application/json",
                )
            ]
        )

    async def read_resource(
        ctx: ServerRequestContext[Any, Any], params: ReadResourceRequestParams
    ) -> ReadResourceResult:
        uri = str(params.uri)
        try:
            value = await anyio.to_thread.run_sync(tools.read_resource, p, uri)
        except (PlauditError, ValidationError) as exc:
            raise MCPError(code=INVALID_PARAMS, message=f"error: {exc}") from None
        return ReadResourceResult(
            contents=[
                TextResourceContents(uri=uri, text=_json(value), mime_type="application/json")
            ]
        )

    def input_schema(name: str) -> dict[str, Any] | None:
        tool = tools.TOOLS.get(name)
        return None if tool is None else tool.schema

    return Server(
        "plaudit",
        version=__version__,
        instructions=INSTRUCTIONS,
        # Streamable HTTP checks `Mcp-Param-*` headers against the tool's schema: given here,
        # without running (and serialising) the whole tools/list for each call.
        get_tool_input_schema=input_schema,
        on_list_tools=list_tools,
        on_call_tool=call_tool,
        on_list_resources=list_resources,
        on_list_resource_templates=list_templates,
        on_read_resource=read_resource,
    )


def _error(text: str) -> CallToolResult:
    return CallToolResult(content=[TextContent(type="text", text=text)], is_error=True)


async def serve_stdio(p: Plaudit) -> None:
    """Serve one MCP client over this process's stdin and stdout until it closes them."""
    from mcp.server.stdio import stdio_server

    server = build_server(p)
    async with stdio_server() as (read_stream, write_stream):
        await server.run(read_stream, write_stream, server.create_initialization_options())


def http_app(p: Plaudit, *, root: str | None) -> tuple[Any, Any]:
    """The streamable HTTP endpoint as an ASGI app, and the lifespan that must run around it.

    Stateless and answering in JSON: no session lives in a server process, so any worker of
    `plaudit serve --workers N` can take any request. The host and token checks are the
    enclosing app's (`plaudit.server`), so the SDK's own are off."""
    from mcp.server.streamable_http_manager import (
        StreamableHTTPASGIApp,
        StreamableHTTPSessionManager,
    )

    manager = StreamableHTTPSessionManager(
        app=build_server(p, root=root), stateless=True, json_response=True
    )
    return StreamableHTTPASGIApp(manager), manager.run


__all__ = ["INSTRUCTIONS", "build_server", "call_trace", "http_app", "serve_stdio"]

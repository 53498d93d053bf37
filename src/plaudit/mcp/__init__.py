"""plaudit over the Model Context Protocol (the `plaudit[mcp]` extra).

`plaudit.mcp.tools` holds the tools and resources (schemas, descriptions, the library call
each makes) and needs no extra; `plaudit.mcp.server` puts them on the official `mcp` SDK, for
stdio (`plaudit mcp`) and for streamable HTTP (mounted at `/mcp` by `plaudit serve`).
"""

from __future__ import annotations

from typing import Any

FEATURE = "plaudit mcp"


def require_sdk() -> None:
    """Fail with one line naming the extra when the MCP SDK is not installed."""
    from plaudit.extras import require

    require("mcp", FEATURE)


def __getattr__(name: str) -> Any:
    if name in ("build_server", "http_app", "serve_stdio"):
        require_sdk()
        from plaudit.mcp import server

        return getattr(server, name)
    raise AttributeError(f"module 'plaudit.mcp' has no attribute {name!r}")


__all__ = ["FEATURE", "build_server", "http_app", "require_sdk", "serve_stdio"]

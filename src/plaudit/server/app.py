"""The ASGI app: every capability's router, the dashboard, and the security around them.

`create_app` takes an open `Plaudit` handle and does not own it: whoever opened the store
(`plaudit serve`, a test, an embedding application) closes it.
"""

from __future__ import annotations

import importlib
import logging
import os
from collections.abc import Iterable
from importlib import resources
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI
from fastapi.openapi.utils import get_openapi
from fastapi.routing import APIRoute
from starlette.middleware.cors import CORSMiddleware
from starlette.responses import FileResponse
from starlette.staticfiles import StaticFiles

from plaudit import __version__
from plaudit.core import Plaudit
from plaudit.server import guards, handlers
from plaudit.server.deps import get_plaudit, require_write
from plaudit.server.headers import SecurityHeaders
from plaudit.server.hosts import HostGuard
from plaudit.server.limits import DEFAULT_BODY_TIMEOUT, DEFAULT_MAX_BODY_BYTES, BodySizeLimit
from plaudit.server.mcp_mount import mount_mcp
from plaudit.server.responses import MsgspecJSONResponse
from plaudit.server.routes import ROUTE_MODULES
from plaudit.server.tracing import TraceContextMiddleware

log = logging.getLogger("plaudit.server")

STATIC_DIR = resources.files("plaudit.server") / "static"


def load_routers(modules: Iterable[str] = ROUTE_MODULES) -> tuple[list[APIRouter], dict[str, str]]:
    """Import each route module; one that is missing or broken is skipped, with the reason."""
    routers: list[APIRouter] = []
    skipped: dict[str, str] = {}
    for name in modules:
        try:
            module = importlib.import_module(name)
            router = module.router
            if not isinstance(router, APIRouter):
                raise TypeError(f"{name}.router is a {type(router).__name__}, not an APIRouter")
        except Exception as exc:  # a broken module must not stop the server
            reason = f"{type(exc).__name__}: {exc}"
            log.warning("route module %s not mounted: %s", name, reason)
            skipped[name] = reason
            continue
        routers.append(router)
    return routers, skipped


def create_app(
    plaudit: Plaudit,
    *,
    token: str | None = None,
    host: str | None = None,
    cors_origins: Iterable[str] = (),
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    body_timeout: float | None = DEFAULT_BODY_TIMEOUT,
    allowed_hosts: Iterable[str] | None = None,
    export_root: str | os.PathLike[str] | None = None,
    route_modules: Iterable[str] = ROUTE_MODULES,
) -> FastAPI:
    """Build the app, refusing (`ConfigError`) settings that expose an unauthenticated log.

    `host` is the address the app will listen on, when the caller knows it: a public one needs
    a `token`, and a loopback one answers only to loopback Host names (DNS rebinding), unless
    `allowed_hosts` lists the names. Whatever `host` says, an app without a token refuses
    clients from other machines (403). `cors_origins` is empty, i.e. CORS off, by default; `*`
    needs a token. `body_timeout` is how long a request body may take to arrive (408 after).
    `export_root` is the one directory HTTP clients may export to and audit from (default:
    `$PLAUDIT_EXPORT_ROOT`, else none: those requests are refused).
    """
    token = guards.normalize_token(token)
    origins = list(cors_origins)
    guards.check_serving(host, token, origins)
    if allowed_hosts is None and host is not None:
        allowed_hosts = guards.allowed_hosts(host)
    app = FastAPI(
        title="plaudit",
        version=__version__,
        description="Reinforcement feedback for LLM agents on one tamper-evident event log.",
        default_response_class=MsgspecJSONResponse,
        docs_url=None,  # Swagger UI and ReDoc load their assets from a CDN; the spec suffices
        redoc_url=None,
    )
    app.state.plaudit = plaudit
    app.state.token = token
    app.state.export_root = os.fspath(export_root) if export_root is not None else None
    handlers.install(app)

    routers, skipped = load_routers(route_modules)
    app.state.skipped_routes = skipped
    app.include_router(_meta_router(app))
    for router in routers:
        app.include_router(router)
    mount_mcp(app, plaudit, token=token, export_root=app.state.export_root)
    _mount_dashboard(app)
    _document_write_auth(app, routers)

    app.add_middleware(TraceContextMiddleware)
    app.add_middleware(BodySizeLimit, max_bytes=max_body_bytes, timeout=body_timeout)
    if origins:
        app.add_middleware(
            CORSMiddleware,
            allow_origins=origins,
            allow_methods=["GET", "POST", "OPTIONS"],
            allow_headers=["Authorization", "Content-Type"],
            allow_credentials=False,
            max_age=600,
        )
    if allowed_hosts is not None or token is None:
        app.add_middleware(
            HostGuard,
            allowed=None if allowed_hosts is None else list(allowed_hosts),
            local_only=token is None,
        )
    app.add_middleware(SecurityHeaders)
    return app


def _meta_router(app: FastAPI) -> APIRouter:
    router = APIRouter(prefix="/v1", tags=["meta"])

    @router.get("/health")
    def health(p: Annotated[Plaudit, Depends(get_plaudit)]) -> dict[str, Any]:
        """Liveness plus what is mounted, so clients (the dashboard) know what to ask for."""
        head = p.log.head()
        return {
            "ok": True,
            "version": __version__,
            "backend": p.dialect,
            "length": head.length,
            "head": head.digest,
            "write_auth": bool(app.state.token),
            "skipped_routes": dict(app.state.skipped_routes),
        }

    return router


def _document_write_auth(app: FastAPI, routers: Iterable[APIRouter]) -> None:
    """Mark write endpoints in /openapi.json as needing the bearer token (when one is set), so
    generated clients know; `require_write` is a plain dependency, invisible to FastAPI."""
    writes = {
        (method.lower(), route.path)
        for router in routers
        for route in router.routes
        if isinstance(route, APIRoute)
        and any(d.call is require_write for d in route.dependant.dependencies)
        for method in route.methods or ()
    }

    def openapi() -> dict[str, Any]:
        if app.openapi_schema is None:
            spec = get_openapi(
                title=app.title,
                version=app.version,
                description=app.description,
                routes=app.routes,
            )
            schemes = spec.setdefault("components", {}).setdefault("securitySchemes", {})
            schemes["bearerToken"] = {
                "type": "http",
                "scheme": "bearer",
                "description": "Required on write endpoints when the server has a token.",
            }
            for path, item in spec.get("paths", {}).items():
                for method, op in item.items():
                    if (method, path) in writes:
                        op["security"] = [{"bearerToken": []}]
            app.openapi_schema = spec
        return app.openapi_schema

    app.openapi = openapi  # type: ignore[method-assign]


def _mount_dashboard(app: FastAPI) -> None:
    index = STATIC_DIR / "index.html"

    @app.get("/", include_in_schema=False)
    def dashboard() -> FileResponse:
        return FileResponse(str(index), headers={"Cache-Control": "no-cache"})

    app.mount("/static", StaticFiles(directory=str(STATIC_DIR)), name="static")


__all__ = ["STATIC_DIR", "create_app", "load_routers"]

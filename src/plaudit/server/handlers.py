"""Exception handlers: every error becomes a JSON body that says what was wrong, never a trace.

- `PlauditError` keeps its own status (`http_status`) and fields (`to_dict()`), with server
  paths hidden (`plaudit.server.paths`).
- FastAPI's request validation errors become 422 with one readable sentence plus, per problem,
  where it was (`loc`, e.g. ``["body", "events", 0, "type"]``) and what was wrong.
- Starlette's HTTP errors (404 unknown path, 405 wrong method, 401 from `require_write`) keep
  their status and headers with a sentence naming the method and path.
- Anything else is a bug: it is logged with its traceback server-side and answered with a 500
  that carries no detail.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from starlette.exceptions import HTTPException as StarletteHTTPException

from plaudit.errors import PlauditError
from plaudit.server import paths
from plaudit.server.responses import MsgspecJSONResponse, error_body

log = logging.getLogger("plaudit.server")

_MAX_PROBLEMS = 20
_MAX_INPUT_CHARS = 200


def _loc_text(loc: Sequence[Any]) -> str:
    """`("body", "events", 0, "type")` -> `body.events[0].type`."""
    out = ""
    for part in loc:
        if isinstance(part, int):
            out += f"[{part}]"
        else:
            out += f".{part}" if out else str(part)
    return out or "request"


def _short_input(value: Any) -> Any:
    """The offending input, if it is small enough to echo back safely."""
    if value is None or isinstance(value, bool | int | float):
        return value
    if isinstance(value, str):
        return value if len(value) <= _MAX_INPUT_CHARS else value[:_MAX_INPUT_CHARS] + "..."
    return None


def describe_validation(errors: Sequence[Any]) -> dict[str, Any]:
    problems: list[dict[str, Any]] = []
    for err in list(errors)[:_MAX_PROBLEMS]:
        loc = [p if isinstance(p, int | str) else str(p) for p in err.get("loc", ())]
        msg = str(err.get("msg", "invalid"))
        if err.get("type") == "json_invalid":  # loc is ("body", character offset)
            ctx = err.get("ctx") or {}
            at = f" at character {loc[1]}" if len(loc) > 1 else ""
            msg = f"malformed JSON{at}: {ctx.get('error', 'cannot be parsed')}"
            loc = loc[:1]
        item: dict[str, Any] = {
            "loc": loc,
            "field": _loc_text(loc),
            "msg": msg,
            "type": str(err.get("type", "invalid")),
        }
        shown = _short_input(err.get("input"))
        if shown is not None and err.get("type") != "missing":
            item["input"] = shown
        problems.append(item)
    sentence = "; ".join(f"{p['field']}: {p['msg']}" for p in problems) or "invalid request"
    if len(errors) > _MAX_PROBLEMS:
        sentence += f"; and {len(errors) - _MAX_PROBLEMS} more"
    return error_body("ValidationError", sentence, detail=problems)


async def _plaudit_error(request: Request, exc: Exception) -> MsgspecJSONResponse:
    assert isinstance(exc, PlauditError)
    body = exc.to_dict()
    body.setdefault("message", str(exc))
    return MsgspecJSONResponse(paths.for_request(request)(body), status_code=exc.http_status)


async def _validation_error(request: Request, exc: Exception) -> MsgspecJSONResponse:
    assert isinstance(exc, RequestValidationError)
    return MsgspecJSONResponse(describe_validation(exc.errors()), status_code=422)


_HTTP_WORDS = {
    404: "NotFound",
    405: "MethodNotAllowed",
    401: "Unauthorized",
    403: "Forbidden",
    400: "BadRequest",
}


async def _http_error(request: Request, exc: Exception) -> MsgspecJSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    where = f"{request.method} {request.url.path}"
    detail = exc.detail if isinstance(exc.detail, str) else "request rejected"
    if exc.status_code == 404 and detail == "Not Found":
        message = f"no such endpoint: {where} (see /openapi.json)"
    elif exc.status_code == 405:
        message = f"{request.method} is not allowed on {request.url.path}"
    elif exc.status_code == 400 and detail == "There was an error parsing the body":
        # FastAPI's own reading failed (not a syntax error, which pydantic reports with its
        # position): answered like any other body that does not fit, 422 naming `body`.
        reason = (
            "cannot be read as JSON: bytes that are not UTF-8, nesting deeper than the parser"
            " allows, or an integer of more than 4300 digits"
        )
        problem = {"loc": ["body"], "field": "body", "msg": reason, "type": "json_unreadable"}
        return MsgspecJSONResponse(
            error_body("ValidationError", f"body: {reason}", detail=[problem]), status_code=422
        )
    else:
        message = detail
    kind = _HTTP_WORDS.get(exc.status_code, "HTTPError")
    return MsgspecJSONResponse(
        error_body(kind, message), status_code=exc.status_code, headers=exc.headers
    )


async def _internal_error(request: Request, exc: Exception) -> MsgspecJSONResponse:
    log.error("unhandled error in %s %s", request.method, request.url.path, exc_info=exc)
    return MsgspecJSONResponse(
        error_body("InternalError", "internal server error; the server log has the details"),
        status_code=500,
    )


def install(app: FastAPI) -> None:
    # Driver errors caused by input arrive as ValidationError: the backends translate them.
    app.add_exception_handler(PlauditError, _plaudit_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _internal_error)


__all__ = ["describe_validation", "install"]

"""JSON rendering for every response: one error shape, and no 500 from a float.

Starlette's JSONResponse refuses NaN and Infinity, so a statistic that happens to be undefined
(the variance of an arm nobody pulled) would turn into a server error. msgspec writes those as
`null`, which is what a JSON client can represent, and is faster besides.
"""

from __future__ import annotations

from typing import Any

import msgspec
from starlette.responses import JSONResponse
from starlette.types import Send

_encoder = msgspec.json.Encoder()


def json_bytes(value: Any) -> bytes:
    plain = msgspec.to_builtins(value, builtin_types=(bytes,), str_keys=True)
    try:
        return _encoder.encode(plain)
    except UnicodeEncodeError:
        # A lone surrogate (a request's `"\ud800"`, echoed in an error) has no UTF-8 form:
        # send its escape as text rather than fail the response.
        return _encoder.encode(_escape_surrogates(plain))


def _escape_surrogates(value: Any) -> Any:
    if isinstance(value, str):
        return value.encode("utf-8", "backslashreplace").decode("utf-8")
    if isinstance(value, dict):
        return {_escape_surrogates(k): _escape_surrogates(v) for k, v in value.items()}
    if isinstance(value, list):
        return [_escape_surrogates(v) for v in value]
    return value


def error_body(error: str, message: str, **extra: Any) -> dict[str, Any]:
    """Every error response: a kind, a sentence saying what was wrong, then details."""
    return {"error": error, "message": message, **extra}


async def send_error(
    send: Send,
    status: int,
    error: str,
    message: str,
    *,
    headers: tuple[tuple[bytes, bytes], ...] = (),
    **extra: Any,
) -> None:
    """Answer from a middleware, before any route ran, and close the connection: what is left
    of the request (an oversize or late body, say) is not worth reading."""
    body = json_bytes(error_body(error, message, **extra))
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                (b"connection", b"close"),
                *headers,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})


class MsgspecJSONResponse(JSONResponse):
    """JSONResponse that encodes with msgspec: NaN/Infinity become null instead of a 500."""

    def render(self, content: Any) -> bytes:
        return json_bytes(content)


__all__ = ["MsgspecJSONResponse", "error_body", "json_bytes", "send_error"]

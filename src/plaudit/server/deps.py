"""Dependencies shared by every route module.

Routes get the open `Plaudit` handle with `Depends(get_plaudit)` and protect writes with
`dependencies=[Depends(require_write)]`. Both are coroutines, so FastAPI runs them on the
event loop: a plain `def` dependency costs a thread-pool hand-off per request. Library errors
(`PlauditError`) propagate: the app maps them to 4xx responses with a message, so routes hold
no error-handling logic of their own.
"""

from __future__ import annotations

import hmac

from fastapi import HTTPException, Request

from plaudit.core import Plaudit


async def get_plaudit(request: Request) -> Plaudit:
    return request.app.state.plaudit


NEEDS_TOKEN = "this endpoint needs 'Authorization: Bearer <token>' with the server's token"


def bearer_matches(header: bytes, token: str) -> bool:
    """Whether an `Authorization` header value carries `token` as a bearer token.

    Compared as bytes: `compare_digest` refuses str with non-ASCII characters (a TypeError,
    i.e. a 500), while header bytes and a UTF-8 token compare fine whatever they hold."""
    scheme, _, given = header.partition(b" ")
    return scheme.lower() == b"bearer" and hmac.compare_digest(
        given.strip(), token.encode("utf-8", "surrogateescape")
    )


async def require_write(request: Request) -> None:
    """Bearer-token check for write endpoints, when the server was given a token."""
    token: str | None = getattr(request.app.state, "token", None)
    if not token:
        return
    if not bearer_matches(request.headers.get("authorization", "").encode("latin-1"), token):
        raise HTTPException(
            status_code=401, detail=NEEDS_TOKEN, headers={"WWW-Authenticate": "Bearer"}
        )

"""Dependencies of the routes, as ``Annotated`` aliases: the master's state, the request body
(size-checked before it is read), the wire formats, and the bearer-token check."""

from __future__ import annotations

import hashlib
import hmac
from typing import Annotated

from fastapi import Depends, Request

from services.master.codec import Wire, negotiate
from services.master.errors import ApiError, invalid, too_large
from services.master.state import MasterState
from tensorgrid.core import errors
from tensorgrid.master.core import MasterCore
from tensorgrid.master.quotas import CLIENT_HEADER, CLIENT_ID_MAX_CHARS, valid_client_id


def get_state(request: Request) -> MasterState:
    """The app's master state (made in the lifespan)."""
    return request.app.state.master  # type: ignore[no-any-return]


State = Annotated[MasterState, Depends(get_state)]


def get_core(state: State) -> MasterCore:
    """The master core."""
    return state.core


Core = Annotated[MasterCore, Depends(get_core)]


async def read_body(request: Request, state: State) -> bytes:
    """The request body, refused before it is read when its Content-Length is over the limit
    (and while it streams, when it has none).

    Raises:
        ApiError(too_large): over ``max_request_bytes``.
    """
    limit = state.settings.max_request_bytes
    declared = request.headers.get("content-length")
    if declared is not None:
        try:
            size = int(declared)
        except ValueError:
            raise invalid(f"Content-Length {declared!r} is not a number", "invalid_argument") \
                from None
        if size > limit:
            raise too_large(f"The request body is {size} bytes; the limit is {limit} "
                            "(max_request_bytes)")
    chunks: list[bytes] = []
    total = 0
    async for chunk in request.stream():
        total += len(chunk)
        if total > limit:
            raise too_large(f"The request body is over the limit of {limit} bytes "
                            "(max_request_bytes)")
        chunks.append(chunk)
    return b"".join(chunks)


Body = Annotated[bytes, Depends(read_body)]


def get_wire(request: Request) -> Wire:
    """The request's and the answer's formats (JSON or binary protobuf)."""
    return negotiate(request.headers.get("content-type", ""), request.headers.get("accept", ""))


WireFormat = Annotated[Wire, Depends(get_wire)]


def client_of(request: Request) -> str:
    """The client a request counts against for the per-client caps: the name in its
    ``X-Tensorgrid-Client`` header (the SDK and the command line send one per process), else
    ``peer:<address>``.

    Raises:
        ApiError(invalid_argument): the header is not a valid client name.
    """
    name = request.headers.get(CLIENT_HEADER)
    if name is not None:
        if not valid_client_id(name):
            raise invalid(f"{CLIENT_HEADER} must be 1 to {CLIENT_ID_MAX_CHARS} letters, digits "
                          "or '.-_@'", "invalid_argument")
        return name
    return f"peer:{request.client.host if request.client is not None else 'unknown'}"


ClientId = Annotated[str, Depends(client_of)]


DASHBOARD_COOKIE = "tensorgrid_dashboard"


def dashboard_cookie(token: str) -> str:
    """The dashboard's session cookie value for ``token``: derived from it, so the cookie never
    holds the token itself."""
    return hmac.new(token.encode(), b"tensorgrid dashboard cookie", hashlib.sha256).hexdigest()


def require_token(request: Request, state: State) -> None:
    """Refuse callers without the configured bearer token (no check when none is configured);
    the dashboard's cookie (see ``dashboard_cookie``) counts as the token.

    Raises:
        ApiError(unauthenticated): the Authorization header is missing or wrong.
    """
    token = state.settings.token_value
    if token is None:
        return
    given = request.headers.get("authorization", "")
    cookie = request.cookies.get(DASHBOARD_COOKIE, "")  # set by the dashboard's /?token=
    if cookie and hmac.compare_digest(cookie.encode(), dashboard_cookie(token).encode()):
        return
    if not hmac.compare_digest(given.encode(), f"Bearer {token}".encode()):
        raise ApiError(errors.UnauthenticatedError(
            "Missing or wrong bearer token (send 'Authorization: Bearer <token>'; the SDK reads "
            "TENSORGRID_TOKEN)"), "unauthenticated")


Authorized = Depends(require_token)

"""One exception hierarchy: callers catch `PlauditError`; surfaces map kinds to exit/HTTP codes."""

from __future__ import annotations


class PlauditError(Exception):
    """Base class for every error plaudit raises on purpose."""

    exit_code = 1
    http_status = 400

    def to_dict(self) -> dict[str, object]:
        return {"error": type(self).__name__, "message": str(self)}


class ValidationError(PlauditError, ValueError):
    """Input was rejected; `field` names what was wrong and `where` where it came from."""

    exit_code = 2
    http_status = 422

    def __init__(self, field: str, reason: str, *, where: str | None = None) -> None:
        self.field = field
        self.reason = reason
        self.where = where
        prefix = f"{where}: " if where else ""
        super().__init__(f"{prefix}{field}: {reason}")

    def to_dict(self) -> dict[str, object]:
        out = super().to_dict()
        out.update(field=self.field, reason=self.reason)
        if self.where:
            out["where"] = self.where
        return out


class ConflictError(PlauditError):
    """An idempotency key was reused for different content."""

    exit_code = 3
    http_status = 409

    def __init__(self, event_id: str, message: str | None = None) -> None:
        self.event_id = event_id
        super().__init__(message or f"id {event_id!r} is already committed with different content")


class NotFoundError(PlauditError, LookupError):
    exit_code = 4
    http_status = 404


class IntegrityError(PlauditError):
    """The log or a projection failed verification."""

    exit_code = 5
    http_status = 409


class ConfigError(PlauditError):
    exit_code = 2
    http_status = 400


class BackendUnavailableError(PlauditError):
    exit_code = 6
    http_status = 503

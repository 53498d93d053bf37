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


class StoreNotFoundError(NotFoundError):
    """A command that only reads named a store that does not exist; nothing was created.

    A usage error (exit 2), not a missing record: most often a mistyped `--db`."""

    exit_code = 2

    def __init__(self, location: str, message: str) -> None:
        self.location = location
        super().__init__(message)

    @classmethod
    def at(
        cls, location: str, *, why: str = "no such file", db: str | None = None
    ) -> StoreNotFoundError:
        """The error for `location`, with the command that would create the store (`db` is
        the `--db` value to show, when it differs from the location)."""
        import shlex

        create = f"plaudit --db {shlex.quote(db or location)} init"
        return cls(
            location,
            f"no plaudit store at {location} ({why}); nothing was created or changed. "
            f"Check --db and $PLAUDIT_DB, or create one: {create}",
        )


class IntegrityError(PlauditError):
    """The log or a projection failed verification."""

    exit_code = 5
    http_status = 409

    @classmethod
    def position_taken(cls, head_seq: int) -> IntegrityError:
        """A sequenced insert met a row at the next position: rows were added outside."""
        return cls(
            f"position {head_seq + 1} is already taken but the log's head says {head_seq}: "
            "rows were added outside plaudit; run `plaudit log verify`"
        )


class ConfigError(PlauditError):
    exit_code = 2
    http_status = 400


class ListenError(PlauditError):
    """A server cannot listen on its address: the port is in use, or not ours to take.

    Raised before a store is opened, so a server that cannot start creates nothing."""

    exit_code = 7
    http_status = 503


class MissingExtraError(ConfigError):
    """A feature needs an optional extra that is not installed (see plaudit.extras)."""

    http_status = 501

    def __init__(self, extra: str, feature: str) -> None:
        self.extra = extra
        self.feature = feature
        self.install = f"pip install 'plaudit[{extra}]'"
        super().__init__(f"{feature} needs the {extra} extra: {self.install}")


class BackendUnavailableError(PlauditError):
    exit_code = 6
    http_status = 503


class DeadlineError(BackendUnavailableError):
    """A lock, lease, leader or relay did not answer within the store's deadline. The message
    names the holder and what to do; nothing of the call was acknowledged (a retry is safe:
    appends are idempotent by id)."""

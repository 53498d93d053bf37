"""One APIRouter per capability; `plaudit.server.app` mounts every module listed here."""

ROUTE_MODULES: tuple[str, ...] = (
    "plaudit.server.routes.log",
    "plaudit.server.routes.bandit",
    "plaudit.server.routes.signals",
    "plaudit.server.routes.ledger",
    "plaudit.server.routes.traces",
)

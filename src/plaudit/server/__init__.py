"""The HTTP API and dashboard: thin routes over the library."""

from plaudit.extras import require

# Before any submodule imports fastapi: without the extra, one line naming it.
require("server", "plaudit's HTTP server")

"""The HTTP API and dashboard: thin routes over the library."""

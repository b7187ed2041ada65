"""ccs, the command-line twin of the API: every read and write of /api over HTTP with a service token.

A plain client: httpx, Typer (Click) and Rich, nothing of Django, Celery or the project's apps, so that it
runs from a laptop as well as on the server (docs/architecture.md)."""

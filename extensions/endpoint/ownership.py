"""What an author writes in place of the endpoint kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "endpoint": (
        'a route that answers {"ok": true}',
        """from typing import Any

from fastapi import FastAPI


class $cls:
    name = "$ep"
    required_tasks = None

    def attach_router(self, app: FastAPI) -> None:
        @app.get("$name")
        async def ok() -> dict[str, bool]:
            return {"ok": True}

    async def init_state(self, engine_client: Any, state: Any, args: Any) -> None:
        pass


def create_endpoint_plugin() -> $cls:
    return $cls()
""",
    ),
}

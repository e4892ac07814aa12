"""What an author writes in place of the platform kind's example: read by
tests/ownership/replacements.py (MODULES; the `string.Template` fields are described
there). A `<kind>/<variant>` key is for the example of another vLLM interface."""

from __future__ import annotations

MODULES: dict[str, tuple[str, str]] = {
    "platform": (
        "vLLM's CPU platform, on when ${PKG}_USE_CPU is set, with vLLM's own worker",
        """import os


def detect_platform() -> str | None:
    return f"{__name__}.${P}Platform" if os.environ.get("${PKG}_USE_CPU") else None


def __getattr__(name: str) -> type:
    if name != "${P}Platform":
        raise AttributeError(name)
    from vllm.platforms.cpu import CpuPlatform

    cls = type(name, (CpuPlatform,), {"__module__": __name__, "device_name": "acme_cpu"})
    globals()[name] = cls
    return cls
""",
    ),
}

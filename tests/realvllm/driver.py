"""Runs the fresh-process checks of many generated packages in ONE fresh process.

Usage: python driver.py GROUP PROJECT_DIR... ; prints `VLLM_CHECKS {json}`.
Each project's tests/vllm_checks.py is imported under its own name; for `loaders`, every
project's loaders (the test kit's group) run first (vLLM's load_general_plugins() runs once,
for all installed plugins, as in a real process) and only then the checks, so each package's
laziness is judged before any check imports anything.
"""

from __future__ import annotations

import importlib.util
import json
import sys
import traceback
from functools import partial
from pathlib import Path

from pytest_vllm_plugin import checks


def main(group: str, projects: list[str]) -> None:
    prepared = []
    for i, project in enumerate(projects):
        path = Path(project) / "tests" / "vllm_checks.py"
        spec = importlib.util.spec_from_file_location(f"_vllm_checks_{i}", path)
        assert spec and spec.loader
        module = importlib.util.module_from_spec(spec)
        spec.loader.exec_module(module)
        # The test kit's group (none but the loaders' without a general plugin); with the
        # loaders, the kit's test_entry_points_resolve (the suites run from here skip it).
        found = checks.group(group, vars(module))
        if group == "loaders":
            found["entry_points"] = partial(checks.entry_points, Path(project))
        prepared.append((Path(project).name, found))
    result: dict[str, object] = {"ok": [], "failed": {}}
    for project, group_checks in prepared:
        for name, check in group_checks.items():
            try:
                check()
            except Exception:
                result["failed"][f"{project}:{name}"] = traceback.format_exc()  # type: ignore[index]
            else:
                result["ok"].append(f"{project}:{name}")  # type: ignore[union-attr]
    print("VLLM_CHECKS " + json.dumps(result))


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2:])

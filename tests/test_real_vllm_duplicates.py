"""Tier 2: what a second registration of the same name does in each target's real registry
(issue 16). Each registry kind's kind.yml says it (`registry.second`: overwrite or raise), and
its `duplicate:` text, which the README and the docs show, says the same; a vLLM release that
changes the behaviour fails here, not in a plugin.
"""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from conftest import CATALOG, TARGETS
from realvllm import envs
from test_real_vllm import _run

pytestmark = pytest.mark.real_vllm
PROBE = Path(__file__).parent / "realvllm" / "second_registration.py"


@pytest.mark.parametrize("target", TARGETS)
def test_second_registration_does_what_the_catalog_says(target: str, tmp_path: Path) -> None:
    env = envs.ensure(target)
    kinds = {
        kind: entry
        for kind, entry in CATALOG.items()
        if (entry.get("registry") or {}).get("second") and target in entry["targets"]
    }
    apis = {kind: entry["apis"][target] for kind, entry in kinds.items()}
    out = _run([str(env.python), str(PROBE), json.dumps(apis)], tmp_path, {})
    seen = json.loads(out.split("SECOND ", 1)[1].splitlines()[0])
    assert set(seen) == set(kinds), set(seen) ^ set(kinds)
    for kind, entry in kinds.items():
        said = entry["registry"]["second"]
        if target not in entry.get("new_names", {}).get("targets", [target]):
            # A release with no new names (attention backends before 0.32): members only.
            said = entry["registry"]["second_member"]
        assert seen[kind].split()[0] == said, (kind, seen[kind], said)
        # The prose users read (README, docs/kinds/<kind>.md) says the same.
        verb = r"\braises?\b" if said == "raise" else r"\b(overwrites?|replaces?)\b"
        assert re.search(verb, entry["duplicate"]), (kind, entry["duplicate"])
        if said == "raise":  # and names what it raises
            assert seen[kind].split()[1] in entry["duplicate"], (kind, seen[kind])

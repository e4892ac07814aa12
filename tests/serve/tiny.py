"""Tiny checkpoints for tier 3, built offline by the test kit's CLI (python -m
pytest_vllm_plugin.tiny), which a generated plugin's smoke serve builds its checkpoints with.

The kit's module (kit/src/pytest_vllm_plugin/tiny.py) is the one recipe: a 130k-parameter
Llama with a byte-level BPE tokenizer, scripted after its chat template's generation prompt so
that parsers see a known text. Tier 3 runs it in the vLLM environment (it needs torch and
transformers), with the kit of this working tree installed beside it.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

from realvllm import envs


def smoke_script(project: Path) -> dict[str, Any]:
    """What `project`'s smoke serve has its tiny model say by default: the template's plan's
    "script" (tests/instances.json: its first parsers' tags)."""
    plan = json.loads((project / "tests" / "instances.json").read_text())
    return dict(plan["script"])


def build(env: envs.VllmEnv, project: Path, dest: Path, architecture: str | None = None) -> Path:
    """Build into `dest` the tiny checkpoint `project`'s smoke serve builds by default."""
    site = envs.install_overlay(env, [], dest.parent / "kit-site")  # the kit alone
    cmd = [str(env.python), "-m", "pytest_vllm_plugin.tiny", str(dest)]
    cmd += ["--script", json.dumps(smoke_script(project))]
    if architecture:
        cmd += ["--architecture", architecture]
    proc = subprocess.run(
        cmd,
        capture_output=True,
        text=True,
        timeout=600,
        env=dict(os.environ, HF_HUB_OFFLINE="1", **site),
    )
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    config = json.loads((dest / "config.json").read_text())
    assert config["architectures"] == [architecture or "LlamaForCausalLM"], config
    return dest

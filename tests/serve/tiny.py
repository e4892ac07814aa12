"""Tiny checkpoints for tier 3, built offline by a generated project's own tests/tiny_model.py.

The generated helper (template/tests/tiny_model.py.jinja) is the one recipe: a 130k-parameter
Llama with a byte-level BPE tokenizer, scripted after its chat template's generation prompt so
that parsers see a known text. Tier 3 runs it in the vLLM environment (it needs torch and
transformers), so the helper every generated plugin ships is exercised here too.
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from realvllm.envs import VllmEnv


def build(env: VllmEnv, project: Path, dest: Path, architecture: str | None = None) -> Path:
    """Build the tiny checkpoint of `project`'s tests/tiny_model.py into `dest`."""
    cmd = [str(env.python), str(project / "tests" / "tiny_model.py"), str(dest)]
    if architecture:
        cmd += ["--architecture", architecture]
    proc = subprocess.run(
        cmd, capture_output=True, text=True, timeout=600, env=dict(os.environ, HF_HUB_OFFLINE="1")
    )
    assert proc.returncode == 0, f"{' '.join(cmd)} failed:\n{proc.stdout}\n{proc.stderr[-4000:]}"
    config = json.loads((dest / "config.json").read_text())
    assert config["architectures"] == [architecture or "LlamaForCausalLM"], config
    return dest

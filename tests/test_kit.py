"""`pytest --vllm-plugin=DIST` (kit/src/pytest_vllm_plugin/generic.py), issue 34: the kit checks
a vLLM plugin the template did not generate. The packages are tests/kit/ (hand-written, one
broken on purpose); the real checks run in a real vLLM environment (tier 2), the option's
inertness and the data file's currency here."""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
from pathlib import Path

import pytest
import yaml
from realvllm import envs

from tools import catalog

KIT_TESTS = Path(__file__).parent / "kit"
DATA = envs.KIT / "src" / "pytest_vllm_plugin" / "registries.json"


def _pytest(python: str | Path, cwd: Path, path: object, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run(
        [str(python), "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:xdist", "-rA", *args],
        cwd=cwd, capture_output=True, text=True, timeout=900,
        env={**os.environ, "PYTHONPATH": str(path), "COLUMNS": "200"},
    )  # fmt: skip


ITEM = re.compile(r"^(PASSED|FAILED) vllm-plugin\[[^]]+\]::(\S+)", re.MULTILINE)


def _outcomes(out: str) -> dict[str, str]:
    """-rA's summary: item -> PASSED / FAILED."""
    return {m[2]: m[1] for m in ITEM.finditer(out)}


def test_registries_json_is_current() -> None:
    """The kit's data file is what `python -m tools.catalog` writes from the catalog now."""
    assert DATA.read_text() == catalog.render_kit(), "stale: run python -m tools.catalog"


def test_the_kit_reads_only_catalog_facts() -> None:
    """Every private name the kit's snapshot reads is one of its kind's facts, which
    tools.vllm_facts checks against every target's wheel."""
    built = catalog.build()["catalog"]
    data = json.loads(DATA.read_text())
    for registry, read in catalog.KIT_READS.items():
        kind = yaml.safe_load((catalog.EXTENSIONS / read["kind"] / "kind.yml").read_text())
        facts = {f["symbol"] for f in kind["facts"]}
        missing = set(read["facts"]) - facts
        assert not missing, f"{registry}: not facts of {read['kind']}: {sorted(missing)}"
        for release in built[read["kind"]]["targets"]:
            assert registry in data[release], (registry, release)


def test_without_the_option_the_kit_adds_nothing(tmp_path: Path) -> None:
    """No --vllm-plugin: no item, no header line (no vLLM needed, nothing imported)."""
    (tmp_path / "test_one.py").write_text("def test_one() -> None:\n    pass\n")
    out = _pytest(sys.executable, tmp_path, envs.kit_site(), "-q").stdout
    assert "1 passed" in out and "vllm-plugin[" not in out, out
    bad = _pytest(sys.executable, tmp_path, envs.kit_site(), "--vllm-plugin", "no-such-plugin")
    assert _outcomes(bad.stdout) == {"installed": "FAILED"}, bad.stdout
    assert "no installed distribution is named no-such-plugin" in bad.stdout


@pytest.mark.real_vllm
def test_a_hand_written_plugin_is_checked(tmp_path: Path) -> None:
    """The hand-written plugin passes with one item per finding; the broken one fails exactly
    `idempotent` (an unguarded KV connector) and `lazy` (its model module imported eagerly)."""
    env = envs.ensure("0.32")
    site = tmp_path / "site"
    envs.install_overlay(env, [KIT_TESTS / "handwritten", KIT_TESTS / "broken"], site)
    run = tmp_path / "run"
    run.mkdir()
    good = _pytest(env.python, run, site, "--vllm-plugin", "Handwritten_VLLM.plugin")
    assert good.returncode == 0, good.stdout + good.stderr
    assert _outcomes(good.stdout) == {
        "entry_point[vllm.general_plugins:register_handwritten]": "PASSED",
        "registers[model:MyLlamaForCausalLM]": "PASSED",
        "registers[model:MyTinyLlama]": "PASSED",
        "registers[tool_parser:handwritten_json]": "PASSED",
        "registers[config_parser:handwritten]": "PASSED",
        "idempotent": "PASSED",
        "lazy": "PASSED",
    }, good.stdout
    bad = _pytest(env.python, run, site, "--vllm-plugin", "broken-vllm-plugin")
    assert bad.returncode == 1, bad.stdout + bad.stderr
    assert _outcomes(bad.stdout) == {
        "entry_point[vllm.general_plugins:register_broken]": "PASSED",
        "registers[kv_connector:BrokenConnector]": "PASSED",
        "registers[model:BrokenLlamaForCausalLM]": "PASSED",
        "idempotent": "FAILED",
        "lazy": "FAILED",
    }, bad.stdout
    assert "Connector 'BrokenConnector' is already registered" in bad.stdout
    assert "registration imported broken_plugin.my_llama" in bad.stdout


def test_a_vllm_release_the_kit_does_not_know_fails_in_one_line(tmp_path: Path) -> None:
    """The kit never guesses where a registry lives: a vLLM release missing from
    registries.json fails the `registries` item with one line naming it (vLLM faked here: a
    package with a version, and a plugin's metadata with a general-plugin entry point)."""
    site = tmp_path / "site"
    (site / "vllm" / "plugins").mkdir(parents=True)
    (site / "vllm" / "__init__.py").write_text('__version__ = "0.99.1"\n')
    (site / "vllm" / "plugins" / "__init__.py").write_text("")
    meta = site / "fake_plugin-0.1.dist-info"
    meta.mkdir()
    (meta / "METADATA").write_text("Metadata-Version: 2.1\nName: fake-plugin\nVersion: 0.1\n")
    (meta / "entry_points.txt").write_text("[vllm.general_plugins]\nfake = fake_plugin:register\n")
    run = tmp_path / "run"
    run.mkdir()
    path = f"{envs.kit_site()}{os.pathsep}{site}"
    out = _pytest(sys.executable, run, path, "--vllm-plugin", "fake_plugin").stdout
    assert _outcomes(out) == {"registries": "FAILED"}, out
    assert "vLLM 0.99 is not in pytest-vllm-plugin's registries.json (it knows 0.30," in out, out

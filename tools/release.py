"""Release tags of the template: `python -m tools.release tag` (maintainers, before publishing).

The releases are recorded in tests/update/releases.yml (tag -> commit), one for every
`## vX.Y.Z` heading of CHANGELOG.md. `tag` creates each recorded tag at its commit in the
repository it runs in (a clone about to be pushed), moving a tag that points elsewhere, after
checking that the two lists agree and that every commit exists. Then
`git push origin --tags` publishes them: `copier update` in generated plugins takes the newest
tag, and `--vcs-ref TAG` any of them. `check` only checks. Tier 4 tags its temporary clone of
the template with the same function, so the tests update from exactly these commits.

The test kit (kit/, the distribution pytest-vllm-plugin that generated plugins' `test` extra
asks for) is released with the template, at the same version: `kit --out DIR` builds its sdist
and wheel into DIR and checks them with `twine check --strict`, once CHANGELOG.md's newest
release is the kit's version (kit/pyproject.toml); then `twine upload DIR/*` publishes them.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ROOT / "tests" / "update" / "releases.yml"
CHANGELOG = ROOT / "CHANGELOG.md"
KIT = ROOT / "kit"


def recorded() -> dict[str, str]:
    """{tag: commit} from releases.yml."""
    data = yaml.safe_load(RELEASES.read_text())
    return {tag: spec["commit"] for tag, spec in data["releases"].items()}


def changelog_releases(text: str | None = None) -> list[str]:
    """The release tags CHANGELOG.md has a section for (`## v0.2.0 (date)`)."""
    text = CHANGELOG.read_text() if text is None else text
    return re.findall(r"(?m)^## (v\d+\.\d+\.\d+)\b", text)


def problems(repo: Path) -> list[str]:
    """What keeps `tag` from tagging `repo`: one line each."""
    tags = recorded()
    found = []
    for tag in changelog_releases():
        if tag not in tags:
            found.append(f"CHANGELOG.md has {tag}, which {RELEASES.name} does not record")
    for tag in tags:
        if tag not in changelog_releases():
            found.append(f"{RELEASES.name} records {tag}, which CHANGELOG.md has no section for")
    for tag, commit in tags.items():
        proc = subprocess.run(
            ["git", "cat-file", "-e", f"{commit}^{{commit}}"], cwd=repo, capture_output=True
        )
        if proc.returncode:
            found.append(f"release {tag} ({commit}) is not in the history of {repo}")
    return found + kit_problems(publishing=False)


def kit_version() -> str:
    return str(tomllib.loads((KIT / "pyproject.toml").read_text())["project"]["version"])


def _parts(version: str) -> tuple[int, ...]:
    return tuple(int(p) for p in version.removeprefix("v").split("."))


def kit_problems(publishing: bool) -> list[str]:
    """The kit's version against CHANGELOG.md's newest release: never older (the next release's
    version while it is unreleased); the same when it is published."""
    version, releases = kit_version(), changelog_releases()
    newest = max(releases, key=_parts) if releases else "v0.0.0"
    if publishing and _parts(version) != _parts(newest):
        return [f"the kit is {version}, CHANGELOG.md's newest release {newest}: release both"]
    if _parts(version) < _parts(newest):
        return [f"the kit is {version}, older than CHANGELOG.md's newest release {newest}"]
    return []


def build_kit(out: Path, isolated: bool = True) -> list[Path]:
    """The kit's sdist and wheel, built into `out` (the wheel from the sdist, as `python -m
    build` does; `isolated=False` uses this environment's hatchling, as the tests do) and
    checked by `twine check --strict`; raises RuntimeError on a failure."""
    build = [sys.executable, "-m", "build", "--outdir", str(out), str(KIT)]
    _check_run(build if isolated else [*build, "--no-isolation"])
    dists = sorted(out.glob(f"pytest_vllm_plugin-{kit_version()}*"))
    _check_run([sys.executable, "-m", "twine", "check", "--strict", *map(str, dists)])
    return dists


def _check_run(cmd: list[str]) -> None:
    proc = subprocess.run(cmd, capture_output=True, text=True)
    if proc.returncode:
        raise RuntimeError(f"{' '.join(cmd[1:4])} failed:\n{proc.stdout}{proc.stderr}")


def tag(repo: Path) -> dict[str, str]:
    """Tag every recorded release in `repo` (moving tags that point elsewhere)."""
    found = problems(repo)
    if found:
        raise RuntimeError("; ".join(found))
    tags = recorded()
    for name, commit in tags.items():
        cmd = ["git", "tag", "-f", name, commit]
        subprocess.run(cmd, cwd=repo, check=True, capture_output=True)
    return tags


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("command", choices=["tag", "check", "kit"])
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="default: here")
    parser.add_argument("--out", type=Path, default=Path("dist"), help="kit: default ./dist")
    args = parser.parse_args()
    if args.command == "kit":
        try:
            if found := kit_problems(publishing=True):
                raise RuntimeError("; ".join(found))
            dists = build_kit(args.out)
        except RuntimeError as err:
            sys.exit(f"release: {err}")
        print("\n".join(map(str, dists)))
        print(f"now: twine upload {args.out}/pytest_vllm_plugin-{kit_version()}*")
        return
    if args.command == "check":
        found = problems(args.repo)
        print("\n".join(found) or f"ok: {', '.join(recorded())}")
        sys.exit(1 if found else 0)
    try:
        tags = tag(args.repo)
    except RuntimeError as err:
        sys.exit(f"release: {err}")
    for name, commit in tags.items():
        print(f"{name} -> {commit[:12]}")
    print("now: git push origin --tags")


if __name__ == "__main__":
    main()

"""Release tags of the template: `python -m tools.release tag` (maintainers, before publishing).

The releases are recorded in tests/update/releases.yml (tag -> commit), one for every
`## vX.Y.Z` heading of CHANGELOG.md. `tag` creates each recorded tag at its commit in the
repository it runs in (a clone about to be pushed), moving a tag that points elsewhere, after
checking that the two lists agree and that every commit exists. Then
`git push origin --tags` publishes them: `copier update` in generated plugins takes the newest
tag, and `--vcs-ref TAG` any of them. `check` only checks. Tier 4 tags its temporary clone of
the template with the same function, so the tests update from exactly these commits.
"""

from __future__ import annotations

import argparse
import re
import subprocess
import sys
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
RELEASES = ROOT / "tests" / "update" / "releases.yml"
CHANGELOG = ROOT / "CHANGELOG.md"


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
    return found


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
    parser.add_argument("command", choices=["tag", "check"])
    parser.add_argument("--repo", type=Path, default=Path.cwd(), help="default: here")
    args = parser.parse_args()
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

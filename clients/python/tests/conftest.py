"""Starts `agent serve` from this checkout on a free port, once per env, for the tests to drive."""
from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path
from typing import Iterator

import pytest

REPO = Path(__file__).resolve().parents[3]


class Served:
    def __init__(self, spec: str, out: Path, *extra: str):
        self.proc = subprocess.Popen(
            ["node", str(REPO / "bin" / "agent.js"), "serve", spec, "--port", "0", "--json", "--out", str(out), "--max-steps", "40", *extra],
            cwd=REPO,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        assert self.proc.stdout is not None
        line = self.proc.stdout.readline()
        if not line:
            raise RuntimeError(f"agent serve {spec} did not start: {self.proc.stderr.read() if self.proc.stderr else ''}")
        listening = json.loads(line)
        self.url: str = listening["url"]
        self.dir = Path(listening["dir"])

    def wait_idle(self, timeout_s: float = 30) -> None:
        """Until the server has seen every session go (a socket's close reaches it a moment after the client's returns)."""
        deadline = time.monotonic() + timeout_s
        while json.load(urllib.request.urlopen(f"{self.url}/health"))["sessions"] > 0:
            if time.monotonic() > deadline:
                raise TimeoutError("sessions still open on the server")
            time.sleep(0.02)

    def stop(self) -> dict:
        """Stops the server as Ctrl-C does; returns the run's summary."""
        self.proc.send_signal(signal.SIGINT)
        out, err = self.proc.communicate(timeout=60)
        assert self.proc.returncode in (0, 130), err
        return json.loads(out.strip().splitlines()[-1])["summary"]


@pytest.fixture(scope="module")
def weather(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served("fixtures/weather", tmp_path_factory.mktemp("runs"))
    yield served
    served.stop()


@pytest.fixture(scope="module")
def airline(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    served = Served("tau-bench/airline", tmp_path_factory.mktemp("runs"))
    yield served
    served.stop()


def start_tiny_server(tmp: Path, script: list) -> Iterator[dict]:
    """examples/python/tiny_vllm_server.py on a free port, its replies scripted where a prompt matches (so
    that tool calls happen on a random model), every completion logged: yields its URL and the log's path."""
    pytest.importorskip("torch", reason="torch is not installed: pip install torch transformers")
    pytest.importorskip("transformers", reason="transformers is not installed: pip install transformers")
    (tmp / "script.json").write_text(json.dumps(script))
    log = tmp / "completions.jsonl"
    server = REPO / "examples" / "python" / "tiny_vllm_server.py"
    proc = subprocess.Popen([sys.executable, str(server), "--port", "0", "--script", str(tmp / "script.json"), "--log", str(log)], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    assert proc.stdout is not None
    line = proc.stdout.readline()
    if not line.startswith("READY "):
        proc.kill()
        raise RuntimeError(f"the tiny server did not start: {proc.stderr.read() if proc.stderr else ''}")
    yield {"url": line.split()[1], "log": log}
    proc.terminate()
    proc.wait(timeout=30)


def tasks(suite: str) -> list:
    path = REPO / "fixtures" / suite / "tasks" / "test.jsonl"
    return [json.loads(line) for line in path.read_text().splitlines() if line.strip()]


os.environ.setdefault("NO_COLOR", "1")

"""The Python blocks of the README and the docs that drive `agent serve` run as written, against a served weather env.

Each block that talks to the address the docs serve on (http://127.0.0.1:8000) runs in a fresh
interpreter with that address replaced by the test server's; nothing else in it is changed. The
trainer blocks of docs/how-to/export.md are test_readme.py's.
"""
from __future__ import annotations

import re
import subprocess
import sys

import pytest

from .conftest import REPO, Served

DOCUMENTED = "http://127.0.0.1:8000"
PAGES = ["README.md", "docs/how-to/serve-python.md"]


def served_blocks() -> list[tuple[str, str]]:
    out = []
    for page in PAGES:
        text = (REPO / page).read_text()
        for body in re.findall(r"```python\n(.*?)```", text, flags=re.S):
            if DOCUMENTED in body:
                out.append((page, body))
    return out


def test_the_docs_have_the_blocks_this_test_runs() -> None:
    assert {page for page, _ in served_blocks()} == set(PAGES)


@pytest.mark.parametrize("page,body", served_blocks(), ids=lambda v: v if v in PAGES else "")
def test_block_runs_as_written(weather: Served, page: str, body: str) -> None:
    done = subprocess.run([sys.executable, "-c", body.replace(DOCUMENTED, weather.url)], cwd=REPO, capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, f"{page} block failed:\n{body}\n{done.stderr[-3000:]}"
    assert "Traceback" not in done.stderr

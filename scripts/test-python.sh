#!/usr/bin/env bash
# The Python client's tests (clients/python) against `agent serve` from this checkout. The venv is
# made once in .venv/ and reused: installs stay out of the test's hot path. Packages come from the
# machine's pip configuration (on CI machines, a local index: no internet needed).
set -euo pipefail
cd "$(dirname "$0")/.."
VENV="${AGENT_PY_VENV:-.venv}"
if [ ! -x "$VENV/bin/python" ]; then
  python3 -m venv "$VENV"
fi
VENV="$(cd "$VENV" && pwd)"
# Prefer the machine's local indexes when it has them: pip then never waits on a registry it cannot reach.
PIP_ARGS=()
for index in /opt/pypi/simple /opt/pypi-more/simple; do
  [ -d "$index" ] && PIP_ARGS+=(--extra-index-url "file://$index")
done
if [ ${#PIP_ARGS[@]} -gt 0 ]; then PIP_ARGS=(--index-url "file:///opt/pypi/simple" "${PIP_ARGS[@]:2}"); fi
has() { "$VENV/bin/python" -c "import $1" 2>/dev/null; }
pip_install() { "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PIP_ARGS[@]}" "$@"; }
if ! has 'agentic_rl, pytest, pytest_asyncio, xdist, websockets, prometheus_client, gymnasium, mypy, openai, anthropic' || ! [ -x "$VENV/bin/ruff" ]; then
  pip_install -e 'clients/python[test]' prometheus-client
fi
# The examples' and the export readers' heavy dependencies (torch CPU, TRL, pyarrow, datasets,
# polars): their tests skip, saying so, where these cannot be installed.
if ! has 'torch, matplotlib, trl, pyarrow, datasets, polars'; then
  pip_install torch matplotlib trl pyarrow datasets polars || echo "test-python: torch/matplotlib/trl/pyarrow/datasets/polars could not be installed: the tests that need them will skip" >&2
fi
# Caches go into the venv, never into the checkout (package.json's test:python fails a run that changes it).
export PYTHONPYCACHEPREFIX="$VENV/cache/pycache" RUFF_CACHE_DIR="$VENV/cache/ruff" MYPY_CACHE_DIR="$VENV/cache/mypy"
# The client's own checks first: lint, and strict types over the package.
(cd clients/python && "$VENV/bin/ruff" check agentic_rl tests && "$VENV/bin/python" -m mypy)
# Two workers: most tests wait on servers (agent serve, the tiny model server), and the one that
# trains a model keeps a core busy for a minute while the rest run beside it.
exec "$VENV/bin/python" -m pytest -q -n 2 -o cache_dir="$VENV/cache/pytest" clients/python "$@"

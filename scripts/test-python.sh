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
# Prefer the machine's local indexes when it has them: pip then never waits on a registry it cannot reach.
PIP_ARGS=()
for index in /opt/pypi/simple /opt/pypi-more/simple; do
  [ -d "$index" ] && PIP_ARGS+=(--extra-index-url "file://$index")
done
if [ ${#PIP_ARGS[@]} -gt 0 ]; then PIP_ARGS=(--index-url "file:///opt/pypi/simple" "${PIP_ARGS[@]:2}"); fi
if ! "$VENV/bin/python" -c 'import agentic_rl, pytest, pytest_asyncio, websockets' 2>/dev/null; then
  "$VENV/bin/pip" install --quiet --disable-pip-version-check "${PIP_ARGS[@]}" -e clients/python pytest pytest-asyncio
fi
exec "$VENV/bin/python" -m pytest -q clients/python "$@"

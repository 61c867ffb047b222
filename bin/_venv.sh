# Sourced by bin/tablectl and bin/test: make ./.venv with the project installed, once.
# A fresh Debian machine with Python 3.11+ is enough; nothing else is assumed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
# A change to the dependencies or their pins installs again.
STAMP="$VENV/.installed-$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -c1-16)-$1"

if [ ! -x "$VENV/bin/python" ]; then
    if ! "$PY" -m venv "$VENV" 2>/dev/null; then
        echo "bin: python3 -m venv failed; installing python3-venv from Debian" >&2
        if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
        else sudo apt-get update -qq && sudo apt-get install -y -qq python3-venv >/dev/null; fi
        "$PY" -m venv "$VENV"
    fi
fi
if [ ! -f "$STAMP" ]; then
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    # Exact versions from constraints.txt (bin/pin refreshes it): every machine and CI run tests and
    # runs the same releases, not whatever is newest that day.
    if [ "$1" = dev ]; then
        "$VENV/bin/python" -m pip install -q -c "$ROOT/constraints.txt" -e "$ROOT[dev]" >&2
    else
        "$VENV/bin/python" -m pip install -q -c "$ROOT/constraints.txt" -e "$ROOT" >&2
    fi
    rm -f "$VENV"/.installed-*
    touch "$STAMP"
fi

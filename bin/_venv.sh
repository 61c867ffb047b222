# Sourced by bin/tablectl and bin/test: make ./.venv with the project installed, once.
# A fresh Debian machine with Python 3.11+ is enough; nothing else is assumed.
set -euo pipefail
ROOT="$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)"
VENV="$ROOT/.venv"
PY="${PYTHON:-python3}"
# A change to the dependencies or their pins installs again. One stamp for both callers: it says
# which set is installed, and dev (bin/test) is a superset of run (bin/tablectl), so switching
# between the two installs nothing once dev is in.
STAMP="$VENV/.installed-$(cat "$ROOT/pyproject.toml" "$ROOT/constraints.txt" | sha256sum | cut -c1-16)"
HAVE=""
[ -f "$STAMP" ] && HAVE="$(cat "$STAMP")"

if [ ! -x "$VENV/bin/python" ]; then
    # The first run takes a minute or more before anything else happens: say what it is doing.
    echo "bin: first run: making $VENV (a Python virtual environment for tablectl)" >&2
    if ! "$PY" -m venv "$VENV" 2>/dev/null; then
        echo "bin: python3 -m venv failed; installing python3-venv from Debian" >&2
        if [ "$(id -u)" = 0 ]; then apt-get update -qq && apt-get install -y -qq python3-venv >/dev/null
        else sudo apt-get update -qq && sudo apt-get install -y -qq python3-venv >/dev/null; fi
        "$PY" -m venv "$VENV"
    fi
fi
if [ -z "$HAVE" ] || { [ "$1" = dev ] && [ "$HAVE" != dev ]; }; then
    # PYTHONWARNINGS: setuptools' editable build prints a boxed warning about the flat layout on
    # every install; it says nothing a user can act on here.
    export PYTHONWARNINGS=ignore
    if [ "$1" = dev ]; then what="tablectl with its test and lint tools"; else what="tablectl"; fi
    echo "bin: installing $what and the pinned dependencies (constraints.txt) into $VENV;" \
        "this takes a minute or two, once (again only when pyproject.toml or constraints.txt change)" >&2
    "$VENV/bin/python" -m pip install -q --upgrade pip >&2
    # Exact versions from constraints.txt (bin/pin refreshes it): every machine and CI run tests and
    # runs the same releases, not whatever is newest that day. run takes the report extra too, so
    # `bin/tablectl archive report --html` works from a checkout.
    if [ "$1" = dev ]; then
        "$VENV/bin/python" -m pip install -q -c "$ROOT/constraints.txt" -e "$ROOT[dev]" >&2
    else
        "$VENV/bin/python" -m pip install -q -c "$ROOT/constraints.txt" -e "$ROOT[report]" >&2
    fi
    unset PYTHONWARNINGS
    rm -f "$VENV"/.installed-*
    echo "$1" > "$STAMP"
    echo "bin: $VENV is ready" >&2
fi

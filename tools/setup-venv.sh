#!/usr/bin/env bash
# Create a virtualenv with the package and its test requirements.
#
#   tools/setup-venv.sh VENV_DIR            # create, or update in place
#   tools/setup-venv.sh VENV_DIR --fresh    # start from an empty virtualenv
#
# The package is installed editable (pip install -e .), which compiles the C
# fit helper next to its sources.  pip's output goes to VENV_DIR.pip.log;
# only a failure shows it.  PYTHON picks the interpreter (default python3).
set -euo pipefail

if [ $# -lt 1 ]; then
    echo "usage: $0 VENV_DIR [--fresh]" >&2
    exit 2
fi
venv=$(realpath -m "$1")
fresh=${2:-}
cd "$(dirname "$0")/.."

python=${PYTHON:-python3}
log=$venv.pip.log
: > "$log"

if [ "$fresh" = --fresh ] || [ ! -x "$venv/bin/python" ]; then
    rm -rf "$venv"
    echo "creating $venv with $("$python" --version 2>&1)"
    "$python" -m venv "$venv"
fi

pip_logged() {
    if ! "$venv/bin/python" -m pip "$@" >> "$log" 2>&1; then
        tail -n 40 "$log" >&2
        echo "pip $* failed; full output in $log" >&2
        exit 1
    fi
}

echo "installing requirements and the package (pip output in $log)"
pip_logged install --upgrade pip
# --no-compile: pip would byte-compile all ~10,000 modules of the
# requirements (Nova's alone: 7.5 s of CPU); the tests import a fraction of
# them, compiled once on first import.
pip_logged install --no-compile -r requirements.txt -r test-requirements.txt
pip_logged install -e .

#!/usr/bin/env bash
# Check this package against one supported Nova release: build (or reuse) a
# virtualenv with that release's pins (tools/constraints/nova-NN.txt), then
# run the tests of the code that depends on what differs between releases:
# the compatibility seam (tests/unit/test_compat.py), the fit engine with
# its differential tests against that release's own nova.virt.hardware
# (tests/unit/fit/), the filters built on it (tests/unit/filters/), and the
# kept host manager's weighing and filtering against that release's weight
# and filter handlers (tests/unit/test_host_state_weighing.py,
# tests/unit/test_filter_handler.py).
# Ends with tools/run-tests.sh's line "N passed, N failed, N skipped";
# exits non-zero if a test failed, none ran, or the venv could not be built.
#
#   tools/release-check.sh 31            # Nova 31 (2025.1)
#   tools/release-check.sh 2025.1        # the same
#   tools/release-check.sh 31 REGEX      # other tests: a stestr filter over
#                                        # tests/unit
#
# The virtualenv is .release-venv/nova-NN (NSE_RELEASE_VENV sets another
# path).  It is rebuilt only when the constraints file or the requirement
# files changed since it was built (a stamp inside it records their
# checksums); NSE_RELEASE_FRESH=1 rebuilds it anyway.  pip's output goes to
# VENV.pip.log and is shown only on a failure.  PYTHON picks the
# interpreter (default python3).  The property tests draw
# NOVA_SCHED_EXT_HYPOTHESIS_EXAMPLES examples each (100 unless set).
set -euo pipefail

cd "$(dirname "$0")/.."
me=tools/release-check.sh

usage() {
    echo "usage: $me RELEASE [STESTR_REGEX]   (RELEASE: 31, 32, 33, 34 or" \
        "2025.1, 2025.2, 2026.1, 2026.2)" >&2
    exit 2
}
[ $# -ge 1 ] || usage
case "$1" in
    -h|--help) sed -n '2,25p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    31|2025.1) major=31 ;;
    32|2025.2) major=32 ;;
    33|2026.1) major=33 ;;
    34|2026.2) major=34 ;;
    *) echo "$me: error: unknown release '$1'; supported: 31 (2025.1)," \
           "32 (2025.2), 33 (2026.1), 34 (2026.2)" >&2; exit 2 ;;
esac
shift
regex=${1:-'^tests\.unit\.(test_compat|test_host_state_weighing|test_filter_handler|fit|filters)\.'}

constraints=tools/constraints/nova-$major.txt
if [ ! -s "$constraints" ]; then
    echo "$me: error: no $constraints; write it with" \
        "python3 tools/release-constraints.py $major" >&2
    exit 1
fi

venv=$(realpath -m "${NSE_RELEASE_VENV:-.release-venv/nova-$major}")
log=$venv.pip.log
python=${PYTHON:-python3}
stamp=$venv/.nse-release-stamp
want=$(cat "$constraints" requirements.txt test-requirements.txt setup.cfg \
       | sha256sum | cut -d' ' -f1)

started=$SECONDS
if [ "${NSE_RELEASE_FRESH:-}" != 1 ] && [ -x "$venv/bin/python" ] \
        && [ "$(cat "$stamp" 2>/dev/null)" = "$want" ]; then
    echo "reusing $venv (Nova $major pins unchanged)"
else
    mkdir -p "$(dirname "$venv")"
    : > "$log"
    pip_logged() {
        if ! "$venv/bin/python" -m pip "$@" >> "$log" 2>&1; then
            tail -n 30 "$log" >&2
            echo "$me: error: pip $* failed; full output in $log" >&2
            exit 1
        fi
    }
    rm -rf "$venv"
    echo "building $venv for Nova $major with $("$python" --version 2>&1)" \
        "(pip output in $log)"
    "$python" -m venv "$venv"
    # The pip a new virtualenv has (23.2 with Python 3.11.7) resolves and
    # installs these pins in four times the time of a current one (82 s
    # against 20 s here); tools/setup-venv.sh upgrades it for .ci-venv too.
    pip_logged install --upgrade pip
    # --no-compile: see tools/setup-venv.sh.
    pip_logged install --no-compile -c "$constraints" \
        -r requirements.txt -r test-requirements.txt
    pip_logged install --no-compile -c "$constraints" -e .
    echo "$want" > "$stamp"
fi
installed=$("$venv/bin/python" -c \
    'import importlib.metadata as m; print(m.version("nova"))')
case "$installed" in
    "$major".*) ;;
    *) echo "$me: error: $venv has nova $installed, not $major.*;" \
           "rebuild it with NSE_RELEASE_FRESH=1" >&2; exit 1 ;;
esac
echo "venv ready in $((SECONDS - started)) s: nova $installed"

export NOVA_SCHED_EXT_HYPOTHESIS_EXAMPLES=${NOVA_SCHED_EXT_HYPOTHESIS_EXAMPLES:-100}
out=$(mktemp)
trap 'rm -f "$out"' EXIT
status=0
PATH=$venv/bin:$PATH VIRTUAL_ENV=$venv tools/run-tests.sh unit "$regex" \
    | tee "$out" || status=$?
echo "Nova $installed: venv and tests in $((SECONDS - started)) s"
# The last line stays run-tests.sh's "N passed, N failed, N skipped".
tail -n 1 "$out"
exit "$status"

#!/usr/bin/env bash
# Run tests against a C fit helper built with AddressSanitizer and
# UndefinedBehaviorSanitizer (tox -e asan).
#
# The sanitized helper is compiled into a copy of the package and tests in a
# temporary directory, so the helper compiled in place for the other test
# runs is left untouched.  Takes the compiler flags from the environment
# (CFLAGS, LDFLAGS, NOVA_SCHED_EXT_SANITIZE=1, as tox.ini sets them) and
# stestr filter arguments (default: tests.unit.fit).
set -euo pipefail

src=$(cd "$(dirname "$0")/.." && pwd)
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

export NOVA_SCHED_EXT_SANITIZE=1
export ASAN_OPTIONS=${ASAN_OPTIONS:-detect_leaks=0}
export UBSAN_OPTIONS=${UBSAN_OPTIONS:-print_stacktrace=1}
case " ${CFLAGS:-} " in
    *-fsanitize=*) ;;
    *) echo "CFLAGS has no -fsanitize flag; run through tox -e asan" >&2
       exit 2 ;;
esac

tar -C "$src" --exclude='*.so' --exclude='__pycache__' \
    -cf - nova_sched_ext nova_sched_ext_tools tests tools .stestr.conf |
    tar -C "$work" -xf -
cd "$work"

# Compile in place, in the copy, through the package's own cffi build
# script (it adds the sanitizer flags for NOVA_SCHED_EXT_SANITIZE=1).
so=$(python - <<'PY'
import runpy

builder = runpy.run_path('nova_sched_ext/fit/_cfit_build.py')['ffibuilder']
print(builder.compile(tmpdir='.'))
PY
)
if ! nm -D "$so" | grep -q __asan_; then
    echo "$so was not built with AddressSanitizer" >&2
    exit 1
fi

libasan=$(gcc -print-file-name=libasan.so)
if [ ! -e "$libasan" ]; then
    echo "gcc has no libasan.so (install libasan for gcc $(gcc -dumpversion))" >&2
    exit 1
fi
export LD_PRELOAD=$libasan

python - <<'PY'
import os

from nova_sched_ext.fit import engine

assert engine.__file__.startswith(os.getcwd()), engine.__file__
backend = engine.backend_name()
print('fit backend: %s (sanitized build)' % backend)
assert backend == 'c', 'the sanitized C helper did not load'
PY

stestr --test-path ./tests/unit --top-dir ./ run "${@:-tests.unit.fit}"

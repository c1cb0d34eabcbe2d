#!/usr/bin/env bash
# Run the unit and functional tests with stestr and end with one plain line,
# "N passed, N failed, N skipped", after one line per skipped test with the
# reason it gave.  Exits non-zero if any test failed, if a suite could not
# be loaded, or if no test ran at all.
#
# A passing test prints nothing but its result line: each test captures its
# log and output (tests/base.py), and stestr shows them for a failing test
# only, after its traceback.
#
# Needs an environment where the package and test-requirements.txt are
# installed (bash .ci/run builds one from nothing and then calls this).
#
#   tools/run-tests.sh                 # unit + functional
#   tools/run-tests.sh unit            # one suite
#   tools/run-tests.sh unit fit        # a suite with a stestr filter regex
set -uo pipefail

cd "$(dirname "$0")/.."

if [ $# -gt 0 ]; then
    suites=("$1"); shift
else
    suites=(unit functional)
fi

results=$(mktemp -d)
trap 'rm -rf "$results"' EXIT

status=0
passed=0; failed=0; skipped=0
broken=()
for suite in "${suites[@]}"; do
    if [ ! -d "tests/$suite" ]; then
        echo "no test suite tests/$suite" >&2
        exit 2
    fi
    printf "\n=== %s tests\n" "$suite"
    # Each suite is discovered on its own, so a module that fails to import
    # in one suite does not hide the tests of the other; each gets a fresh
    # stestr repository, so a suite that recorded no run cannot be counted
    # with an earlier run's results.
    repo="$results/$suite"
    mkdir -p "$repo"
    stestr --repo-url "$repo" init > /dev/null
    suite_ok=true
    # --suppress-attachments: what a passing test printed stays in the
    # stestr repository; a failing test shows it all.
    stestr --repo-url "$repo" --test-path "./tests/$suite" --top-dir ./ \
        run --suppress-attachments "$@" || suite_ok=false
    stats=$(stestr --repo-url "$repo" last --subunit 2>/dev/null \
            | subunit-stats 2>/dev/null)
    p=$(sed -n 's/^Passed tests: *\([0-9]*\)$/\1/p' <<< "$stats")
    f=$(sed -n 's/^Failed tests: *\([0-9]*\)$/\1/p' <<< "$stats")
    s=$(sed -n 's/^Skipped tests: *\([0-9]*\)$/\1/p' <<< "$stats")
    p=${p:-0}; f=${f:-0}; s=${s:-0}
    { stestr --repo-url "$repo" last --subunit 2>/dev/null || true; } \
        | python tools/skip-reasons.py >> "$results/skipped" \
        || echo "(could not read the skip reasons of the $suite tests)" \
            >> "$results/skipped"
    if ! $suite_ok && [ "$f" -eq 0 ]; then
        # stestr failed without a failing test: the suite could not be
        # loaded (an import error in discovery, a crashed worker).  Count
        # it as one failure so the summary cannot read as a clean run.
        broken+=("$suite")
        f=1
    fi
    passed=$((passed + p)); failed=$((failed + f)); skipped=$((skipped + s))
done

if [ ${#broken[@]} -gt 0 ]; then
    echo "stestr failed without reporting a failed test in:" \
        "${broken[*]} (see the output above); counted as one failure each" >&2
fi
if [ $((passed + failed)) -eq 0 ]; then
    echo "no test ran" >&2
    status=1
fi
[ "$failed" -eq 0 ] || status=1

if [ -s "$results/skipped" ]; then
    printf "\nskipped tests (id: reason):\n"
    sed 's/^/  /' "$results/skipped"
fi
echo "$passed passed, $failed failed, $skipped skipped"
exit "$status"

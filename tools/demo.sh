#!/usr/bin/env bash
# Set up a virtualenv (.venv, reused on later runs) and run the demo:
# a real Nova in one process with the plugins enabled from nova.conf.
# Arguments go to nova-sched-ext-demo.
set -euo pipefail

cd "$(dirname "$0")/.."
tools/setup-venv.sh .venv
exec .venv/bin/nova-sched-ext-demo "$@"

#!/usr/bin/env python3
# Licensed under the Apache License, Version 2.0 (the "License"); you may
# not use this file except in compliance with the License. You may obtain
# a copy of the License at
#
#      http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS, WITHOUT
# WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied. See the
# License for the specific language governing permissions and limitations
# under the License.


"""devstack-lite's launcher of nova-sched-ext-scheduler, for fault rounds.

Test clouds only: the devstack plugin puts it before each scheduler's
command line (``NOVA_SCHED_EXT_SCHEDULER_LAUNCHER``)::

    scheduler_launcher.py --faults DIR [--config-file F ...] -- \\
        /venv/bin/nova-sched-ext-scheduler --config-file nova.conf

It runs the scheduler command in this process, exactly as its console
script would, with two additions:

* the ``--config-file`` options given before ``--`` are added after the
  command's own (devstack-lite's fault proxies for placement and the
  Compute API);
* the preemption driver's test hook (``driver.FAULT_INJECTION``) is set to
  a function that, when the file ``DIR/kill-at`` names the point an
  eviction reaches (``recorded``, ``reserved``, ``evicted`` after a
  victim's eviction was sent, ``gone``), renames the file (so exactly one
  scheduler takes it), writes ``DIR/killed`` (point, pid, victim) and
  sends SIGKILL to its own process group: the service's master process
  and its worker die at once, with no handler and no clean-up, as
  ``kill -9`` of the service (systemd kills the unit's processes alike)
  leaves them. devstack-lite starts each service in a process group of
  its own.

Nothing of this is in the package: a production scheduler never has the
hook set.
"""

import argparse
import os
import signal
import sys


def kill_hook(faults_dir):
    """The FAULT_INJECTION callable for ``faults_dir``."""
    kill_at = os.path.join(faults_dir, 'kill-at')

    def hook(point, **details):
        try:
            with open(kill_at) as f:
                wanted = f.read().strip()
        except FileNotFoundError:
            return
        if wanted != point:
            return
        claimed = '%s.%d' % (kill_at, os.getpid())
        try:
            os.rename(kill_at, claimed)
        except FileNotFoundError:
            # Another scheduler reached the point first.
            return
        with open(os.path.join(faults_dir, 'killed'), 'w') as f:
            f.write('%s %d %s\n' % (point, os.getpid(),
                                    details.get('victim', '-')))
        sys.stderr.write('scheduler_launcher: SIGKILL at %s (%s)\n'
                         % (point, details))
        sys.stderr.flush()
        os.killpg(os.getpgid(0), signal.SIGKILL)

    return hook


def parse(argv):
    if '--' not in argv:
        sys.exit('usage: scheduler_launcher.py --faults DIR '
                 '[--config-file F ...] -- SCHEDULER-COMMAND ARGS...')
    split = argv.index('--')
    parser = argparse.ArgumentParser(prog='scheduler_launcher.py')
    parser.add_argument('--faults', required=True,
                        help='directory of the fault control files')
    parser.add_argument('--config-file', action='append', default=[],
                        help='more configuration for the scheduler')
    args = parser.parse_args(argv[:split])
    command = argv[split + 1:]
    if not command or \
            os.path.basename(command[0]) != 'nova-sched-ext-scheduler':
        sys.exit('scheduler_launcher.py runs nova-sched-ext-scheduler, not '
                 '%r' % (command[:1] or ['nothing'])[0])
    return args, command


def main(argv=None):
    args, command = parse(sys.argv[1:] if argv is None else argv)
    # Imported first: the command's module patches threading on import,
    # which must happen before the rest of Nova is imported.
    from nova_sched_ext.cmd import scheduler
    from nova_sched_ext.preemption import driver

    driver.FAULT_INJECTION = kill_hook(args.faults)
    extra = []
    for path in args.config_file:
        extra += ['--config-file', path]
    return scheduler.main(command + extra)


if __name__ == '__main__':
    sys.exit(main())

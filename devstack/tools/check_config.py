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


"""Helpers of the nova-sched-ext devstack plugin, run with Nova's python.

``options``
    Print the options of the ``[nova_sched_ext]`` group, one name a line.
    plugin.sh maps the variable ``NOVA_SCHED_EXT_<NAME>`` (upper case) to
    each of them.

``renamed``
    Print ``OLD NEW`` for each option of ``[nova_sched_ext]`` that has a
    deprecated name, one a line: plugin.sh still reads the variable of the
    old name.

``check --config-file nova.conf [--config-file ...]``
    Load the configuration the way the scheduler will and stop early on
    what would otherwise break it later: a name in ``[filter_scheduler]
    enabled_filters`` that no ``available_filters`` entry provides, a
    ``weight_classes`` entry that does not load, a ``[nova_sched_ext]``
    option with a bad value, an unknown ``scheduler_driver``, a driver other
    than the default without nova-sched-ext-scheduler, the preemption
    driver without evictor credentials, a fake NUMA topology that does not
    parse or a fake NUMA virt driver that does not load, a scheduler
    command that is not installed. Every problem is printed on
    stderr, one a line, and the exit status is 1 if there is any.
"""

import argparse
import os
import shutil
import sys
import warnings

GROUP = 'nova_sched_ext'


def _package_opts():
    """The options of [nova_sched_ext]; importing them registers them."""
    from nova_sched_ext.conf import scheduler

    return list(scheduler.ALL_OPTS)


def cmd_options(args):
    for opt in _package_opts():
        print(opt.dest)
        if args.old_names:
            for old in opt.deprecated_opts:
                if old.name and old.group in (None, GROUP):
                    print(old.name.replace('-', '_'))
    return 0


def cmd_renamed(args):
    for opt in _package_opts():
        for old in opt.deprecated_opts:
            if old.name and old.group in (None, GROUP):
                print(old.name.replace('-', '_'), opt.dest)
    return 0


def _check_filters(conf, problems):
    from nova.scheduler import filters

    handler = filters.HostFilterHandler()
    try:
        classes = handler.get_matching_classes(
            conf.filter_scheduler.available_filters)
    except Exception as exc:
        problems.append('[filter_scheduler] available_filters %s does not '
                        'load: %s' % (conf.filter_scheduler.available_filters,
                                      exc))
        return
    known = {cls.__name__ for cls in classes}
    enabled = conf.filter_scheduler.enabled_filters
    for name in enabled:
        if name not in known:
            problems.append(
                '[filter_scheduler] enabled_filters names %s, but no '
                '[filter_scheduler] available_filters entry (%s) provides a '
                'filter of that name. Known filters of the package: %s.'
                % (name, ', '.join(conf.filter_scheduler.available_filters),
                   ', '.join(sorted(cls.__name__ for cls in classes
                                    if cls.__module__.startswith(
                                        'nova_sched_ext'))) or 'none'))
    if ('NUMAFitFilter' in enabled and 'NUMATopologyFilter' in enabled and
            enabled.index('NUMAFitFilter') >
            enabled.index('NUMATopologyFilter')):
        problems.append('[filter_scheduler] enabled_filters: NUMAFitFilter '
                        'must come before NUMATopologyFilter, or it saves '
                        'nothing.')


def _check_weighers(conf, problems):
    from nova.scheduler import weights

    try:
        weights.HostWeightHandler().get_matching_classes(
            conf.filter_scheduler.weight_classes)
    except Exception as exc:
        problems.append('[filter_scheduler] weight_classes %s does not '
                        'load: %s' % (','.join(
                            conf.filter_scheduler.weight_classes), exc))


def _check_package_opts(conf, problems):
    for opt in _package_opts():
        try:
            value = getattr(conf[GROUP], opt.dest)
        except Exception as exc:
            # oslo.config names the file and location first; the reason is
            # what a deployer needs.
            reason = str(exc).rsplit(' is not valid: ', 1)[-1]
            problems.append('[%s] %s: %s' % (GROUP, opt.dest, reason))
            continue
        if opt.dest == 'numa_slot_flavor_weights':
            for flavor, weight in (value or {}).items():
                try:
                    ok = float(weight) > 0
                except ValueError:
                    ok = False
                if not ok:
                    problems.append(
                        '[%s] numa_slot_flavor_weights: the weight of %s '
                        'must be a positive number, not %r.'
                        % (GROUP, flavor, weight))


def _check_driver(conf, scheduler_command, problems):
    """The driver exists, runs, and can evict if it is the preemption one."""
    from nova_sched_ext.conf import evictor as evictor_conf
    from nova_sched_ext import registry

    try:
        driver = conf[GROUP].scheduler_driver
        registry.driver_class_path(driver)
    except Exception as exc:
        problems.append(str(exc))
        return
    if driver == 'default':
        return
    if not scheduler_command:
        problems.append(
            '[%s] scheduler_driver = %s only works under '
            'nova-sched-ext-scheduler, and n-sch runs nova-scheduler (set '
            'NOVA_SCHED_EXT_SCHEDULER=auto or True).' % (GROUP, driver))
    if driver == 'preemption':
        evictor = conf[evictor_conf.GROUP_NAME]
        if not evictor.auth_type:
            problems.append(
                '[%s] has no credentials (auth_type, auth_url, username...): '
                'the preemption driver could not evict anything. Nova\'s '
                '[service_user] section, which the plugin copies, is empty.'
                % evictor_conf.GROUP_NAME)


def _check_fake_virt(topologies, problems):
    from nova_sched_ext.virt import layout

    for spec in topologies:
        try:
            layout.parse(spec)
        except ValueError as exc:
            problems.append('fake NUMA topology: %s' % exc)
    try:
        from nova_sched_ext.virt import fake_numa  # noqa: F401
    except Exception as exc:
        problems.append('the fake NUMA virt driver does not load: %s' % exc)


def cmd_check(args):
    # Importing Nova's configuration registers every option the scheduler
    # reads, the package's conf package every option of the package, on
    # the same (oslo.config's global) CONF.
    # Import-time deprecation noise (eventlet) would bury the findings.
    warnings.simplefilter('ignore')
    import nova.conf
    from nova_sched_ext import conf as nse_conf

    conf = nse_conf.CONF
    assert conf is nova.conf.CONF
    problems = []
    try:
        conf([], project='nova', default_config_files=args.config_file)
    except Exception as exc:
        print('nova-sched-ext: cannot read %s: %s'
              % (', '.join(args.config_file), exc), file=sys.stderr)
        return 1
    for check in (_check_filters, _check_weighers, _check_package_opts):
        check(conf, problems)
    _check_driver(conf, args.scheduler_command, problems)
    if args.fake_topology:
        _check_fake_virt(args.fake_topology, problems)
    if args.scheduler_command:
        found = (os.access(args.scheduler_command, os.X_OK) or
                 shutil.which(args.scheduler_command))
        if not found:
            problems.append(
                '%s is not installed: this version of nova-sched-ext has no '
                'scheduler of its own, so preemption and deployment-set '
                'locking cannot be enabled (set '
                'NOVA_SCHED_EXT_SCHEDULER=False or install a version that '
                'has it).'
                % args.scheduler_command)
    for problem in problems:
        print('nova-sched-ext: %s' % problem, file=sys.stderr)
    if not problems:
        print('nova-sched-ext: %s is valid (enabled_filters: %s; '
              'weight_classes: %s)'
              % (', '.join(args.config_file),
                 ','.join(conf.filter_scheduler.enabled_filters),
                 ','.join(conf.filter_scheduler.weight_classes)))
    return 1 if problems else 0


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    options = sub.add_parser('options',
                             help='list the [nova_sched_ext] options')
    options.add_argument('--old-names', action='store_true',
                         help='their deprecated names too')
    sub.add_parser('renamed', help='list the renamed [nova_sched_ext] '
                   'options: OLD NEW')
    check = sub.add_parser('check', help='validate nova.conf')
    check.add_argument('--config-file', action='append', required=True)
    check.add_argument('--fake-topology', action='append', default=[],
                       help='a fake NUMA topology to parse (repeatable)')
    check.add_argument('--scheduler-command',
                       help='a scheduler command that must be installed')
    args = parser.parse_args(argv)
    if args.command == 'options':
        return cmd_options(args)
    if args.command == 'renamed':
        return cmd_renamed(args)
    return cmd_check(args)


if __name__ == '__main__':
    sys.exit(main())

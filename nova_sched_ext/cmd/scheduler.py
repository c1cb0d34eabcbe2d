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

"""nova-sched-ext-scheduler: nova-scheduler with the package's manager.

It is ``nova-scheduler`` (``nova/cmd/scheduler.py`` of the installed
Nova, 31 to 34; where they differ, :mod:`nova_sched_ext.compat`) in every
respect but one: the service runs the package's manager, the *driver* that
``[nova_sched_ext] scheduler_driver`` names in the entry-point namespace
``nova_sched_ext.scheduler_drivers`` (``default``:
:class:`nova_sched_ext.manager.SchedulerManager`; ``preemption``:
:class:`nova_sched_ext.preemption.driver.PreemptionSchedulerManager`).
Same command line (``--config-file``, ``--config-dir``), same
``nova.conf``, same service binary name (``nova-scheduler``) and RPC topic
(``scheduler``), same ``[scheduler] workers``: a deployer replaces the
command and nothing else, and the rest of Nova cannot tell the
difference.

A command line or configuration the service cannot start with ends in one
line on stderr and exit status 2, as a bad argument to any command does:
no configuration file at all (no ``--config-file`` and none of oslo.config's
default locations), a ``--config-file`` or ``--config-dir`` that does not
exist, a file that is a directory, cannot be read, is not UTF-8 or cannot
be parsed, a value of the wrong type in an option read before the service
starts (the logging options, ``[scheduler] workers``), a value that any
option of the package refuses (its type, bounds or choices: every one is
read at start), a scheduler driver, request wrapper or victim strategy
that cannot be loaded, a coordination backend that cannot be used.
"""
# Native threads, as nova-scheduler's default (one line, as Nova's, so that
# the imports below still count as the top of the file); a config file that
# cannot be read is main()'s to report, in one line.
from nova_sched_ext.cli import native_threads  # noqa

import os
import sys

from oslo_concurrency import processutils
from oslo_config import cfg
from oslo_log import log as logging
from oslo_reports import guru_meditation_report as gmr
from oslo_reports import opts as gmr_opts

import nova.conf
from nova import objects
from nova.scheduler import rpcapi
from nova import service
from nova import version

from nova_sched_ext import cli
from nova_sched_ext.cli import config_files
from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext.compat import release
from nova_sched_ext.conf import checks as conf_checks
from nova_sched_ext.conf import evictor as evictor_conf
from nova_sched_ext.conf import scheduler as scheduler_conf
from nova_sched_ext import coordination
from nova_sched_ext import registry
from nova_sched_ext import version as package_version

CONF = nova.conf.CONF
LOG = logging.getLogger(__name__)

#: the service binary the rest of Nova knows the scheduler by
BINARY = 'nova-scheduler'


def create_service():
    """The scheduler service, as ``nova-scheduler`` creates it.

    Its manager is the driver ``[nova_sched_ext] scheduler_driver`` names.
    """
    manager = registry.driver_class_path(
        CONF.nova_sched_ext.scheduler_driver)
    return service.Service.create(
        binary=BINARY, topic=rpcapi.RPC_TOPIC, manager=manager)


#: what ``--help`` says the command is
DESCRIPTION = (
    "nova-scheduler running nova-sched-ext's scheduler manager: the "
    "driver [nova_sched_ext] scheduler_driver names (default: the "
    "package's manager; preemption: the manager that may evict "
    "preemptible instances). Same options, nova.conf and service as "
    "nova-scheduler.")


#: the console scripts' toolkit's, by this module's old name
UsageError = cli.UsageError


def prog_name(argv):
    """The command's name, as oslo.config derives it from ``argv[0]``."""
    prog = os.path.basename(argv[0]) if argv else BINARY
    return prog[:-3] if prog.endswith('.py') else prog


def parse_args(argv, prog):
    """Parse the command line and the configuration like nova-scheduler.

    The command line is parsed once on its own first, with this command's
    description for ``--help`` and the package's version (and Nova's) for
    ``--version``, so that a mistake in it or in the files it
    names is a :class:`UsageError` before Nova sets up RPC and the
    database; then Nova's ``config.parse_args`` parses it as it does for
    ``nova-scheduler``.
    """
    logging.register_options(CONF)
    try:
        # A directory or a file that is not UTF-8 would escape oslo.config
        # as a bare OSError or UnicodeDecodeError.
        config_files.check_command_line(argv[1:], project='nova', prog=prog)
        CONF(argv[1:], project='nova', prog=prog,
             version=package_version.version_string(),
             description=DESCRIPTION)
        found = CONF.config_file or CONF.config_dir
    except cfg.Error as exc:
        raise UsageError(exc) from None
    finally:
        # Nova registers more command-line options before it parses.
        CONF.clear()
    if not found:
        raise UsageError(
            'no configuration file: pass --config-file (for example '
            '--config-file /etc/nova/nova.conf); there is no nova.conf or '
            '%s.conf in ~/.nova, ~, /etc/nova or /etc' % prog)
    nova_compat.parse_args(argv, prog=prog)


def main(argv=None):
    argv = sys.argv if argv is None else argv
    prog = prog_name(argv)
    try:
        parse_args(argv, prog)
        # Every option of the package, now: most are read only by a worker
        # or at a request, where a bad value would be a traceback.
        conf_checks.check_values(
            CONF, scheduler_conf.list_opts() + evictor_conf.list_opts())
        logging.setup(CONF, "nova")
        LOG.info('%s runs on %s, with %s.', prog,
                 'eventlet' if release.monkey_patched() else
                 'native threads', release.name())
        objects.register_all()
        gmr_opts.set_defaults(CONF)
        objects.Service.enable_min_version_cache()

        gmr.TextGuruMeditation.setup_autorun(version, conf=CONF)

        workers = CONF.scheduler.workers or processutils.get_worker_count()
        server = create_service()
        coordination.check_at_start(server.manager)
    except (UsageError, conf_checks.InvalidOptionValue,
            cfg.ConfigSourceValueError) as exc:
        # A value of the wrong type in a file is found only when the
        # option is read.
        sys.exit(cli.report(prog, exc, 2))
    except registry.PluginLoadError as exc:
        # An unknown or broken driver, request wrapper or victim strategy
        # named in the configuration: a scheduler without it would be unsafe.
        sys.exit(cli.report(prog, exc, 2))
    except (coordination.BackendUnsupported,
            coordination.BackendUnusable) as exc:
        # The preemption driver on a backend that cannot record evictions;
        # a backend URL that can never work.
        sys.exit(cli.report(prog, exc, 2))

    # As nova-scheduler does: the executors must not cross the fork of
    # the workers.
    nova_compat.reset_executors()

    service.serve(server, workers=workers)
    service.wait()

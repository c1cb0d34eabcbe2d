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

It is ``nova-scheduler`` (``nova/cmd/scheduler.py`` of Nova 34) in every
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
"""
# autopep8: off
from nova import monkey_patch; monkey_patch.patch(backend='threading')  # noqa
# autopep8: on

import sys

from oslo_concurrency import processutils
from oslo_log import log as logging
from oslo_reports import guru_meditation_report as gmr
from oslo_reports import opts as gmr_opts

import nova.conf
from nova import config
from nova import objects
from nova.scheduler import rpcapi
from nova import service
from nova import thread_pool_factory
from nova import version

from nova_sched_ext import conf as sched_ext_conf  # noqa: registers options
from nova_sched_ext import registry

CONF = nova.conf.CONF

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


def main():
    config.parse_args(sys.argv)
    logging.setup(CONF, "nova")
    objects.register_all()
    gmr_opts.set_defaults(CONF)
    objects.Service.enable_min_version_cache()

    gmr.TextGuruMeditation.setup_autorun(version, conf=CONF)

    try:
        server = create_service()
    except registry.UnknownDriver as exc:
        sys.exit(str(exc))

    workers = CONF.scheduler.workers or processutils.get_worker_count()
    # As nova-scheduler does: the executors must not cross the fork of
    # the workers.
    thread_pool_factory.reset_all_executors()

    service.serve(server, workers=workers)
    service.wait()

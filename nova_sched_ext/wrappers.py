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

"""Request wrappers: what the package's scheduler manager runs around Nova.

:class:`nova_sched_ext.manager.SchedulerManager` runs every scheduling
request through a chain of request wrappers, outermost first, around
Nova's own ``select_destinations``.  The chain is configured like every
other plugin kind: each wrapper is registered in the entry-point namespace
``nova_sched_ext.request_wrappers``, and ``[nova_sched_ext]
request_wrappers`` names the ones to run, in order (outermost first).  A
scheduler driver may add its own inside them
(:attr:`~nova_sched_ext.manager.SchedulerManager.DRIVER_REQUEST_WRAPPERS`).

A third party adds a wrapper by subclassing :class:`RequestWrapper`,
declaring it in its own ``setup.cfg``::

    [entry_points]
    nova_sched_ext.request_wrappers =
        audit = my_package.audit:AuditWrapper

and adding its name to the option, e.g. ``request_wrappers =
deployment_set_lock,audit``.  A name that is not registered, fails to
import or is not a :class:`RequestWrapper` stops the scheduler at start
(:class:`nova_sched_ext.registry.PluginLoadError`): running without a
wrapper the deployer asked for, the deployment-set lock say, is unsafe.
"""

from nova_sched_ext import registry

#: the entry-point namespace of the request wrappers
NAMESPACE = 'nova_sched_ext.request_wrappers'
#: the option that names the wrappers to run
OPTION = '[nova_sched_ext] request_wrappers'


class RequestWrapper(object):
    """Base class of request wrappers.

    The manager builds each wrapper once, with itself as the only argument,
    and shares it between the concurrent requests of its process (Nova 34
    schedules on native threads): a wrapper keeps nothing of one request on
    ``self`` unless it guards it with a lock.

    :param manager: the scheduler manager; its ``host_manager`` and
        ``placement_client`` are Nova's.
    """

    def __init__(self, manager):
        self.manager = manager

    def __call__(self, call_next, context, spec_obj, instance_uuids):
        """Schedule one request; return its selections.

        Do the wrapper's work and call ``call_next(context, spec_obj,
        instance_uuids)`` to go on: the next wrapper, or Nova's own
        ``select_destinations`` for the innermost one.  Raise
        ``nova.exception.NoValidHost`` to refuse the request; the
        ``NoValidHost`` of ``call_next`` arrives as such.  Whatever the
        caller asked for, a wrapper gets and returns Selection objects: a
        list per instance, the selected host first, then the alternates if
        the caller wants them.
        """
        raise NotImplementedError()

    def start(self):
        """Start the wrapper's background work, if any.

        Called once per scheduler process when the service starts
        (``init_host``), after ``nova-scheduler`` forked its workers: a
        thread started here runs in the worker.  An exception is logged
        and does not keep the other wrappers from starting.
        """

    def stop(self):
        """Release what the wrapper holds; called once, when the service stops.

        An exception is logged and does not keep the other wrappers from
        stopping.
        """


def load(names, option=OPTION):
    """The wrapper classes registered under ``names``, in the order given.

    :param option: where the names come from, for the error message
    :raises nova_sched_ext.registry.PluginLoadError: a name is unknown,
        fails to load or is not a :class:`RequestWrapper`
    """
    return registry.load_named(NAMESPACE, names, RequestWrapper,
                               option=option)

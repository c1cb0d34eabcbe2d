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

"""Host filters of nova-sched-ext, and of anyone who registers more.

Filters are found through the ``nova_sched_ext.filters`` entry-point
namespace.  To make them available to ``nova-scheduler``, add
:func:`all_filters` beside Nova's own list in ``nova.conf`` (the option is a
multi-valued one: repeat the key), then name the filters you want, in order,
in ``enabled_filters``::

    [filter_scheduler]
    available_filters = nova.scheduler.filters.all_filters
    available_filters = nova_sched_ext.filters.all_filters
    enabled_filters = ComputeFilter,NUMAFitFilter,NUMATopologyFilter

A third-party distribution adds its own filter without touching this package,
by declaring an entry point in the same namespace, e.g. in its
``setup.cfg``::

    [entry_points]
    nova_sched_ext.filters =
        MyFilter = my_package.my_module:MyFilter

Filter class names share one namespace with Nova's own filters; pick a name
Nova does not use.  A registered plugin that fails to import, or that is not
a ``nova.scheduler.filters.BaseHostFilter``, is logged and skipped.
"""

from nova.scheduler import filters as nova_filters

from nova_sched_ext import registry

NAMESPACE = 'nova_sched_ext.filters'


def all_filters():
    """Return the filter classes registered in ``nova_sched_ext.filters``.

    Nova calls this once per process, through
    ``[filter_scheduler] available_filters``.
    """
    return registry.load_classes(NAMESPACE, nova_filters.BaseHostFilter)

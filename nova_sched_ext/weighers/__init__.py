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

"""Host weighers of nova-sched-ext, and of anyone who registers more.

Weighers are found through the ``nova_sched_ext.weighers`` entry-point
namespace.  Nova runs every class listed by ``[filter_scheduler]
weight_classes`` (a comma-separated list; a value may continue on indented
lines), so name :func:`all_weighers` beside Nova's own list to run them all,
or name single weigher classes by their full path::

    [filter_scheduler]
    weight_classes = nova.scheduler.weights.all_weighers,
        nova_sched_ext.weighers.all_weighers

A third-party distribution adds its own weigher without touching this
package, by declaring an entry point in the same namespace, e.g. in its
``setup.cfg``::

    [entry_points]
    nova_sched_ext.weighers =
        MyWeigher = my_package.my_module:MyWeigher

A registered plugin that fails to import, or that is not a
``nova.scheduler.weights.BaseHostWeigher``, is logged and skipped.
"""

from nova.scheduler import weights as nova_weights

from nova_sched_ext import registry

NAMESPACE = 'nova_sched_ext.weighers'


def all_weighers():
    """Return the weigher classes registered in ``nova_sched_ext.weighers``.

    Nova calls this once per process, through
    ``[filter_scheduler] weight_classes``.
    """
    return registry.load_classes(NAMESPACE, nova_weights.BaseHostWeigher)

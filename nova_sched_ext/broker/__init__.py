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

"""The multi-cluster broker: flavor-variant conversion across clusters.

It sits above Nova, one ``clouds.yaml`` entry per cluster, and sees each
cluster only through its public APIs (Compute, Network, Image, and the
package's capacity API) with openstacksdk: it never imports Nova.  For a
request (a flavor family, image, network, count and the user's role) it
keeps the clusters that have the image and enough free addresses, turns
the family into the role's variants in priority order (dpdk / normal
pool, single / dual NUMA, and the uneven dual-NUMA splits a family
declares, after the even one), keeps for each the clusters whose capacity
covers the whole count, orders them with a pluggable chooser, and boots
the first; when a boot fails because the capacity read was stale it
cleans up and boots the next.  See ``doc/source/broker.rst``.

::

    from nova_sched_ext import broker
    conf = broker.load_config('/etc/nova-sched-ext/broker.yaml')
    result = broker.place(conf, broker.Request(
        family='v.c3.large', image='centos-9', network='private', count=3,
        role='auto-scaling'))
    print(result.cluster, result.variant.flavor, result.servers)
"""

from nova_sched_ext.broker.config import BrokerConfigError  # noqa: F401
from nova_sched_ext.broker.config import ConfigError  # noqa: F401
from nova_sched_ext.broker.config import load as load_config  # noqa: F401
from nova_sched_ext.broker.planning import plan as plan_on  # noqa: F401
from nova_sched_ext.broker.planning import Request  # noqa: F401
from nova_sched_ext.broker.planning import RequestError  # noqa: F401
from nova_sched_ext.broker.service import Broker  # noqa: F401


def place(conf, request, **kwargs):
    """Boot ``request`` through a :class:`Broker` of ``conf``.

    :returns: a :class:`~nova_sched_ext.broker.service.Result`
    """
    return Broker(conf, **kwargs).place(request)

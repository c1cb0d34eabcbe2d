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


"""nova-compute for test clouds, with the package's fake NUMA driver.

Nova 34 loads ``[DEFAULT] compute_driver`` only from its own ``nova.virt``
package (it imports ``nova.virt.<compute_driver>``), so a driver shipped by
another distribution needs a name inside that package. This command is
``nova-compute`` with one addition: before the service starts, the module
:mod:`nova_sched_ext.virt.fake_numa` is also importable as
``nova.virt.nova_sched_ext_fake_numa``. Nothing is written into Nova's
installation::

    python -m nova_sched_ext.virt.compute --config-file nova-cpu.conf

    [DEFAULT]
    compute_driver = nova_sched_ext_fake_numa.FakeNUMADriver

The devstack plugin restarts the fake computes this way when
``NOVA_SCHED_EXT_FAKE_VIRT=True``.
"""
# Imported first, as nova-compute does: it settles eventlet or threading
# before anything else is imported.
from nova.cmd import compute

import sys

import nova.virt

from nova_sched_ext.virt import fake_numa

#: the name of the fake NUMA driver module inside ``nova.virt``
ALIAS = 'nova_sched_ext_fake_numa'
#: ``[DEFAULT] compute_driver`` for the fake NUMA driver
COMPUTE_DRIVER = '%s.FakeNUMADriver' % ALIAS


def register_drivers():
    """Make the package's test drivers loadable by ``compute_driver``."""
    sys.modules.setdefault('nova.virt.%s' % ALIAS, fake_numa)
    setattr(nova.virt, ALIAS, fake_numa)


def main():
    register_drivers()
    return compute.main()


if __name__ == '__main__':
    sys.exit(main())

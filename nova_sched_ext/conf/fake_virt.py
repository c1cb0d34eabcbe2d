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

"""The ``[nova_sched_ext_fake_virt]`` group: the fake NUMA virt driver.

Options of :mod:`nova_sched_ext.virt.fake_numa`, the fake hypervisor of
test clouds, read by its nova-compute.
"""

from oslo_config import cfg

GROUP_NAME = 'nova_sched_ext_fake_virt'

fake_virt_group = cfg.OptGroup(
    GROUP_NAME,
    title='nova-sched-ext fake NUMA virt driver',
    help='Options of nova_sched_ext.virt.fake_numa.FakeNUMADriver, a fake '
         'hypervisor for test clouds.')

fake_virt_opts = [
    cfg.StrOpt(
        'numa_topology',
        default='2x4x4096',
        help='The NUMA cells of the fake host, written CELLSxCPUSxMIB: the '
             'number of cells, the CPUs of each cell and the memory of each '
             'cell in MiB. All cells are alike.'),
    cfg.IntOpt(
        'disk_gb',
        default=1000, min=1,
        help='Local disk of the fake host, in GiB.'),
    cfg.BoolOpt(
        'publish_layout_trait',
        default=True,
        help='Set a CUSTOM_NSE_NUMA_<cells>CELLS_<cpus>CPUS_<mib>MB trait '
             "on the host's resource provider so that tests can read the "
             'NUMA layout through the placement API.'),
]


def register_opts(conf):
    conf.register_group(fake_virt_group)
    conf.register_opts(fake_virt_opts, group=fake_virt_group)


def list_opts():
    return [(fake_virt_group, fake_virt_opts)]

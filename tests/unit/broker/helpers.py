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

"""Two data centers, three clusters, one family: the broker's test world."""

import copy

from nova_sched_ext.broker import config as broker_config
from nova_sched_ext.broker import service

from tests.unit.broker import fake_cloud

DPDK_SINGLE = 'v.c3.large.numa.dpdk'
DPDK_DUAL = 'v.c3.large.dpdk'
NORMAL_SINGLE = 'v.c3.large.numa'
NORMAL_DUAL = 'v.c3.large'
SPOT_DPDK = 'v.c3.large.spot.dpdk'
SPOT_NORMAL = 'v.c3.large.spot'
VARIANTS = (DPDK_SINGLE, DPDK_DUAL, NORMAL_SINGLE, NORMAL_DUAL, SPOT_DPDK,
            SPOT_NORMAL)

CONFIG = {
    'broker': {'boot_timeout': 30, 'poll_interval': 1, 'max_attempts': 4},
    'clusters': {
        'east-1': {'region': 'RegionOne', 'datacenter': 'dc-east',
                   'pools': ['dpdk', 'normal']},
        'east-2': {'region': 'RegionTwo', 'datacenter': 'dc-east',
                   'pools': ['normal']},
        'west-1': {'region': 'RegionOne', 'datacenter': 'dc-west',
                   'pools': ['dpdk', 'normal']},
    },
    'flavor_families': {'v.c3.large': {'variants': [
        {'flavor': DPDK_SINGLE, 'pool': 'dpdk', 'numa': 'single'},
        {'flavor': DPDK_DUAL, 'pool': 'dpdk', 'numa': 'dual'},
        {'flavor': NORMAL_SINGLE, 'pool': 'normal', 'numa': 'single'},
        {'flavor': NORMAL_DUAL, 'pool': 'normal', 'numa': 'dual'},
    ]}, 'v.c3.large.spot': {'variants': [
        {'flavor': SPOT_DPDK, 'pool': 'dpdk', 'numa': 'dual'},
        {'flavor': SPOT_NORMAL, 'pool': 'normal', 'numa': 'dual'},
    ]}},
    'preemptible_caps': {'dc-east': 4},
    'deployment_sets': {'max_size': 5, 'caps': {'small': 2}},
}


def config_dict(**changes):
    data = copy.deepcopy(CONFIG)
    for key, value in changes.items():
        data[key] = value
    return data


def make_config(**changes):
    return broker_config.parse(config_dict(**changes), 'broker.yaml')


class FakeClock:

    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def make_clouds(conf, room=None):
    """One FakeCloud per cluster; ``room``: {cluster: {flavor: n}}."""
    room = room or {}
    clouds = {}
    for name, cluster in conf.clusters.items():
        flavors = [f for f in VARIANTS
                   if 'dpdk' not in f or 'dpdk' in cluster.pools]
        # the uneven variants the configuration derives, where its pool is
        flavors += [v.flavor for family in conf.families.values()
                    for v in family.variants
                    if v.numa == broker_config.UNEVEN and
                    v.pool in cluster.pools]
        clouds[name] = fake_cloud.FakeCloud(
            name, flavors=flavors, room=room.get(name, {}),
            preemptible_flavors=(SPOT_DPDK, SPOT_NORMAL))
    return clouds


def make_broker(conf, clouds, chooser=None):
    clock = FakeClock()

    def connect(cluster):
        return clouds[cluster.name]
    return service.Broker(conf, connect=connect, chooser=chooser,
                          clock=clock, sleep=clock.sleep)

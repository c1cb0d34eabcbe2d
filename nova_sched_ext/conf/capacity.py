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

"""The ``[nova_sched_ext_capacity]`` group: the capacity count and services.

How the count places instances and reads placement, and the options of
the capacity API and of the Prometheus exporter, read from the scheduler's
``nova.conf`` and, for the services, usually
``nova-sched-ext-capacity.conf``.
"""

from oslo_config import cfg

from nova_sched_ext.conf import types
from nova_sched_ext.conf import utils

GROUP_NAME = 'nova_sched_ext_capacity'

#: the keystone catalog service type of the capacity API
SERVICE_TYPE = 'numa-capacity'

#: the ``by`` values of a capacity query: how hosts are grouped into scopes
SCOPES = ('cloud', 'az', 'aggregate', 'cell')

AUTH_KEYSTONE = 'keystone'
AUTH_NOAUTH = 'noauth'

capacity_group = cfg.OptGroup(
    GROUP_NAME,
    title='nova-sched-ext capacity',
    help='The NUMA-exact capacity count: how many more instances of each '
         'flavor fit, and the services that publish it (the capacity API '
         'and the Prometheus exporter).')

api_opts = [
    cfg.StrOpt(
        'auth_strategy',
        default=AUTH_KEYSTONE,
        choices=[
            (AUTH_KEYSTONE,
             'Check tokens with keystonemiddleware (options in '
             '[keystone_authtoken]) and require one of allowed_roles.'),
            (AUTH_NOAUTH,
             'No authentication and no role check: anyone who reaches the '
             'service reads the capacity of the whole cloud. For tests '
             'only.'),
        ],
        help='How the capacity API authenticates its callers. The version '
             'document (GET /) is public either way.'),
    cfg.ListOpt(
        'allowed_roles',
        default=['admin'],
        help='Keystone roles that may read the capacity API (any one of '
             'them suffices, compared without regard to case). The counts '
             'reveal how full every host group of the cloud is, so the '
             'default is admin only; add a reader role such as '
             '"capacity_reader" for a multi-cluster broker or a '
             'monitoring user.'),
    cfg.IntOpt(
        'refresh_interval',
        default=60, min=1,
        help='Seconds a capacity figure may get old. The capacity API '
             'answers a query from the report it computed for the same '
             'query less than this many seconds ago (a burst of requests '
             'costs one count); the exporter counts again this often, '
             'whatever the scrape interval.'),
    cfg.IntOpt(
        'api_cache_size',
        default=128, min=1,
        help='How many distinct queries (flavors, by, az, aggregate, '
             'per_host) the capacity API keeps a report for; the least '
             'recently used is dropped first.'),
    cfg.BoolOpt(
        'allow_fresh',
        default=True,
        help='Whether the capacity API honours ?fresh=true, which counts '
             'again instead of answering from a report younger than '
             'refresh_interval (without it, the default, a report is at '
             'most refresh_interval seconds old, as its Age header says). '
             'Concurrent fresh requests for the same query still share one '
             'count.'),
    cfg.IntOpt(
        'api_answer_timeout',
        default=30, min=1, max=3600,
        help='Seconds a capacity API request waits for its count. A count '
             'that takes longer goes on, and its report answers the next '
             'request for the same query; this one gets 503 with a '
             'Retry-After header. A database or placement that does not '
             'answer fails the count sooner, after backend_timeout.'),
]

exporter_opts = [
    cfg.HostAddressOpt(
        'exporter_host',
        default='127.0.0.1',
        help='Address the Prometheus exporter '
             '(nova-sched-ext-capacity-exporter) listens on for '
             'scrapes of /metrics.'),
    cfg.PortOpt(
        'exporter_port',
        default=9736,
        help='Port the Prometheus exporter listens on.'),
    cfg.ListOpt(
        'exporter_scopes',
        default=list(SCOPES),
        item_type=cfg.types.String(choices=SCOPES),
        help='The groupings the exporter publishes, one count each per '
             'refresh: the whole cloud, availability zones, host '
             'aggregates, cells. Each is a value of the scope label.'),
    cfg.BoolOpt(
        'export_per_host',
        default=False,
        help='Also publish each compute host\'s count (scope="host"). The '
             'number of series is hosts times flavors: enable it only if '
             'the Prometheus server can take that many.'),
    cfg.IntOpt(
        'exporter_refresh_timeout',
        default=300, min=1, max=86400,
        help='Seconds a refresh of the exporter may take. One that takes '
             'longer counts as a failed refresh (the up series is 0, '
             'refresh_errors_total grows, one line is logged); the next '
             'refresh starts once it has ended. A database or placement '
             'that does not answer fails a refresh sooner, after '
             'backend_timeout.'),
]

FIT_ENGINE = 'engine'
FIT_NOVA = 'nova'

count_opts = [
    cfg.StrOpt(
        'fit',
        default=FIT_ENGINE,
        choices=[
            (FIT_ENGINE,
             "Place each instance with the package's fit engine, and with "
             "Nova's own fit (numa_fit_instance_to_host) only for the hosts "
             'and flavors the engine cannot place exactly: PCI devices, '
             'emulator threads isolated with the require or isolate thread '
             'policy, require on hosts with more than two threads per core, '
             'hosts the engine does not model. The report counts those as '
             'engine_fallbacks.'),
            (FIT_NOVA,
             "Place every instance with Nova's own fit: the same figures, "
             'much slower; for cross-checking the engine.'),
        ],
        help='How the count places instances one after another on a host '
             'to see how many fit at once.'),
    cfg.IntOpt(
        'placement_workers',
        default=8, min=1, max=64,
        help='How many placement requests the count makes at once while it '
             'reads the inventories, usages and traits of the resource '
             'providers (four requests per compute host). 1 reads them one '
             'after another.'),
    cfg.IntOpt(
        'backend_timeout',
        default=5, min=1, max=300,
        help='Seconds the capacity count waits for a database or placement '
             'to connect, and for each of their answers, before it gives '
             'up with one line (the command exits 1, the capacity API '
             'answers 503, the exporter counts a failed refresh). It sets '
             'the connect, read and write timeouts of every MySQL '
             'connection (API and cell databases) that its URL does not '
             'set, and [placement] timeout unless the files set it. The '
             'capacity services also make no connection retries '
             '([database] and [api_database] max_retries default to 0 for '
             'them): a count is read-only and is simply asked again.'),
]

kept_state_opts = [
    cfg.BoolOpt(
        'kept_state',
        default=False,
        help='Whether the capacity API and the exporter answer from state '
             'they keep current, instead of reading the whole cloud for '
             'each count (at 10,000 compute hosts a full count reads '
             'placement 30,000 times and takes minutes). The service polls '
             'placement\'s providers (GET /resource_providers, then the '
             'providers whose generation moved), the cells\' compute node '
             'stamps and nova-compute service rows and the aggregates every '
             'kept_state_poll_interval seconds, reads again only what '
             'changed, and counts again only the hosts whose records, '
             'providers, service state or aggregates changed; the figures '
             'are those of a full count of the state polled. Until the '
             'first poll, and while the state is older than '
             'kept_state_max_age, counts are made in full as with this '
             'option off; fresh=true always counts in full. Each process '
             'of the API keeps its own state. Read at service start.'),
    types.FiniteFloatOpt(
        'kept_state_poll_interval',
        default=2.0, min=0.1,
        help='Seconds between two polls of the kept capacity state '
             '(kept_state). A boot, a delete or an inventory change shows '
             'in the capacity at most this long plus one poll after it '
             'reached placement and the compute node\'s record.'),
    cfg.IntOpt(
        'kept_state_resync_interval',
        default=600, min=0,
        help='Seconds in which the kept capacity state reads the usages '
             'of every resource provider again (one call a provider, '
             'spread over the polls): the bound on how long room freed '
             'without its compute node\'s record changing (an allocation '
             'removed by hand or by another service) stays unseen. 0 '
             'never does.'),
    utils.resync_max_rate_opt('kept capacity state', 'process of the API'),
    types.FiniteFloatOpt(
        'kept_state_max_age',
        default=60.0, min=1.0,
        help='Seconds since the start of the last successful poll after '
             'which the kept capacity state is no longer used: while '
             'placement or a database cannot be polled, counts are made '
             'in full (and fail as they would, with one line).'),
] + utils.snapshot_opts(
    'kept capacity state', 'process',
    'when the exporter stops (the API\'s WSGI workers have no stop to '
    'save at: they save every interval only)')

ALL_OPTS = count_opts + api_opts + exporter_opts + kept_state_opts


def register_opts(conf):
    conf.register_group(capacity_group)
    conf.register_opts(ALL_OPTS, group=capacity_group)


def list_opts():
    return [(capacity_group, ALL_OPTS)]

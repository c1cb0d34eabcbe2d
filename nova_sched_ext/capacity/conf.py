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


"""Options of the capacity count.

They live in ``[nova_sched_ext_capacity]``, the group the capacity API and
exporter options (:mod:`~nova_sched_ext.capacity.api_conf`) share, and are
read from the scheduler's ``nova.conf`` the count is run with. Importing
this module registers them; ``list_opts`` feeds ``oslo-config-generator``
through the ``oslo.config.opts`` entry point ``nova_sched_ext.capacity``.
"""

import re

from oslo_config import cfg

from nova_sched_ext.capacity import api_conf
from nova_sched_ext.capacity import errors

GROUP_NAME = api_conf.GROUP_NAME

_FILE_IN_MESSAGE = re.compile(r"detail='([^']*)'")

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


def register_opts(conf):
    conf.register_group(api_conf.capacity_group)
    conf.register_opts(count_opts, group=api_conf.capacity_group)


def list_opts():
    return [(api_conf.capacity_group, count_opts)]


def check_options(conf):
    """Read every option of the group once; ConfigError for a bad value.

    oslo.config checks a value from a file (bounds, choices) only when the
    option is read, which would make a bad value an unexpected error in the
    middle of a count.
    """
    group = getattr(conf, GROUP_NAME)
    for name in sorted(group):
        try:
            getattr(group, name)
        except cfg.Error as exc:
            # "Value for option X from LocationInfo(..., detail='FILE') is
            # not valid: REASON", and no attribute holds FILE or REASON.
            text = ' '.join(str(exc).split())
            reason = text.split(' is not valid: ', 1)[-1]
            where = _FILE_IN_MESSAGE.search(text)
            raise errors.ConfigError(
                'invalid value for [%s] %s%s: %s'
                % (GROUP_NAME, name,
                   ' in %s' % where.group(1) if where else '',
                   reason)) from None


CONF = cfg.CONF
register_opts(CONF)

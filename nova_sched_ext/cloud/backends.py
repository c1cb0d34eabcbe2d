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


"""How long the capacity services wait for the databases and placement.

The scheduler's ``nova.conf`` is made for a service that may wait: oslo.db
retries a refused database ten times, ten seconds apart, and neither the
MySQL drivers nor keystoneauth give up on a server that accepts a
connection and never answers. A capacity count is read-only and asked
again by its caller, so the capacity command, API and exporter call
:func:`bound` once the files are parsed, before the databases are set up:
``[nova_sched_ext_capacity] backend_timeout`` then bounds every connection
and every answer, and a refused database fails at once.

Only defaults change: what the files set (``max_retries``, ``[placement]
timeout``, a timeout in a database URL) is kept.

Before that, they call :func:`check_options`, so that a bad value in
``[nova_sched_ext_capacity]`` is one line at start, not an error in the
middle of a count.
"""

import re
import threading

from oslo_config import cfg
from oslo_log import log as logging

from nova_sched_ext.cloud import errors
from nova_sched_ext.compat import nova as nova_compat
from nova_sched_ext.conf import capacity as capacity_conf

LOG = logging.getLogger(__name__)

_FILE_IN_MESSAGE = re.compile(r"detail='([^']*)'")

#: the MySQL drivers whose connect() takes these keyword arguments
MYSQL_DRIVERS = ('pymysql', 'mysqldb')
MYSQL_TIMEOUTS = ('connect_timeout', 'read_timeout', 'write_timeout')
DATABASE_GROUPS = ('database', 'api_database')

# The listener below is process-wide (every engine of the process, the
# cell databases' included, which Nova creates per cell mapping), so the
# timeout it applies is too.
_lock = threading.Lock()
_mysql_timeout = None


def _bound_mysql_connect(dialect, _connection_record, _cargs, cparams):
    timeout = _mysql_timeout
    if timeout is None or dialect.name not in ('mysql', 'mariadb') or \
            dialect.driver not in MYSQL_DRIVERS:
        return
    for name in MYSQL_TIMEOUTS:
        # A timeout in the connection URL is the operator's: keep it.
        cparams.setdefault(name, timeout)


def bound_mysql_connections(timeout):
    """Give every MySQL connection of the process ``timeout`` seconds.

    For connecting, for each answer (the server's greeting included) and
    each write, unless the connection URL sets its own.
    """
    global _mysql_timeout
    import sqlalchemy
    from sqlalchemy import event
    with _lock:
        _mysql_timeout = timeout
        if not event.contains(sqlalchemy.engine.Engine, 'do_connect',
                              _bound_mysql_connect):
            event.listen(sqlalchemy.engine.Engine, 'do_connect',
                         _bound_mysql_connect)


def check_options(conf):
    """Read every option of the group once; ConfigError for a bad value.

    oslo.config checks a value from a file (bounds, choices) only when the
    option is read, which would make a bad value an unexpected error in the
    middle of a count.
    """
    group = getattr(conf, capacity_conf.GROUP_NAME)
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
                % (capacity_conf.GROUP_NAME, name,
                   ' in %s' % where.group(1) if where else '',
                   reason)) from None


def bound(conf):
    """Bound the count's database and placement calls by the options.

    Call it after the configuration files are parsed and before Nova's
    database APIs are configured (``nova.config.parse_args(...,
    configure_db=False)``, then :func:`configure_databases`).
    """
    timeout = conf.nova_sched_ext_capacity.backend_timeout
    for group in DATABASE_GROUPS:
        conf.set_default('max_retries', 0, group=group)
    conf.set_default('timeout', timeout, group='placement')
    bound_mysql_connections(timeout)
    LOG.debug('Capacity backends bounded: %d s per connection and answer',
              timeout)


def configure_databases(conf):
    """Configure Nova's main and API database access, as parse_args does."""
    nova_compat.configure_databases(conf)


def load_nova_conf(args, prog):
    """``nova.conf`` as a command that reads the cloud loads it.

    The files of ``args`` parsed and checked as the scheduler's
    (:func:`nova_sched_ext.cli.config_files.load_nova_conf`), the options
    of this module checked, and every database and placement call bounded:
    an interactive command says in one line, within ``backend_timeout``,
    that a database or placement is down or silent, instead of hanging.

    :raises nova_sched_ext.cli.UsageError: the configuration cannot be used
    """
    from nova_sched_ext.cli import config_files
    conf = config_files.load_nova_conf(args, prog, check=check_options)
    bound(conf)
    configure_databases(conf)
    return conf

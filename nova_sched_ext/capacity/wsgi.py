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

"""WSGI entry point of the capacity API, served like Nova's own APIs.

uWSGI (as devstack runs it)::

    [uwsgi]
    module = nova_sched_ext.capacity.wsgi:application
    env = NOVA_SCHED_EXT_CAPACITY_CONFIG_FILES=nova.conf;capacity.conf

or any WSGI server that loads ``nova_sched_ext.capacity.wsgi:application``.
The first access to ``application`` builds it (once per process):

* the configuration files are ``NOVA_SCHED_EXT_CAPACITY_CONFIG_FILES``
  (separated by ``;``), relative to ``NOVA_SCHED_EXT_CAPACITY_CONFIG_DIR``
  (default ``/etc/nova``); by default ``nova.conf``, which has the database
  and ``[placement]`` settings a count needs, and
  ``nova-sched-ext-capacity.conf`` if it exists; command-line arguments
  (uWSGI's ``pyargv``) are read too, as Nova's APIs read them;
* Nova's code runs on native threads (:func:`use_native_threads`);
* with ``[nova_sched_ext_capacity] auth_strategy = keystone`` (the default)
  keystonemiddleware's ``auth_token`` (options in ``[keystone_authtoken]``)
  guards everything but the version document ``GET /``.
"""

import os
import sys
import threading

from oslo_log import log as logging

LOG = logging.getLogger(__name__)

CONFIG_DIR_ENV = 'NOVA_SCHED_EXT_CAPACITY_CONFIG_DIR'
CONFIG_FILES_ENV = 'NOVA_SCHED_EXT_CAPACITY_CONFIG_FILES'
DEFAULT_CONFIG_DIR = '/etc/nova'
DEFAULT_CONFIG_FILES = ('nova.conf', 'nova-sched-ext-capacity.conf')
#: the program name in logs and in oslo.config's messages
PROG = 'nova-sched-ext-capacity-api'

_lock = threading.Lock()
_application = None


def config_files(env=None):
    """The configuration files, from the environment."""
    env = os.environ if env is None else env
    directory = env.get(CONFIG_DIR_ENV, '').strip() or DEFAULT_CONFIG_DIR
    names = [name.strip() for name in env.get(CONFIG_FILES_ENV, '').split(
        ';') if name.strip()]
    if names:
        return [os.path.join(directory, name) for name in names]
    # Only nova.conf must exist when nothing is said.
    files = [os.path.join(directory, name) for name in DEFAULT_CONFIG_FILES]
    return files[:1] + [path for path in files[1:] if os.path.exists(path)]


def use_native_threads():
    """Run Nova's code on native threads, never eventlet.

    Nova's own WSGI services default to native threads but let
    ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` or ``[DEFAULT]
    concurrency_backend`` choose eventlet. The capacity services do not:
    patching after their modules are imported would leave blocking calls
    in the HTTP servers, and eventlet gives a read-only service nothing.
    Nova counts a process as threaded when it is not monkey-patched.
    """
    from nova_sched_ext.compat import release
    setting = os.environ.get('OS_NOVA_DISABLE_EVENTLET_PATCHING', '')
    if setting.strip().lower() not in ('', '1', 'true', 'yes'):
        LOG.warning('OS_NOVA_DISABLE_EVENTLET_PATCHING=%s is ignored: the '
                    'capacity services always run on native threads',
                    setting)
    if release.monkey_patched():
        LOG.warning('The process is monkey-patched by eventlet already; '
                    'the capacity service runs on it as it is')
        return
    # Nova 31 patches when nova.monkey_patch is first imported.
    release.keep_eventlet_out()
    from nova import monkey_patch
    # As Nova does in its native threading mode: eventlet cannot be
    # imported from here on. Without this, futurist's optional import of
    # eventlet (oslo.service's threading backend imports futurist) prints
    # EventletDeprecationWarning first thing, even for --help, in a
    # process that never uses eventlet.
    poison = getattr(monkey_patch, 'poison_eventlet', None)
    if poison is not None and 'eventlet' not in sys.modules:
        poison()
    if not release.oslo_service_threading():
        # 2025.1's oslo.service: nothing to choose, the services of the
        # package start no oslo.service machinery.
        LOG.debug('oslo.service has no threading backend: left as it is')
        return
    import oslo_service.backend as service_backend
    try:
        service_backend.init_backend(service_backend.BackendType.THREADING)
    except Exception as exc:  # already chosen by an import: keep it
        LOG.debug('oslo.service backend left as it is: %s', exc)


class _PublicRoot:
    """Serve the version document without a token, the rest through auth.

    Clients discover versions before they authenticate, as with every
    OpenStack API.
    """

    def __init__(self, app, authenticated):
        self._app = app
        self._authenticated = authenticated

    def __call__(self, environ, start_response):
        if environ.get('PATH_INFO', '') in ('', '/'):
            return self._app(environ, start_response)
        return self._authenticated(environ, start_response)


def kept_count(conf, context_factory, start=True):
    """The kept capacity state, or None (``kept_state`` off).

    A :class:`~nova_sched_ext.capacity.kept.KeptCount`, which the
    capacity API and the exporter report from while it is usable.

    :param start: start polling now (the exporter); the API starts it at
        its first request, in the process that serves it
    """
    if not conf.nova_sched_ext_capacity.kept_state:
        return None
    from nova_sched_ext.capacity import kept
    count = kept.KeptCount(context_factory())
    if start:
        count.start()
    return count


def build_application(conf, context_factory):
    """The capacity app, wrapped as ``auth_strategy`` says.

    :param conf: a parsed configuration with the capacity options and,
        for keystone, ``[keystone_authtoken]``
    :param context_factory: returns the context a count runs with
    """
    from oslo_middleware import request_id

    from nova_sched_ext.capacity import api
    from nova_sched_ext.conf import capacity as capacity_conf

    strategy = conf.nova_sched_ext_capacity.auth_strategy
    keystone = strategy == capacity_conf.AUTH_KEYSTONE
    app = api.CapacityApp(conf, context_factory, check_roles=keystone,
                          kept=kept_count(conf, context_factory,
                                          start=False))
    if keystone:
        from keystonemiddleware import auth_token
        served = _PublicRoot(app, auth_token.AuthProtocol(
            app, {'oslo_config_config': conf}))
    else:
        LOG.warning('The capacity API runs without authentication '
                    '([nova_sched_ext_capacity] auth_strategy = %s): '
                    'anyone who reaches it reads the capacity of the cloud',
                    strategy)
        served = app
    return request_id.RequestId(served)


def init_application(argv=None, env=None):
    """Read the configuration and build the application (every call).

    :param argv: the command line, default ``sys.argv``
    :param env: the environment, default ``os.environ``
    """
    use_native_threads()

    import nova.conf
    from nova import context
    from nova import objects

    from nova_sched_ext.cloud import backends
    from nova_sched_ext.compat import nova as nova_compat

    conf = nova.conf.CONF
    files = config_files(env)
    # The API reads the databases and placement; it sends no RPC.
    nova_compat.parse_args(sys.argv if argv is None else argv,
                           default_config_files=files, init_rpc=False,
                           prog=PROG, configure_db=False)
    logging.setup(conf, 'nova-sched-ext')
    # A bad value is refused here, in one line, not at the first request.
    backends.check_options(conf)
    # A request must get its 503 within seconds, whatever the backends do.
    backends.bound(conf)
    backends.configure_databases(conf)
    objects.register_all()
    LOG.info('Capacity API configured from %s', ', '.join(files))
    return build_application(conf, context.get_admin_context)


def __getattr__(name):
    # ``application`` is built on first access, so that importing this
    # module (for tests, docs, or a WSGI server that calls
    # init_application itself) reads no configuration.
    global _application
    if name != 'application':
        raise AttributeError('module %r has no attribute %r'
                             % (__name__, name))
    with _lock:
        if _application is None:
            _application = init_application()
    return _application

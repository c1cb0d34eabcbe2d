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


"""Load an OpenStack WSGI application for gunicorn, as uwsgi would.

keystone, placement and nova parse the process's command line with
oslo.config when their WSGI module is imported; under gunicorn that command
line is gunicorn's own, which they reject. devstack serves them with uwsgi,
whose command line they never see. This factory hides gunicorn's arguments
before the import, and turns a failed start (including oslo.config's
SystemExit) into an exception, so that gunicorn stops instead of rebooting
the worker forever::

    gunicorn --pythonpath tools/devstack-lite \\
        'wsgi_app:load("nova.wsgi.osapi_compute")'

The name is a module, whose ``application`` is served, or
``module:attribute`` as in a uWSGI file.
"""

import importlib
import sys


def load(name):
    module_name, _, attribute = name.partition(':')
    sys.argv = sys.argv[:1]
    try:
        module = importlib.import_module(module_name)
        # An attribute may be built on first access (a module __getattr__),
        # which is when it reads the configuration.
        return getattr(module, attribute or 'application')
    except SystemExit as exc:
        raise RuntimeError('%s failed to start (exit status %s)'
                           % (name, exc.code)) from exc

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

"""Which Nova release is installed, and what the process does about it.

The package supports Nova 31 (2025.1) to 34 (2026.2) from one branch.
Where the releases differ in something the package calls, the seam asks
:func:`release` and does what *that* release does; every such switch has
a unit test in ``tests/unit/test_compat.py`` that runs against the
installed release and fails when the switch of another release is forced
on it.  The table of differences is ``doc/source/support-matrix.rst``.

This module imports no Nova at import time: the first import of a console
script and the test package choose eventlet or native threads
(:func:`monkey_patch`) before anything else of Nova is loaded.
"""

import contextlib
import functools
from importlib import metadata
from importlib import util as importlib_util
import logging
import os
import sys
import warnings

#: The supported Nova releases: major version -> OpenStack release.
SUPPORTED = {31: '2025.1', 32: '2025.2', 33: '2026.1', 34: '2026.2'}

#: The environment switch of Nova 31 to 34: ``true`` keeps eventlet out.
DISABLE_EVENTLET = 'OS_NOVA_DISABLE_EVENTLET_PATCHING'

#: What eventlet 0.40 and later warn when imported.
EVENTLET_DEPRECATED = r'\s*Eventlet is deprecated'


@functools.lru_cache(maxsize=None)
def installed():
    """The major version of the installed Nova (31 for 31.3.1).

    From the distribution's metadata; from ``nova.version`` for a Nova
    that has none (a source tree on ``sys.path``).
    """
    try:
        text = metadata.version('nova')
    except metadata.PackageNotFoundError:
        from nova import version
        text = version.version_string()
    return int(text.split('.')[0])


def release():
    """The Nova release the seam follows: the installed one.

    Every switch calls this at the time it runs (never at import), so a
    test can force another release's switch on the installed Nova.
    """
    return installed()


def name():
    """``'2025.1 (Nova 31)'``: the installed release, for messages."""
    major = release()
    return '%s (Nova %d)' % (SUPPORTED.get(major, 'unsupported'), major)


# --- the concurrency mode -----------------------------------------------

def monkey_patch(backend):
    """Patch the process as that release's Nova services patch it.

    * Nova 33, 34: ``nova.monkey_patch.patch(backend=backend)``; the
      services pass ``'threading'`` (native threads unless
      ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` or, on 34, ``[DEFAULT]
      concurrency_backend`` says eventlet), the tests ``'eventlet'``.
    * Nova 32: ``nova.monkey_patch.patch()``, which takes no backend:
      eventlet unless ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` is true (what
      ``nova/cmd/__init__.py`` does for every service of 32).
    * Nova 31: importing ``nova.monkey_patch`` patches, on the same
      environment switch; there is no ``patch()``.

    :param backend: ``'threading'`` or ``'eventlet'``: the default on
        33 and 34 (31 and 32 know only eventlet as default)
    :raises ValueError: ``backend`` is neither
    """
    if backend not in ('threading', 'eventlet'):
        raise ValueError("the backend can only be 'eventlet' or "
                         "'threading'")
    major = release()
    if major >= 33:
        from nova import monkey_patch as nova_monkey_patch
        with quiet_until_logging('nova.monkey_patch'):
            nova_monkey_patch.patch(backend=backend)
        return
    # 31 and 32 choose eventlet, as their services do, and say nothing
    # of it: a recent eventlet warns that it is deprecated when it is
    # imported, which would be a second line on a command's stderr.
    with warnings.catch_warnings():
        warnings.filterwarnings('ignore', message=EVENTLET_DEPRECATED)
        from nova import monkey_patch as nova_monkey_patch  # 31: patches
        if major == 32:
            nova_monkey_patch.patch()


@contextlib.contextmanager
def quiet_until_logging(name):
    """Drop what logger ``name`` logs here if logging is not set up yet.

    Nova 33 logs a warning when it patches a process for native threads
    ("Service is starting with native threading. This is currently
    experimental ..."), before a command has set up its logging: Python's
    last-resort handler would print it as a bare line on stderr, before
    the command's output or its one-line error.  While the root logger
    has no handler, the records of ``name`` go nowhere; once logging is
    set up (the tests, a service), they go where its logs go.
    ``nova-sched-ext-scheduler`` logs the mode it runs in once its
    logging is set up.
    """
    if logging.getLogger().handlers:
        yield
        return
    logger = logging.getLogger(name)
    null = logging.NullHandler()
    logger.addHandler(null)
    try:
        yield
    finally:
        logger.removeHandler(null)


def eventlet_disabled():
    """Whether ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` keeps eventlet out."""
    return os.environ.get(DISABLE_EVENTLET, '').strip().lower() in (
        '1', 'true', 'yes')


def keep_eventlet_out():
    """Let a later import of ``nova.monkey_patch`` leave eventlet out.

    Nova 31 patches the process when ``nova.monkey_patch`` is first
    imported, unless ``OS_NOVA_DISABLE_EVENTLET_PATCHING`` is true: this
    sets it, on 31 only (32 and later patch only when asked).
    """
    if release() <= 31:
        os.environ[DISABLE_EVENTLET] = 'true'


def native_threads():
    """Run the process on native threads, whatever the release's default.

    For a tool that starts threads of its own beside Nova's code (the
    scale bench's in-process placement server, whose thread would block
    every green thread on eventlet): :func:`monkey_patch` with
    ``'threading'``, after setting the environment switch on 31 and 32,
    whose only patching is eventlet's.  True if the process then runs on
    native threads; False if eventlet had patched it already (nothing
    undoes that).
    """
    if release() <= 32:
        os.environ[DISABLE_EVENTLET] = 'true'
    monkey_patch('threading')
    return not monkey_patched()


def oslo_service_threading():
    """Whether the installed oslo.service has a threading backend.

    oslo.service 4.2 (2025.2's first) added it as
    ``oslo_service.backend.threading``, 4.3 moved it to the private
    ``oslo_service.backend._threading``; 2025.1's 4.1 names
    ``BackendType.THREADING`` but ships only the eventlet module, and its
    ``init_backend`` logs an error for the name before it refuses it.
    """
    for module in ('oslo_service.backend._threading',
                   'oslo_service.backend.threading'):
        try:
            if importlib_util.find_spec(module) is not None:
                return True
        except ImportError:  # no oslo_service.backend at all
            return False
    return False


def monkey_patched():
    """Whether the process runs on eventlet's monkey patching.

    ``nova.monkey_patch.is_patched()`` on Nova 32 and later; on Nova 31,
    which has none, eventlet's own record (``thread`` patched).
    """
    if release() >= 32:
        from nova import monkey_patch as nova_monkey_patch
        return nova_monkey_patch.is_patched()
    # Not nova.monkey_patch: on 31 its import patches.
    if 'eventlet' not in sys.modules:
        return False
    from eventlet import patcher
    return bool(patcher.is_monkey_patched('thread'))

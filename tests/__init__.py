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

"""Tests of nova-sched-ext (stestr/testtools, like Nova's own).

Nova's test packages patch the process for their concurrency mode on import
and register the versioned objects; do the same here, first, so that every
test module sees the process as Nova's own tests would, whichever Nova test
helper it happens to import first.  The mode follows Nova's switch:
``OS_NOVA_DISABLE_EVENTLET_PATCHING=true`` runs the tests in native threading
mode, unset keeps Nova's test default (eventlet).

The console shows no log but what escapes every test's capture (see
``tests/base.py``), and of that only warnings and errors: importing
``nova.test`` sets up oslo.log with a handler that prints everything from
INFO up on stdout (the scheduler's periodic tasks, Nova's fixtures that log
after a test's capture has ended), so it is imported here, once, and that
handler replaced.  Eventlet's deprecation notice and Nova's about its
eventlet mode are dropped: the test run picks that mode deliberately.
"""

import logging
import os
import sys
import warnings

warnings.filterwarnings('ignore', message=r'\s*Eventlet is deprecated')
# Nova's test cases capture their output only if asked, as Nova's tox asks.
os.environ.setdefault('OS_STDOUT_CAPTURE', '1')
os.environ.setdefault('OS_STDERR_CAPTURE', '1')

# Nova's patch of the installed release (31 patches on import, 32 has no
# backend argument): see nova_sched_ext.compat.release.monkey_patch.
from nova_sched_ext.compat import release  # noqa: E402

_patch_log = logging.getLogger('nova.monkey_patch')
_patch_log.setLevel(logging.ERROR)
release.monkey_patch('eventlet')
_patch_log.setLevel(logging.NOTSET)

from nova import objects  # noqa: E402

objects.register_all()

from nova import test as nova_test  # noqa: E402,F401

_root = logging.getLogger()
for _handler in list(_root.handlers):
    _root.removeHandler(_handler)
_handler = logging.StreamHandler(sys.stderr)
_handler.setLevel(logging.WARNING)
_handler.setFormatter(logging.Formatter(
    '%(asctime)s %(levelname)s [%(name)s] %(message)s'))
_root.addHandler(_handler)

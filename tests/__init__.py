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
"""

from nova import monkey_patch

monkey_patch.patch()

from nova import objects  # noqa: E402

objects.register_all()

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

"""Load Nova for an offline tool, once, when the tool runs.

Nova is slow to import and prints warnings on the way, so the tools import
it only when they run (``--help`` does not), through :func:`load_nova`.
"""

import functools


@functools.cache
def load_nova():
    """Import Nova's options and objects and register the objects.

    The work is done on the first call; later calls return at once.

    :returns: the ``nova.objects`` module, every object class registered
        (``objects.NUMATopology``, ``objects.RequestSpec``, ...)
    """
    from nova import config  # noqa: F401  (registers Nova's options)
    from nova import objects
    objects.register_all()
    return objects

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

"""What ``--version`` of every console script prints.

``nova-sched-ext 0.0.1.dev12 (nova 34.0.0)``: the package's version (pbr's,
from the installed distribution's metadata) and, beside it, the version of
the Nova it runs with, since the package supports several Nova releases.

Read from the distributions' metadata, not by importing Nova: the broker
and the Watcher plugins run where Nova is not imported.
"""

from importlib import metadata

DISTRIBUTION = 'nova-sched-ext'


def distribution_version(name):
    """The installed version of distribution ``name``, or ``unknown``."""
    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return 'unknown'


def version_string():
    """``nova-sched-ext VERSION (nova VERSION)``."""
    return '%s %s (nova %s)' % (DISTRIBUTION,
                                distribution_version(DISTRIBUTION),
                                distribution_version('nova'))


def add_version_option(parser):
    """``--version`` on an argparse parser: prints :func:`version_string`."""
    parser.add_argument(
        '--version', action='version', version=version_string(),
        help='print the version of nova-sched-ext and of Nova, and exit')

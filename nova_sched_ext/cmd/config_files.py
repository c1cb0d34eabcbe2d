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

"""Deprecated: :mod:`nova_sched_ext.cli.config_files`, by its old path.

The checks of the console scripts' configuration files moved to the
console scripts' toolkit, :mod:`nova_sched_ext.cli`, which every command
shares (the capacity commands no longer reach into ``cmd/``).  This path
is the same module, with a ``DeprecationWarning``; it will be removed in a
later release.
"""

import sys
import warnings

from nova_sched_ext.cli import config_files

warnings.warn('nova_sched_ext.cmd.config_files is deprecated: use '
              'nova_sched_ext.cli.config_files', DeprecationWarning,
              stacklevel=2)

sys.modules[__name__] = config_files

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

"""Importing this module chooses native threads for the process, once.

The first import of a console script that reads ``nova.conf`` (the
scheduler, the capacity and defragmentation commands), before anything
loads Nova, as ``nova/cmd/scheduler.py`` does::

    from nova_sched_ext.cli import native_threads  # noqa

A module, so that the choice is made once however many of these commands
a process imports: Nova refuses a second one once eventlet is imported.
See :func:`nova_sched_ext.cli.config_files.choose_native_threads`.
"""

from nova_sched_ext.cli import config_files

config_files.choose_native_threads()

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


"""The errors of the capacity count a user can cause or meet.

Each carries a one-line message meant for the person who ran the count,
and says how a caller should answer it: :attr:`CapacityError.exit_code`
for a command (2: the request or the configuration is wrong, 1: a
service the count reads is unreachable), :attr:`CapacityError.unavailable`
for a service (a backend is down: try again later).

This module (and :mod:`nova_sched_ext.cloud.errors`) imports nothing of
Nova, so that the clients of the count (the API, the exporter, the
OpenStackClient plugin) can catch these before Nova is loaded.
"""

from nova_sched_ext.cloud import errors as cloud_errors

#: The count cannot be made; the message says why in one line.  The
#: count's errors are the cloud reader's: a database, a cell or placement
#: that does not answer is one error wherever the cloud is read.
CapacityError = cloud_errors.CloudError
#: The configuration cannot be used (a missing or bad option).
ConfigError = cloud_errors.ConfigError
#: A flavor named in the request does not exist.
UnknownFlavor = cloud_errors.UnknownFlavor
#: A database or placement is unreachable, or answers an error.
BackendUnavailable = cloud_errors.BackendUnavailable


class UnknownScope(CapacityError):
    """An unknown availability zone, aggregate or way of grouping hosts."""

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

This module imports nothing of Nova, so that the clients of the count
(the API, the exporter, the OpenStackClient plugin) can catch these before
Nova is loaded.
"""

from nova_sched_ext import exception as sched_ext_exception


class CapacityError(sched_ext_exception.UserFacingError):
    """The count cannot be made; the message says why in one line."""

    #: exit status of a command that stops on this error
    exit_code = 2
    #: True when a service the count reads is unreachable (retry later)
    unavailable = False

    def __init__(self, message):
        # One line, whatever the underlying library put in its message.
        super().__init__(' '.join(str(message).split()))


class ConfigError(CapacityError):
    """The configuration cannot be used (a missing or bad option)."""


class UnknownFlavor(CapacityError):
    """A flavor named in the request does not exist."""


class UnknownScope(CapacityError):
    """An unknown availability zone, aggregate or way of grouping hosts."""


class BackendUnavailable(CapacityError,
                         sched_ext_exception.UpstreamUnavailable):
    """A database or placement is unreachable, or answers an error."""

    exit_code = 1
    unavailable = True

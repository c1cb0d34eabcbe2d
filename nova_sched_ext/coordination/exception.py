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


"""The errors of the coordination backend."""

from nova_sched_ext import exception as sched_ext_exception


class LockUnavailable(sched_ext_exception.NovaSchedExtError):
    """A lock could not be taken; the message says why."""


class LockTimeout(LockUnavailable):
    """Someone else held the lock longer than the caller would wait."""


class CoordinationBackendUnavailable(
        LockUnavailable, sched_ext_exception.UpstreamUnavailable):
    """The backend failed or cannot be reached; the message says why."""


#: The old name, kept for the callers that catch it (deprecated: it was
#: also the name of the capacity count's unreachable-backend error).
BackendUnavailable = CoordinationBackendUnavailable


class BackendUnsupported(sched_ext_exception.UserFacingError):
    """The backend holds locks only, no records."""


class BackendUnusable(sched_ext_exception.UserFacingError):
    """The backend URL cannot work at all: a restart with another is needed."""

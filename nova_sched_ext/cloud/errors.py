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


"""What goes wrong when the cloud is read: one error per idea.

Every reader of this package raises these, whoever calls it: a cell whose
database does not answer is :class:`CellUnavailable` for the capacity
count, the preemption census, the deployment-set members and the
defragmentation planner alike, with one message shape.  A caller that must
react otherwise (a scheduler filter never raises: it logs and rejects; the
capacity API answers 503) catches the one error and maps it; it does not
detect the failure itself.

Each error carries a one-line message for the person who meets it, and
says how to answer it: :attr:`CloudError.exit_code` for a command (2: the
request or the configuration is wrong, 1: a database or placement does
not answer) and :attr:`CloudError.unavailable` for a service (try again
later).  The capacity count's error names
(:mod:`nova_sched_ext.capacity.errors`) are these classes.

This module imports nothing of Nova, so that clients (the capacity API's,
the OpenStackClient plugin) can catch these before Nova is loaded.
"""

import re

from nova_sched_ext import exception as sched_ext_exception

#: SQLAlchemy's link to its error pages, noise in a one-line message
_SQLA_HINT = re.compile(r'\s*\(Background on this error at: [^)]*\)')

#: the longest underlying error text a message quotes
_LONGEST = 300


def one_line(exc):
    """The text of an underlying error, on one line and not too long."""
    text = _SQLA_HINT.sub('', ' '.join(str(exc).split())).strip()
    text = text or type(exc).__name__
    return text if len(text) <= _LONGEST else text[:_LONGEST - 3] + '...'


class CloudError(sched_ext_exception.UserFacingError):
    """The cloud cannot be read; the message says why in one line."""

    #: exit status of a command that stops on this error
    exit_code = 2
    #: True when a database or placement does not answer (retry later)
    unavailable = False

    def __init__(self, message):
        # One line, whatever the underlying library put in its message.
        super().__init__(' '.join(str(message).split()))


class ConfigError(CloudError):
    """The configuration cannot be used (a missing or bad option)."""


class UnknownFlavor(CloudError):
    """A flavor named by the caller does not exist."""


class BackendUnavailable(CloudError,
                         sched_ext_exception.UpstreamUnavailable):
    """A database or placement is unreachable, or answers an error."""

    exit_code = 1
    unavailable = True


class CellUnavailable(BackendUnavailable):
    """The database of a cell did not answer, or failed the read.

    The one error of a cell that does not answer, wherever the cells are
    read (:mod:`nova_sched_ext.cloud.cells` detects it).

    :param cell: the ``CellMapping`` (its name is shown) or its UUID
    :param failure: the exception the read raised, or None if the cell
        did not answer at all
    :param timeout: the seconds the read waited, if known
    """

    def __init__(self, cell, failure=None, timeout=None):
        self.cell_uuid = getattr(cell, 'uuid', cell)
        self.cell_name = getattr(cell, 'name', None) or self.cell_uuid
        self.failure = failure
        self.timeout = timeout
        super().__init__(self._message())

    def _message(self):
        if self.failure is None:
            return 'the database of cell %s did not answer%s' % (
                self.cell_name, ' within %d seconds' % self.timeout
                if self.timeout else '')
        return 'cannot read the database of cell %s: %s' % (
            self.cell_name, one_line(self.failure))


class CellMisconfigured(ConfigError, CellUnavailable):
    """The database of a cell cannot be used: its mapping is wrong.

    A :class:`CellUnavailable` (the cell gives no answer) that the
    operator, not a retry, fixes: a command exits with 2.
    """

    exit_code = ConfigError.exit_code
    unavailable = ConfigError.unavailable

    def _message(self):
        return ('cannot use the database of cell %s: %s (check its '
                'database_connection in the cell mapping)'
                % (self.cell_name, one_line(self.failure)))

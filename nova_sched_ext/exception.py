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

"""The one base of the package's exceptions, and the kinds callers answer.

Every exception class of ``nova_sched_ext`` derives from
:class:`NovaSchedExtError`, so that ``except NovaSchedExtError`` catches
what the package raises and nothing else.  A class that callers already
catch as a standard exception keeps that base too (``ValueError``,
``ImportError``, oslo.config's ``cfg.Error``, Watcher's
``WatcherException``): the package base comes second, and every existing
``except`` clause still catches it.  No two classes share a name; where
two did, one was renamed and its old name kept in its module as an alias
(``tests/unit/test_exception.py`` checks both rules on every module).

Two kinds of error are answered the same way wherever they come from:

* :class:`UserFacingError`: its message is for the person who ran a
  command, wrote the configuration or sent the request, in one line; a
  console script that stops on it prints ``<prog>: error: <message>`` and
  exits with its :attr:`~UserFacingError.exit_code`
  (:func:`nova_sched_ext.cli.run`).
* :class:`UpstreamUnavailable`: a service the package reads or calls (a
  cell database, placement, the Compute API, a coordination backend,
  another cluster) did not answer; trying again later may work.

This module imports nothing, of the package or elsewhere: ``fit/``, the
broker and the Watcher plugins (which cannot import Nova) use it.
"""


class NovaSchedExtError(Exception):
    """The base of every exception the package defines."""


class UserFacingError(NovaSchedExtError):
    """An error a person can fix; the message says what, in one line."""

    #: the exit status of a console script that stops on this error:
    #: 2, the command line, the configuration or the input cannot be used
    exit_code = 2


class UpstreamUnavailable(NovaSchedExtError):
    """A service the package depends on did not answer; retry later."""

    #: the exit status of a console script that stops on this error
    exit_code = 1

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

"""What every console script of the package shares: parser, errors, exit.

A command of the package ends a mistake in one line on stderr,
``<prog>: error: <message>``, and an exit status that says what kind of
mistake it was (2: the command line, the configuration or the input
cannot be used; 1: a service it reads did not answer), never a traceback
unless asked (``--debug``).  This module is that rule, once:

* :class:`Parser`, an ``argparse`` parser whose errors are a
  :class:`UsageError` (one line, exit status 2) instead of argparse's
  usage block, and which takes ``--json`` anywhere on the command line
  when a parser of the command defines it;
* :func:`run`, which runs the body of a command and turns the package's
  user-facing errors (:class:`nova_sched_ext.exception.UserFacingError`)
  into their line and exit status;
* :func:`report`, the line itself, for a command that stops elsewhere.

The plain-text tables are :mod:`nova_sched_ext.cli.table`; the
configuration files a command reads are checked by
:mod:`nova_sched_ext.cli.config_files`.

It imports nothing of Nova: the broker, which never imports Nova, uses it
too.
"""

import argparse
import functools
import logging
import sys

from nova_sched_ext import exception as sched_ext_exception

#: the option :class:`Parser` takes anywhere on the command line
JSON_OPTION = '--json'


class UsageError(sched_ext_exception.UserFacingError):
    """The command line or the configuration cannot be used (exit 2)."""


def one_line(message):
    """``message`` as one line: every run of white space one space."""
    return ' '.join(str(message).split())


class Parser(argparse.ArgumentParser):
    """An argument parser with one-line errors and ``--json`` anywhere.

    argparse prints its whole usage before an error; here the error is a
    :class:`UsageError` saying ``<message> (see <help_hint>)``, which
    :func:`run` prints as one line with exit status 2, like the command's
    other errors.  Subcommand parsers made with
    ``add_subparsers(parser_class=Parser)`` do the same.

    ``--json`` is accepted anywhere on the command line (before ``--``),
    before or after a subcommand's name: when the parser of the command
    or of its subcommand defines ``--json``, it is set however the words
    are ordered; when none does, ``--json`` is an unrecognised argument as
    before.

    :param help_hint: what the error line points to, ``--help`` unless
        told (``nova-sched-ext-broker --help``, for instance)
    :param exits: for a command that parses outside :func:`run` (the
        offline tools): the parser itself writes the one line,
        ``<prog>: <label><message> (see <help_hint>)``, and exits with
        status 2, as argparse does, instead of raising :class:`UsageError`
    :param label: see :func:`report`; with ``exits`` only
    """

    def __init__(self, *args, help_hint='--help', exits=False,
                 label='error: ', **kwargs):
        super().__init__(*args, **kwargs)
        self.help_hint = help_hint
        self.exits = exits
        self.label = label

    def add_subparsers(self, **kwargs):
        # The subcommands' errors point to the same help.
        parser_class = kwargs.get('parser_class', type(self))
        if isinstance(parser_class, type) and issubclass(parser_class,
                                                         Parser):
            kwargs['parser_class'] = functools.partial(
                parser_class, help_hint=self.help_hint, exits=self.exits,
                label=self.label)
        return super().add_subparsers(**kwargs)

    def error(self, message):
        line = '%s (see %s)' % (message, self.help_hint)
        if self.exits:
            self.exit(2, '%s: %s%s\n' % (self.prog, self.label,
                                         one_line(line)))
        raise UsageError(line)

    def parse_known_args(self, args=None, namespace=None):
        args = sys.argv[1:] if args is None else list(args)
        end = args.index('--') if '--' in args else len(args)
        wants_json = JSON_OPTION in args[:end]
        if wants_json:
            args = ([a for a in args[:end] if a != JSON_OPTION] +
                    args[end:])
        namespace, extras = super().parse_known_args(args, namespace)
        if wants_json:
            if hasattr(namespace, 'json'):
                namespace.json = True
            else:
                extras.append(JSON_OPTION)
        return namespace, extras


def report(prog, error, exit_code=None, label='error: '):
    """Write the one line of ``error``; the exit status to end with.

    :param error: an exception or a message
    :param exit_code: the exit status; the error's ``exit_code`` (2 when it
        has none) unless told
    :param label: what comes between the command's name and the message
        (the broker's lines have none)
    """
    if exit_code is None:
        exit_code = getattr(error, 'exit_code', 2)
    sys.stderr.write('%s: %s%s\n' % (prog, label, one_line(error)))
    return exit_code


def run(prog, body, handled=(), unexpected=None, log_unexpected=None,
        label='error: '):
    """``body()``'s exit status, its user-facing errors turned into one line.

    :param prog: the command's name, at the start of the line
    :param body: runs the command; returns its exit status
    :param handled: more exception classes to report as user-facing
        errors (exit status 2 unless they carry an ``exit_code``), for the
        errors of other libraries a command answers the same way
    :param unexpected: ``f(exc) -> (message, exit status)`` for any other
        ``Exception``; such an exception propagates when not given
    :param log_unexpected: called with no argument while an unexpected
        error is handled, to log its traceback (``--debug``)
    :param label: see :func:`report`
    """
    try:
        return body()
    except (sched_ext_exception.UserFacingError,) + tuple(handled) as exc:
        return report(prog, exc, label=label)
    except Exception as exc:
        if unexpected is None:
            raise
        if log_unexpected is not None:
            log_unexpected()
        message, exit_code = unexpected(exc)
        return report(prog, message, exit_code, label=label)


def prog_name(argv, default):
    """The command's name from ``argv[0]``, as the usage lines show it.

    ``default`` when the command runs as ``python -m`` or from its file.
    """
    import os
    prog = os.path.basename(argv[0]) if argv and argv[0] else default
    if prog in ('cmd.py', '__main__.py', '-m', '-c'):
        prog = default
    return prog[:-3] if prog.endswith('.py') else prog


def add_config_options(parser):
    """``--config-file`` and ``--config-dir``, as oslo.config names them.

    For :func:`nova_sched_ext.cli.config_files.load_nova_conf`.
    """
    parser.add_argument(
        '--config-file', action='append', default=[], metavar='PATH',
        help="The scheduler's nova.conf; repeat for more files, later ones "
             "override earlier ones. Default: oslo.config's usual places "
             '(/etc/nova/nova.conf, ...).')
    parser.add_argument(
        '--config-dir', action='append', default=[], metavar='DIR',
        help='A directory of *.conf files read after the config files.')


def setup_logging(debug):
    """Log to stderr (debug level with ``--debug``); the handler to remove.

    A command's output is its stdout; its log (warnings only, unless
    ``debug``) goes to stderr, where its one error line goes too.
    """
    handler = logging.StreamHandler(sys.stderr)
    handler.setFormatter(logging.Formatter(
        '%(asctime)s %(levelname)s [%(name)s] %(message)s'))
    root = logging.getLogger()
    root.addHandler(handler)
    root.setLevel(logging.DEBUG if debug else logging.WARNING)
    return handler


def unexpected_error(exc):
    """``(message, exit status)`` of an error a command did not expect.

    For the commands that read the cloud (the cell databases, placement):
    a database or placement they cannot reach is one line and exit status
    1, as a service that did not answer; anything else is one line naming
    the exception, exit status 1, the traceback left to ``--debug``.
    """
    from keystoneauth1 import exceptions as ks_exc
    from oslo_db import exception as db_exc
    import sqlalchemy.exc

    text = one_line(exc) or type(exc).__name__
    if isinstance(exc, (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError)):
        return 'cannot read a database: %s' % text, 1
    if isinstance(exc, ks_exc.ClientException):
        return 'cannot reach placement: %s' % text, 1
    return 'unexpected error: %s: %s (run with --debug for details)' % (
        type(exc).__name__, text), 1

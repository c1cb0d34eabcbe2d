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


"""The configuration files of the console scripts, read or refused in one line.

oslo.config reports a configuration file it cannot find or parse as a
``cfg.Error``, but one it cannot read at all escapes as a bare
``IsADirectoryError`` (a directory passed as ``--config-file``) or
``UnicodeDecodeError`` (a file that is not UTF-8, which does not even name
the file), and Nova's ``monkey_patch.patch()`` reads the files as soon as a
command is imported.  Every console script that reads ``nova.conf``
(the scheduler, the capacity command and exporter, the defragmentation
command, the simulator) goes through this module, so that such a file is
one line on stderr and exit status 2, like any other unusable
configuration; :func:`load_nova_conf` reads ``nova.conf`` for the
commands that read the cloud as the scheduler does.

It imports nothing of Nova at module level: the console scripts import it
before they choose their concurrency mode.  It was
``nova_sched_ext.cmd.config_files``, a path kept as a deprecated alias.
"""

import argparse
import glob
import os

from oslo_config import cfg

from nova_sched_ext import cli
from nova_sched_ext import exception as sched_ext_exception


class UnreadableConfigFile(cfg.Error, sched_ext_exception.UserFacingError):
    """A configuration file oslo.config cannot read; the message says why.

    A ``cfg.Error``, so that the console scripts' handling of a bad
    configuration applies to it unchanged.
    """


def choose_native_threads():
    """Choose native threads for the process, as Nova's services do.

    ``nova.monkey_patch.patch(backend='threading')``, which reads
    ``[DEFAULT] concurrency_backend`` from the configuration files of the
    command line.  A file it cannot read (missing, unparsable, a directory,
    not UTF-8) is the command's to report, in one line, once its
    ``main()`` runs: until then the process runs on native threads, with
    eventlet kept out, whatever the file would have said.

    The console scripts call it once, through
    :mod:`nova_sched_ext.cli.native_threads`.
    """
    # Nova 31 and 32 have no backend argument: their services default
    # to eventlet, as the scheduler then does (see compat.release).
    from nova_sched_ext.compat import release
    try:
        release.monkey_patch('threading')
    except (cfg.Error, OSError, ValueError):
        os.environ['OS_NOVA_DISABLE_EVENTLET_PATCHING'] = 'true'
        release.monkey_patch('threading')


def _command_line_files(args):
    """``(config files, config dirs)`` that ``args`` name, as oslo.config."""
    parser = argparse.ArgumentParser(add_help=False, allow_abbrev=False,
                                     exit_on_error=False)
    # The same options as oslo.config's, read only to check the files
    # before oslo.config opens them.
    parser.add_argument('--config-file', action='append', default=[],
                        help='a configuration file oslo.config will read')
    parser.add_argument('--config-dir', action='append', default=[],
                        help='a directory of *.conf files oslo.config '
                             'will read')
    try:
        known, _rest = parser.parse_known_args(args)
    except argparse.ArgumentError:
        # "--config-file" without a path: oslo.config says so itself.
        return [], []
    return known.config_file, known.config_dir


def check_command_line(args, project='nova', prog=None):
    """Check the files a command line makes oslo.config read.

    ``args`` are the arguments without the program name.  Without
    ``--config-file`` and ``--config-dir``, oslo.config's default files
    for ``project`` and ``prog`` are checked.

    :raises UnreadableConfigFile: see :func:`check_readable`
    """
    files, dirs = _command_line_files(args)
    if not files and not dirs:
        files = cfg.find_config_files(project=project, prog=prog)
        dirs = cfg.find_config_dirs(project=project, prog=prog)
    check_readable(files, dirs)


def check_readable(config_files=(), config_dirs=()):
    """Check that oslo.config can read every one of these files.

    The files of a directory are its ``*.conf`` files, as oslo.config reads
    them.  A file or directory that does not exist is left to oslo.config,
    whose ``cfg.Error`` already names it.

    :raises UnreadableConfigFile: naming the first file that is a
        directory, cannot be read, or is not UTF-8 text
    """
    paths = list(config_files)
    for directory in config_dirs:
        paths += sorted(glob.glob(os.path.join(directory, '*.conf')))
    for path in paths:
        if os.path.isdir(path):
            raise UnreadableConfigFile(
                'config file %s is a directory, not a file' % path)
        try:
            with open(path, 'rb') as f:
                data = f.read()
        except FileNotFoundError:
            continue
        except OSError as exc:
            raise UnreadableConfigFile('config file %s cannot be read: %s'
                                       % (path, exc.strerror or exc))
        try:
            data.decode('utf-8')
        except UnicodeDecodeError as exc:
            line = data.count(b'\n', 0, exc.start) + 1
            raise UnreadableConfigFile(
                'config file %s is not UTF-8 text (byte 0x%02x on line %d)'
                % (path, data[exc.start], line))


def _check_files(args):
    for path in args.config_file:
        if not os.path.isfile(path):
            raise cli.UsageError('config file %s does not exist' % path)
        if not os.access(path, os.R_OK):
            raise cli.UsageError('config file %s cannot be read (permission '
                                 'denied)' % path)
    for path in args.config_dir:
        if not os.path.isdir(path):
            raise cli.UsageError('config directory %s does not exist' % path)


def load_nova_conf(args, prog, check=None):
    """Parse ``nova.conf`` as the scheduler does; Nova's ``CONF``.

    For a command that reads the cloud (the cell databases, placement)
    without being a Nova service: the files of ``args.config_file`` and
    ``args.config_dir`` (:func:`nova_sched_ext.cli.add_config_options`),
    else oslo.config's default ones, are parsed with Nova's
    ``config.parse_args``, without RPC and without configuring the
    databases; only the files, the command's other options are not
    oslo.config's.

    :param check: ``check(conf)``, run once the files are parsed, for the
        options the command needs; its ``cfg.Error`` or user-facing error
        is the command's :class:`~nova_sched_ext.cli.UsageError`
    :raises nova_sched_ext.cli.UsageError: no configuration file, or one
        that cannot be read or used, said in one line
    """
    argv = [prog]
    for path in args.config_file:
        argv += ['--config-file', path]
    for path in args.config_dir:
        argv += ['--config-dir', path]
    try:
        # A directory or a file that is not UTF-8 escapes oslo.config.
        check_command_line(argv[1:], prog=prog)
    except UnreadableConfigFile as exc:
        raise cli.UsageError(str(exc)) from None
    _check_files(args)
    import nova.conf

    from nova_sched_ext.compat import nova as nova_compat
    conf = nova.conf.CONF
    if not args.config_file and not args.config_dir and not (
            cfg.find_config_files(project='nova') or
            cfg.find_config_dirs(project='nova')):
        raise cli.UsageError(
            'no configuration file: pass --config-file with the '
            "scheduler's nova.conf (for example --config-file "
            '/etc/nova/nova.conf)')
    try:
        nova_compat.parse_args(argv, prog=prog, init_rpc=False,
                               configure_db=False)
        if check is not None:
            check(conf)
    except cfg.Error as exc:
        raise cli.UsageError(cli.one_line(exc)) from None
    except sched_ext_exception.UserFacingError as exc:
        raise cli.UsageError(str(exc)) from None
    return conf

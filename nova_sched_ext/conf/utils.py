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

"""Options that several sections list alike.

:func:`resync_max_rate_opt`: the cap of a kept state's usages resync, for
the scheduler's and the capacity API's sections.

The keystoneauth options of a section of service credentials.

The package's service users (the evictor's ``[nova_sched_ext_evictor]``,
the defragmentation executor's ``[nova_sched_ext_defrag]``) are configured
as Nova configures its own service clients (``[placement]``): keystoneauth's
session, auth and adapter options in one section, the adapter looking for
the internal endpoint first.  These functions give the same options as
Nova's ``nova.conf.utils`` (a unit test compares them) through
keystoneauth's public loading API alone, so that this package, imported by
the broker too, never imports Nova.
"""

from keystoneauth1 import loading as ks_loading
from oslo_config import cfg

from nova_sched_ext.conf import types

#: The adapter options that pick an API version: the code knows the
#: versions it needs, so they are not the operator's to set.
VERSION_OPTS = ('version', 'min_version', 'max_version')


def adapter_opts(service_type):
    """keystoneauth's adapter options for ``service_type``, versions left out.

    The adapter prefers the internal endpoint, then the public one.
    """
    opts = [opt for opt in ks_loading.get_adapter_conf_options(
        include_deprecated=False) if opt.dest not in VERSION_OPTS]
    cfg.set_defaults(opts, valid_interfaces=['internal', 'public'],
                     service_type=service_type)
    return opts


def service_credential_opts(service_type):
    """The options a section of service credentials lists.

    Session, auth (the password plugins' shown) and adapter options, as
    Nova lists its ``[placement]`` section's, for the sample config and the
    configuration reference.
    """
    return (ks_loading.get_session_conf_options() +
            ks_loading.get_auth_common_conf_options() +
            ks_loading.get_auth_plugin_conf_options('password') +
            ks_loading.get_auth_plugin_conf_options('v3password') +
            adapter_opts(service_type))


def _unsettable(value):
    return None


def register_service_credentials(conf, group, service_type):
    """Register keystoneauth's session, auth and adapter options in ``group``.

    The auth plugin's own options (``auth_url``, ``username``...) are
    registered when the plugin is loaded, as keystoneauth does for every
    service.  The version options are registered as placeholders that read
    as None whatever is set, because keystoneauth's adapter loader reads
    them.
    """
    name = getattr(group, 'name', group)
    ks_loading.register_session_conf_options(conf, name)
    ks_loading.register_auth_conf_options(conf, name)
    conf.register_opts(adapter_opts(service_type), group=name)
    for version_opt in VERSION_OPTS:
        conf.register_opt(cfg.Opt(version_opt, type=_unsettable), group=name)


def resync_max_rate_opt(state, process):
    """``kept_state_resync_max_rate`` of one kept state's section.

    :param state: what the help calls the state, e.g. ``'kept provider
        state'``
    :param process: what resyncs on its own, e.g. ``'scheduler'``
    """
    return types.FiniteFloatOpt(
        'kept_state_resync_max_rate',
        default=5.0, min=0.0,
        help='At most how many usage reads a second the %s\'s resync '
             'sends placement (see kept_state_resync_interval); 0 sets no '
             'cap. On a cloud with more resource providers than '
             'kept_state_resync_interval times this, a round of the resync '
             'takes providers / kept_state_resync_max_rate seconds instead '
             '(at 10,000 providers and the defaults, 2,000 s rather than '
             '600 s). Each %s resyncs on its own: at 10,000 providers, '
             'three of them with no cap sent placement 50 reads a second; '
             'with several, divide what placement can spare between them.'
             % (state, process))


def snapshot_opts(state, process, saved_at_stop):
    """The ``kept_state_snapshot_*`` options of one kept state's section.

    :param state: what the help calls the state, e.g. ``'kept provider
        state'``
    :param process: what keeps it, e.g. ``'scheduler'``
    :param saved_at_stop: which of them also save when they stop, e.g.
        ``'when the scheduler stops'``
    """
    return [
        cfg.StrOpt(
            'kept_state_snapshot_file',
            help='A file in which the %(state)s is saved every '
                 'kept_state_snapshot_interval seconds and %(at_stop)s, '
                 'and from which the %(process)s starts: then its '
                 'first poll reads only the resource providers placement '
                 'changed since the save (their generation moved), new or '
                 'gone, instead of every provider (four calls each; about '
                 '5 minutes at 10,000 providers). Processes may share one '
                 'file: it is written whole, then renamed. Room freed '
                 'while no process kept the state shows as less room than '
                 'placement has, never more, until the usages resync or '
                 'the verification (kept_state_snapshot_verify_per_poll) '
                 'reads it. Unset (the default): no file, every start reads '
                 'every provider.' % {'state': state, 'process': process,
                                      'at_stop': saved_at_stop}),
        cfg.IntOpt(
            'kept_state_snapshot_interval',
            default=300, min=1,
            help='Seconds between two saves of the %s to '
                 'kept_state_snapshot_file, in the poller\'s thread after a '
                 'poll (about a second for 10,000 providers).' % state),
        cfg.IntOpt(
            'kept_state_snapshot_max_age',
            default=3600, min=0,
            help='Seconds after its save past which kept_state_snapshot_'
                 'file is not taken at start (every provider is read '
                 'instead): the longer a file waited, the more room freed '
                 'since is unseen until it is read again.'),
        cfg.IntOpt(
            'kept_state_snapshot_verify_per_poll',
            default=100, min=0,
            help='How many providers taken from kept_state_snapshot_file '
                 'each poll reads again in full (four calls each), until '
                 'every one has been read once since the start. A file '
                 'cannot hide a change placement marked with a new '
                 'generation; this also finds what it does not mark (room '
                 'freed, a provider deleted and made again with the same '
                 'UUID). 0 reads only what placement marked.'),
    ]

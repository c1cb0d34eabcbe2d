"""Configuration options of nova-sched-ext.

All options live in the ``[nova_sched_ext]`` group of ``nova.conf``.  The
``list_opts`` function feeds ``oslo-config-generator`` through the
``oslo.config.opts`` entry point (``tox -e genconfig``).
"""

from oslo_config import cfg

GROUP_NAME = 'nova_sched_ext'

nova_sched_ext_group = cfg.OptGroup(
    GROUP_NAME,
    title='nova-sched-ext scheduler plugins',
    help='Options of the nova-sched-ext filters, weighers and fit engine.')

FIT_BACKEND_ENV = 'NOVA_SCHED_EXT_FIT_BACKEND'

fit_opts = [
    cfg.StrOpt(
        'fit_backend',
        default='auto',
        choices=[
            ('auto', 'Use the compiled C helper when it loads, else the '
                     'pure-Python engine (one warning is logged).'),
            ('c', 'Use the compiled C helper; if it cannot be loaded, fall '
                  'back to the pure-Python engine and log a warning.'),
            ('python', 'Always use the pure-Python engine.'),
        ],
        help='Which implementation of the NUMA fit engine to use. Both give '
             'identical answers; the C helper is about two orders of '
             'magnitude faster. The environment variable '
             '%s=python overrides this option.' % FIT_BACKEND_ENV),
]

numa_fit_filter_opts = [
    cfg.BoolOpt(
        'numa_fit_filter_log_summary',
        default=True,
        help='Log, at debug level, one summary line per request for '
             'NUMAFitFilter: how many hosts it saw, how many it rejected, '
             'how many it could not decide (left to NUMATopologyFilter) and '
             'how long the check took.'),
]

ALL_OPTS = fit_opts + numa_fit_filter_opts


def register_opts(conf):
    conf.register_group(nova_sched_ext_group)
    conf.register_opts(ALL_OPTS, group=nova_sched_ext_group)


def list_opts():
    return [(nova_sched_ext_group, ALL_OPTS)]


CONF = cfg.CONF
register_opts(CONF)

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

"""Tables, JSON and plots of replay results."""

import json

from nova_sched_ext_tools.sim import trace


def summary_table(result):
    """A human-readable summary of one :class:`~.replay.Result`."""
    s = result.summary()
    lines = [
        'policy %s on %d hosts, %d requests%s' % (
            s['policy'], s['hosts'], s['requests'],
            ' (--fast pipeline)' if s['fast'] else ''),
        '  filters:  %s' % ', '.join(s['filters']),
        '  weighers: %s' % ', '.join(w.rpartition('.')[2]
                                     for w in s['weighers']),
        '',
        '%-28s %10s' % ('placed', s['placed']),
        '%-28s %10s' % ('placed vCPUs', s['placed_vcpus']),
        '%-28s %10.0f' % ('placed RAM (GB)', s['placed_ram_gb']),
        '%-28s %10s' % ('rejected', s['rejected']),
    ]
    for strategy in trace.STRATEGIES:
        lines.append('%-28s %10s' % (
            '  %s (of %d)' % (strategy, s['requests_by'][strategy]),
            s['rejected_by'][strategy]))
    lines.append('%-28s %10s' % ('rejected, non-affinity',
                                 s['rejected_non_affinity']))
    if s['departed']:
        lines.append('%-28s %10s' % ('departed', s['departed']))
    if s['late_fit_failures']:
        lines.append('%-28s %10s' % ('claims failing NUMA fit',
                                     s['late_fit_failures']))
    for name, count in s['large_slots_left'].items():
        lines.append('%-28s %10s' % ('slots left %s' % name, count))
    lines.append('%-28s %10.2f' % ('mean decision (ms)',
                                   s['mean_decision_ms']))
    lines.append('%-28s %10.1f' % ('replay (s)', s['elapsed_s']))
    return '\n'.join(lines)


COMPARE_COLUMNS = (
    ('policy', '%-14s', 'policy'),
    ('placed', '%8s', 'placed'),
    ('placed vCPUs', '%13s', 'placed_vcpus'),
    ('rej. non-aff.', '%14s', 'rejected_non_affinity'),
    ('rej. total', '%11s', 'rejected'),
    ('slots left', '%11s', 'large_slots_left_total'),
    ('ms/req', '%8.1f', 'mean_decision_ms'),
    ('replay s', '%9.0f', 'elapsed_s'),
)


def compare_table(results, title=None, rst=False):
    """One row per policy (the packing benchmark's table)."""
    rows = [r.summary() for r in results]
    header = [name for name, _fmt, _key in COMPARE_COLUMNS]
    cells = [[(fmt % row[key]).strip() for _n, fmt, key in COMPARE_COLUMNS]
             for row in rows]
    widths = [max(len(h), *(len(c[i]) for c in cells))
              for i, h in enumerate(header)]
    lines = []
    if title:
        lines.append(title)
    if rst:
        rule = ' '.join('=' * w for w in widths)
        lines += [rule, ' '.join(h.ljust(w) for h, w in zip(header, widths)),
                  rule]
        lines += [' '.join(c.ljust(w) for c, w in zip(row, widths))
                  for row in cells]
        lines.append(rule)
    else:
        lines.append('  '.join(h.rjust(w) for h, w in zip(header, widths)))
        lines += ['  '.join(c.rjust(w) for c, w in zip(row, widths))
                  for row in cells]
    if rows and rows[0]['large_slots_left']:
        lines.append('slots left: %s' % ' + '.join(
            rows[0]['large_slots_left']))
    return '\n'.join(lines)


def to_json(results):
    """JSON: one summary object, or a list for several policies."""
    summaries = [r.summary() for r in results]
    return json.dumps(summaries[0] if len(summaries) == 1 else summaries,
                      indent=2, sort_keys=True)


def plot(results, path, title=None):
    """Placed / rejected over the replay and large-flavor slots left."""
    import matplotlib
    matplotlib.use('Agg')
    from matplotlib import pyplot

    figure, (top, bottom) = pyplot.subplots(2, 1, figsize=(9, 7),
                                            sharex=True)
    for result in results:
        placed, rejected = [], []
        p = r = 0
        for host in result.placements:
            if host is None:
                r += 1
            else:
                p += 1
            placed.append(p)
            rejected.append(r)
        xs = range(1, len(placed) + 1)
        line, = top.plot(xs, placed, label='%s placed' % result.policy)
        top.plot(xs, rejected, linestyle='--', color=line.get_color(),
                 label='%s rejected' % result.policy)
        samples = result.samples
        sx = [s['request'] for s in samples]
        totals = [sum(s['slots'].values()) for s in samples]
        bottom.plot(sx, totals, marker='o', markersize=3,
                    color=line.get_color(), label=result.policy)
    top.set_ylabel('requests')
    top.legend(fontsize='small')
    top.grid(True, alpha=0.3)
    names = list(results[0].large_slots_left) if results else []
    bottom.set_ylabel('large-flavor slots left')
    bottom.set_xlabel('requests replayed')
    if names:
        bottom.set_title('slots of %s' % ' + '.join(names), fontsize='small')
    bottom.legend(fontsize='small')
    bottom.grid(True, alpha=0.3)
    if title:
        figure.suptitle(title)
    figure.tight_layout()
    figure.savefig(path, dpi=100)
    pyplot.close(figure)
    return path

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

"""``nova-sched-ext-bench placement-claims``: claims that race on one host.

Several schedulers that choose from the same picture send their claims to
the same provider at once; placement is the authority that must refuse
the ones that no longer fit.  This bench checks that it does, for each
value of placement's ``[placement] allocation_conflict_retry_count``
(``--conflict-retries``, default ``1,10``: the devstack plugin's value and
placement's own default), side by side in one run:

* placement (openstack-placement's WSGI application, served over HTTP in
  this process) on a database of its own on the MariaDB of ``--db-url``
  (sqlite has one writer and cannot race), dropped at the end;
* per round, a new provider with room for ``--room`` claims
  (``MEMORY_MB``, allocation ratio 1.0) and ``--clients`` threads that
  each send ``--claims`` claims at once through Nova's own report client
  (``SchedulerReportClient.claim_resources``, which sends a claim again
  when placement answers a generation conflict, up to four times, as it
  does for the scheduler); the rounds alternate between the values;
* then the provider's usage against its capacity.

Placement's own default retries a generation conflict inside the claim's
database transaction: the retry counts the claim's own first, failed
attempt as usage that was there before, so placement's "no worse than
before" exemption admits it whatever the capacity (and on MariaDB's
REPEATABLE READ the retry may also read the usage of the transaction's
first snapshot).  With one attempt the conflict goes back to Nova, whose
next request is a new transaction.  The figures say how often each value
let a provider exceed its capacity, and how many claims each admitted; a
run in which the first value of ``--conflict-retries`` over-commits exits
1.
"""

import json
import random
import threading
import uuid as uuid_lib

from nova_sched_ext_tools.bench import scale

#: the size of one claim
CLAIM_MB = 300


def add_arguments(parser):
    parser.add_argument('--conflict-retries', default='1,10',
                        metavar='N[,N...]',
                        help='values of placement\'s [placement] '
                             'allocation_conflict_retry_count, in turn '
                             '(default 1,10); the run fails if the first '
                             'over-commits')
    parser.add_argument('--rounds', type=int, default=10,
                        help='rounds per value (default 10)')
    parser.add_argument('--clients', type=int, default=6,
                        help='threads claiming at once (default 6)')
    parser.add_argument('--claims', type=int, default=2,
                        help='claims each thread sends, one after the '
                             'other (default 2)')
    parser.add_argument('--room', type=int, default=3,
                        help='claims a provider has room for (default 3)')
    parser.add_argument('--db-url', default=scale.DEFAULT_DB_URL,
                        help='the MariaDB/MySQL server, without a '
                             'database (default %s)' % scale.DEFAULT_DB_URL)
    parser.add_argument('--seed', type=int, default=1,
                        help='seed of the order of the rounds (default 1)')


def _check(args):
    values = scale.parse_sizes(args.conflict_retries, '--conflict-retries')
    for name in ('rounds', 'clients', 'claims', 'room'):
        if getattr(args, name) < 1:
            raise scale.BenchError('--%s must be at least 1' % name)
    return values


class _Round(object):
    """One provider and the claims sent to it at once."""

    def __init__(self, rc, ctx, number, args):
        self.rc, self.ctx, self.args = rc, ctx, args
        self.uuid = scale.stable_uuid('claims', number)
        self.capacity = args.room * CLAIM_MB
        resp = rc.post('/resource_providers',
                       {'uuid': self.uuid, 'name': 'claims-%d' % number},
                       version='1.20', global_request_id=None)
        if resp.status_code not in (200, 201):
            raise scale.BenchError('placement refused a provider: %s'
                                   % resp.text[:200])
        resp = rc.put('/resource_providers/%s/inventories' % self.uuid,
                      {'resource_provider_generation': 0,
                       'inventories': {'MEMORY_MB': {
                           'total': self.capacity}}},
                      version='1.20', global_request_id=None)
        if resp.status_code != 200:
            raise scale.BenchError('placement refused an inventory: %s'
                                   % resp.text[:200])

    def run(self):
        admitted = []
        lock = threading.Lock()
        start = threading.Barrier(self.args.clients)

        def client():
            start.wait()
            for _ in range(self.args.claims):
                consumer = str(uuid_lib.uuid4())
                if self.rc.claim_resources(
                        self.ctx, consumer,
                        {'allocations': {self.uuid: {'resources': {
                            'MEMORY_MB': CLAIM_MB}}}},
                        scale.PROJECT_ID, scale.USER_ID,
                        allocation_request_version='1.36'):
                    with lock:
                        admitted.append(consumer)

        threads = [threading.Thread(target=client)
                   for _ in range(self.args.clients)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()
        usages = self.rc.get('/resource_providers/%s/usages' % self.uuid,
                             version='1.14').json()['usages']
        return len(admitted), usages.get('MEMORY_MB', 0)


def run(args):
    """Entry point of ``nova-sched-ext-bench placement-claims``."""
    try:
        values = _check(args)
        result = _measure(args, values)
    except scale.BenchError as exc:
        raise SystemExit('nova-sched-ext-bench placement-claims: %s' % exc)
    if args.json:
        print(json.dumps(result, indent=2))
    else:
        print(render(result))
    return 1 if result['rows'][0]['over_committed_rounds'] else 0


def _measure(args, values):
    databases = scale.Databases('mysql', args.db_url,
                                'nse_claims_%d' % random.getrandbits(24))
    try:
        databases.create()
    except scale.BenchError as exc:
        raise scale.BenchError('needs MariaDB/MySQL: %s' % exc)
    try:
        return _rounds(args, values, databases)
    finally:
        scale._dispose_engines()
        databases.drop()


def _rounds(args, values, databases):
    from nova import conf as nova_conf
    from nova import context as nova_context
    from nova.scheduler.client import report

    scale.quiet_logs()
    placement = scale.Placement(databases.urls['placement'])
    try:
        conf = nova_conf.CONF
        conf([], project='nova', default_config_files=[])
        scale.point_nova_at(conf, placement.endpoint)
        rc = report.report_client_singleton()
        ctx = nova_context.get_admin_context()
        order = [v for v in values for _ in range(args.rounds)]
        random.Random(args.seed).shuffle(order)
        rows = {v: {'allocation_conflict_retry_count': v, 'rounds': 0,
                    'over_committed_rounds': 0, 'admitted': 0,
                    'highest_usage_pct': 0.0} for v in values}
        for number, value in enumerate(order):
            placement.conf.set_override('allocation_conflict_retry_count',
                                        value, group='placement')
            one = _Round(rc, ctx, number, args)
            admitted, used = one.run()
            row = rows[value]
            row['rounds'] += 1
            row['admitted'] += admitted
            row['over_committed_rounds'] += used > one.capacity
            row['highest_usage_pct'] = max(row['highest_usage_pct'],
                                           100.0 * used / one.capacity)
            scale.progress('round %d, allocation_conflict_retry_count %d: '
                           '%d of %d claims admitted, usage %d of %d MB'
                           % (number, value, admitted,
                              args.clients * args.claims, used,
                              one.capacity))
    finally:
        placement.stop()
    return {
        'database': databases.describe(),
        'claims_per_round': args.clients * args.claims,
        'room_per_round': args.room, 'clients': args.clients,
        'rows': [rows[v] for v in values],
        'note': 'claims through Nova\'s report client '
                '(claim_resources), which sends a claim again on a '
                'generation conflict; a provider per round with room for '
                '--room claims',
    }


def render(result):
    lines = ['Claims that race on one provider (%s): %d claims a round '
             'from %d threads, room for %d' % (
                 result['database'], result['claims_per_round'],
                 result['clients'], result['room_per_round']),
             '%-33s %7s %14s %9s %14s' % (
                 'allocation_conflict_retry_count', 'rounds',
                 'over capacity', 'admitted', 'highest usage')]
    for row in result['rows']:
        lines.append('%-33d %7d %14d %9d %13.0f%%' % (
            row['allocation_conflict_retry_count'], row['rounds'],
            row['over_committed_rounds'], row['admitted'],
            row['highest_usage_pct']))
    return '\n'.join(lines)

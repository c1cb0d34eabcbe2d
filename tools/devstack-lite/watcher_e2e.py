#!/usr/bin/env python3
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

"""devstack-lite's Watcher stage: the defragmentation through live Watcher.

Run by watcher.sh (``NSE_LITE_WATCHER=1``) with the lite virtualenv's
python, once watcher-api, watcher-decision-engine and watcher-applier run.

``keystone-setup``
    The ``watcher`` service user (roles admin and service in the project
    ``service``), as devstack's Watcher plugin creates it.
``run``
    The scenario, through the public APIs only (keystoneauth, admin):

    1. the cloud is empty; a one-cell flavor takes five eighths of a
       cell of the smallest two-cell host, and the reference flavor (the
       NUMA-slot weigher's, whose slots the planner recovers) three
       quarters of each of its two cells;
    2. one-cell servers (Compute API 2.74 ``host``): one on the first
       two-cell host, one in each cell of the others. The reference flavor
       now fits no host (its boot ends in ERROR, NoValidHost) and only a
       one-cell host has room for a one-cell server;
    3. once Watcher's model of the cloud (its data model API) shows the
       servers where they are, ``nova-sched-ext-defrag plan --json`` run
       alone with the audit's budget and every host in scope: the moves
       the action plan must have;
    4. an audit template (goal ``numa_defragmentation``, strategy
       ``nova_sched_ext_defrag``) and a ONESHOT audit, which must end
       SUCCEEDED with one action plan whose actions are those moves in
       that order: live ``migrate`` actions, each from its server's host,
       each the child of the one before;
    5. the action plan started, which must end SUCCEEDED with every
       action SUCCEEDED; each server is then ACTIVE on its action's
       destination node (its NUMA topology is shown);
    6. the reference flavor boots, ACTIVE.

    Prints one line per check and ``watcher-e2e: N passed, N failed``;
    the exit status is 1 when a check failed.

``api_application(conf)`` is the WSGI application of watcher-api for
gunicorn (Watcher's own WSGI module reads its configuration from the
process's command line, which under gunicorn is gunicorn's).
"""

import argparse
import json
import os
import subprocess
import sys
import time

ENV = os.environ
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
COMPUTE_VERSION = '2.79'
WATCHER_VERSION = '1.3'
ONE_CELL_FLAVOR = 'nse-watcher-one-cell'


def api_application(conf):
    """watcher-api's WSGI application, configured from ``conf``."""
    sys.argv = ['watcher-api', '--config-file', conf]
    try:
        from watcher.api import wsgi
        return wsgi.initialize_wsgi_app()
    except SystemExit as exc:
        raise RuntimeError('watcher-api failed to start (exit status %s)'
                           % exc.code) from exc


def keystone_setup(args):
    import lite

    lite.service_user(lite.Identity(lite._admin_session()), 'watcher')
    print('keystone user watcher (admin, service in project service)')
    return 0


class Failed(Exception):
    """A check failed; the scenario cannot go on."""

    counted = False


class Scenario:

    def __init__(self, args):
        from keystoneauth1 import adapter
        import lite

        sess = lite._admin_session()
        self.compute = adapter.Adapter(
            sess, service_type='compute', interface='public',
            default_microversion=COMPUTE_VERSION, raise_exc=False)
        self.optim = adapter.Adapter(
            sess, service_type='infra-optim', interface='public',
            raise_exc=False,
            additional_headers={
                'OpenStack-API-Version': 'infra-optim %s' % WATCHER_VERSION})
        self.args = args
        self.passed = 0
        self.failed = 0
        self.started = time.monotonic()

    # -- reporting ------------------------------------------------------

    def say(self, message):
        print('[%4.0fs] %s' % (time.monotonic() - self.started, message),
              flush=True)

    def check(self, ok, message, fatal=True):
        if ok:
            self.passed += 1
            self.say('PASS %s' % message)
        else:
            self.failed += 1
            self.say('FAIL %s' % message)
            if fatal:
                failure = Failed(message)
                failure.counted = True
                raise failure
        return ok

    # -- HTTP -----------------------------------------------------------

    @staticmethod
    def _json(response, what):
        if response.status_code >= 400:
            raise Failed('%s: HTTP %d %s' % (what, response.status_code,
                                             response.text[:500]))
        return response.json() if response.content else {}

    def get(self, api, url, what=None):
        return self._json(api.get(url), what or 'GET %s' % url)

    def post(self, api, url, body, what=None):
        return self._json(api.post(url, json=body), what or 'POST %s' % url)

    def wait(self, what, probe, timeout, interval=2):
        """Call probe() until it returns something true; return it."""
        deadline = time.monotonic() + timeout
        while True:
            result = probe()
            if result:
                return result
            if time.monotonic() > deadline:
                raise Failed('%s: not within %d s' % (what, timeout))
            time.sleep(interval)

    # -- compute ----------------------------------------------------------

    def hosts(self):
        return ['%s%d' % (self.args.host_prefix, i)
                for i in range(1, self.args.hosts + 1)]

    def layouts(self):
        """{host: (cells, cpus per cell, MiB per cell)} (plugin order)."""
        layouts = self.args.layouts.split()
        found = {}
        for i, host in enumerate(self.hosts()):
            cells, cpus, memory = layouts[i % len(layouts)].split('x')
            found[host] = (int(cells), int(cpus), int(memory))
        return found

    def flavor(self, name, vcpus, ram, cells):
        found = self.get(self.compute, '/flavors/detail?is_public=None')
        for flavor in found['flavors']:
            if flavor['name'] == name:
                if (flavor['vcpus'], flavor['ram']) != (vcpus, ram):
                    raise Failed('flavor %s exists with %d vCPUs and %d MiB, '
                                 'not %d and %d' % (name, flavor['vcpus'],
                                                    flavor['ram'], vcpus,
                                                    ram))
                break
        else:
            flavor = self.post(self.compute, '/flavors', {'flavor': {
                'name': name, 'vcpus': vcpus, 'ram': ram, 'disk': 1}})[
                    'flavor']
        self.post(self.compute, '/flavors/%s/os-extra_specs' % flavor['id'],
                  {'extra_specs': {'hw:numa_nodes': str(cells)}})
        self.say('flavor %s: %d vCPU, %d MiB, hw:numa_nodes=%d'
                 % (name, vcpus, ram, cells))
        return flavor['id']

    def boot(self, name, flavor, host=None):
        server = {'name': name, 'flavorRef': flavor,
                  'imageRef': ENV['NSE_LITE_IMAGE_ID'], 'networks': 'none'}
        if host:
            server['host'] = host
        return self.post(self.compute, '/servers', {'server': server})[
            'server']['id']

    def server(self, uuid):
        return self.get(self.compute, '/servers/%s' % uuid)['server']

    def settled(self, uuid, timeout=180):
        def probe():
            server = self.server(uuid)
            if server['status'] in ('ACTIVE', 'ERROR'):
                return server
            return None
        return self.wait('server %s to build' % uuid, probe, timeout)

    def topology(self, uuid):
        found = self.compute.get('/servers/%s/topology' % uuid)
        if found.status_code != 200:
            return '(topology: HTTP %d)' % found.status_code
        return ', '.join(
            'cell %s: %s MiB' % (node.get('host_node'), node.get('memory_mb'))
            for node in found.json().get('nodes', []))

    # -- watcher ----------------------------------------------------------

    def model_shows(self, expected):
        """Whether Watcher's compute model has the servers on their hosts."""
        response = self.optim.get('/v1/data_model?data_model_type=compute')
        if response.status_code != 200:
            self.say('data model API: HTTP %d' % response.status_code)
            return None
        elements = response.json().get('context', [])
        where = {}
        for element in elements:
            values = set(str(value) for value in element.values())
            for uuid, host in expected.items():
                if uuid in values:
                    where[uuid] = host in values
        return all(where.get(uuid) for uuid in expected)

    def state_of(self, kind, uuid, ends, timeout):
        def probe():
            found = self.get(self.optim, '/v1/%s/%s' % (kind, uuid))
            return found if found['state'] in ends else None
        return self.wait('%s %s to end' % (kind[:-1], uuid), probe, timeout,
                         interval=3)

    # -- the scenario -----------------------------------------------------

    def run(self):
        layouts = self.layouts()
        two_cell = sorted((memory, host) for host, (cells, _, memory)
                          in layouts.items() if cells == 2)
        one_cell = [host for host, (cells, _, _) in layouts.items()
                    if cells == 1]
        if not two_cell or not one_cell:
            raise Failed('the layouts %s need two-cell hosts and a one-cell '
                         'host' % self.args.layouts)
        cell_mb = two_cell[0][0]
        # A one-cell server takes five eighths of a cell, a reference slot
        # three quarters of each of two cells. The first two-cell host gets
        # one such server, the others two (one per cell): no reference slot
        # is left, no two-cell host has a cell for another one-cell server,
        # and only a one-cell host can take them.
        small_mb = cell_mb * 5 // 8
        room = sum(layouts[host][2] for host in one_cell)
        if room < (2 * len(two_cell) - 1) * small_mb:
            raise Failed('the one-cell hosts (%d MiB) cannot take the %d '
                         'one-cell servers of %d MiB' % (
                             room, 2 * len(two_cell) - 1, small_mb))
        small = self.flavor(ONE_CELL_FLAVOR, 1, small_mb, 1)
        reference = self.flavor(self.args.reference_flavor, 2,
                                2 * (cell_mb * 3 // 4), 2)
        servers = self.get(self.compute, '/servers?all_tenants=1')['servers']
        self.check(not servers, 'the cloud has no server to start with (%d)'
                   % len(servers))

        # 1. Fragment.
        placed = {}
        for number, (_, host) in enumerate(two_cell):
            for cell in range(1 if number == 0 else 2):
                uuid = self.boot('nse-watcher-%s-%d' % (host, cell), small,
                                 host)
                placed[uuid] = host
                # One at a time, so each claims its cell before the next.
                server = self.settled(uuid)
                self.check(server['status'] == 'ACTIVE' and
                           server['OS-EXT-SRV-ATTR:host'] == host,
                           'server %s (%d MiB) ACTIVE on %s (%s)' % (
                               uuid, small_mb, host, self.topology(uuid)))
        blocked = self.settled(self.boot('nse-watcher-blocked', reference))
        fault = (blocked.get('fault') or {}).get('message', '')
        self.check(blocked['status'] == 'ERROR',
                   'fragmented: the reference flavor %s does not boot (%s: '
                   '%s)' % (self.args.reference_flavor, blocked['status'],
                            fault))
        self._json(self.compute.delete('/servers/%s' % blocked['id']),
                   'delete the blocked server')

        # 2. Watcher's model must see the fragmentation before the audit.
        self.wait("Watcher's compute model to show the servers",
                  lambda: self.model_shows(placed),
                  timeout=max(120, 6 * self.args.model_period), interval=5)
        self.check(True, "Watcher's compute model shows the servers on "
                         "their hosts")

        # 3. What the planner plans on its own, with the budget and scope
        # the strategy will give it: the action plan must be these moves.
        parameters = {'budget_moves': len(placed), 'budget_share': 100}
        expected = self.planner_moves(parameters)
        self.check(expected, 'the planner alone plans %d move(s): %s' % (
            len(expected), ', '.join('%s %s -> %s' % move
                                     for move in expected)))

        # 4. Audit template, ONESHOT audit, action plan.
        template = self.post(self.optim, '/v1/audit_templates', {
            'name': 'nse-watcher-e2e', 'goal': 'numa_defragmentation',
            'strategy': 'nova_sched_ext_defrag'})
        self.say('audit template %s (goal %s, strategy %s)' % (
            template['uuid'], template.get('goal_name'),
            template.get('strategy_name')))
        audit = self.post(self.optim, '/v1/audits', {
            'audit_template_uuid': template['uuid'],
            'audit_type': 'ONESHOT', 'auto_trigger': False,
            'parameters': parameters})
        self.say('audit %s, parameters %s' % (audit['uuid'],
                                              json.dumps(parameters)))
        audit = self.state_of('audits', audit['uuid'],
                              ('SUCCEEDED', 'FAILED', 'CANCELLED'), 300)
        self.check(audit['state'] == 'SUCCEEDED',
                   'audit %s %s' % (audit['uuid'], audit['state']))
        plans = self.get(self.optim, '/v1/action_plans?audit_uuid=%s'
                         % audit['uuid'])['action_plans']
        self.check(len(plans) == 1, 'the audit made one action plan (%d)'
                   % len(plans))
        plan = self.get(self.optim, '/v1/action_plans/%s' % plans[0]['uuid'])
        self.say('action plan %s %s, efficacy %s' % (
            plan['uuid'], plan['state'], ', '.join(
                '%s %s' % (indicator['name'], indicator['value'])
                for indicator in plan.get('efficacy_indicators') or ())))
        actions = self.ordered(self.get(
            self.optim, '/v1/actions/detail?action_plan_uuid=%s'
            % plan['uuid'])['actions'])
        for action in actions:
            self.say('action %s %s %s parents %s' % (
                action['uuid'], action['action_type'],
                json.dumps(action['input_parameters'], sort_keys=True),
                action.get('parents')))
        got = [(action['input_parameters'].get('resource_id'),
                action['input_parameters'].get('source_node'),
                action['input_parameters'].get('destination_node'))
               for action in actions]
        self.check(got == expected,
                   "the action plan's actions are the planner's moves, in "
                   'its order')
        self.check(all(action['action_type'] == 'migrate' and
                       action['input_parameters'].get('migration_type') ==
                       'live' for action in actions),
                   'every action is a live migrate')
        self.check(all(placed.get(uuid) == source
                       for uuid, source, _ in got),
                   "every action's source_node is its server's host")
        self.check(all(actions[i]['parents'] == [actions[i - 1]['uuid']]
                       for i in range(1, len(actions))),
                   'the actions are chained one after the other '
                   '(nova_sched_ext_sequential)')
        moves = {action['input_parameters']['resource_id']: action
                 for action in actions}

        # 5. The applier.
        self.post(self.optim, '/v1/action_plans/%s/start' % plan['uuid'], {},
                  'start the action plan')
        plan = self.state_of('action_plans', plan['uuid'],
                             ('SUCCEEDED', 'FAILED', 'CANCELLED'), 600)
        actions = self.get(self.optim, '/v1/actions/detail?action_plan_uuid=%s'
                           % plan['uuid'])['actions']
        for action in self.ordered(actions):
            self.say('action %s %s' % (action['uuid'], action['state']))
        self.check(plan['state'] == 'SUCCEEDED' and
                   all(a['state'] == 'SUCCEEDED' for a in actions),
                   'action plan %s %s' % (plan['uuid'], plan['state']),
                   fatal=False)
        for uuid, action in moves.items():
            server = self.server(uuid)
            target = action['input_parameters']['destination_node']
            self.check(server['status'] == 'ACTIVE' and
                       server['OS-EXT-SRV-ATTR:host'] == target,
                       'server %s %s on %s, planned %s (%s)' % (
                           uuid, server['status'],
                           server['OS-EXT-SRV-ATTR:host'], target,
                           self.topology(uuid)), fatal=False)

        # 6. The large flavor has its room back.
        booted = self.settled(self.boot('nse-watcher-defragmented',
                                        reference))
        self.check(booted['status'] == 'ACTIVE',
                   'the reference flavor %s boots now: %s on %s (%s)' % (
                       self.args.reference_flavor, booted['status'],
                       booted.get('OS-EXT-SRV-ATTR:host'),
                       self.topology(booted['id'])
                       if booted['status'] == 'ACTIVE' else
                       (booted.get('fault') or {}).get('message')),
                   fatal=False)

    def planner_moves(self, parameters):
        """[(instance, source, target)] of nova-sched-ext-defrag alone."""
        command = [os.path.join(os.path.dirname(sys.executable),
                                'nova-sched-ext-defrag'), 'plan', '--json',
                   '--config-file', self.args.nova_conf,
                   '--budget-moves', str(parameters['budget_moves']),
                   '--budget-share', str(parameters['budget_share']),
                   '--scope-hosts', ','.join(self.hosts())]
        done = subprocess.run(command, capture_output=True, text=True,
                              timeout=300)
        if done.returncode != 0:
            raise Failed('%s failed: %s' % (' '.join(command),
                                            done.stderr.strip()[-500:]))
        return [(move['instance'], move['source'], move['target'])
                for move in json.loads(done.stdout)['moves']]

    @staticmethod
    def ordered(actions):
        """The actions parents first (the plan's order)."""
        by_parent = {}
        for action in actions:
            parents = action.get('parents') or []
            by_parent.setdefault(parents[0] if parents else None,
                                 []).append(action)
        ordered, parent = [], None
        while by_parent.get(parent):
            action = by_parent[parent].pop(0)
            ordered.append(action)
            parent = action['uuid']
        done = {action['uuid'] for action in ordered}
        return ordered + [a for a in actions if a['uuid'] not in done]


def run(args):
    scenario = Scenario(args)
    try:
        scenario.run()
    except Failed as exc:
        if not exc.counted:
            scenario.failed += 1
            scenario.say('FAIL %s' % exc)
    print('watcher-e2e: %d passed, %d failed'
          % (scenario.passed, scenario.failed), flush=True)
    return 1 if scenario.failed else 0


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    commands = parser.add_subparsers(dest='command', required=True)
    commands.add_parser('keystone-setup')
    scenario = commands.add_parser('run')
    scenario.add_argument('--hosts', type=int, required=True)
    scenario.add_argument('--host-prefix', required=True)
    scenario.add_argument('--layouts', required=True)
    scenario.add_argument('--reference-flavor', required=True)
    scenario.add_argument('--model-period', type=int, default=10)
    scenario.add_argument('--nova-conf', required=True)
    args = parser.parse_args()
    return {'keystone-setup': keystone_setup, 'run': run}[args.command](args)


if __name__ == '__main__':
    sys.exit(main())

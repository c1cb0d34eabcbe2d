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


"""Several schedulers under load and faults: devstack-lite's last step.

Run by run.sh after tempest, with the lite virtualenv's python, against the
cloud's three nova-sched-ext-scheduler processes (one redis of the run's
own, fault launcher and fault proxies: see run.sh and localrc)::

    multisched.py burst           the load burst, then the invariants
    multisched.py faults [NAME..] one round of each fault (or those named)
    multisched.py soak --requests N [--seed S]
                                  rounds of random faults until N requests
    multisched.py staleness [--changes N]
                                  time from a change in placement to each
                                  scheduler's kept provider state

Every command cleans up what it created and ends with status 1 if any
invariant was violated. The lines it prints:

``requests per minute: R (N requests in S s)``
    scheduling requests that reached their final state (ACTIVE or ERROR),
    per minute of the phase;
``invariant NAME: N violation(s)``
    for each invariant, after each phase or round (NAME below);
``round NAME: ...``
    what a fault round did and how its request ended.

The invariants, checked from the Compute API and placement once every
request has reached its final state:

``set-spread``      no two ACTIVE members of a deployment set on one host
                    (strategy host) or in one failure domain (strategy
                    domain);
``set-cap``         no set with more ACTIVE members than its max_size;
``zone-cap``        no availability zone with more preemptible instances
                    than [nova_sched_ext] preemptible_max_per_az;
``host-cap``        no host with more than preemptible_max_per_host;
``non-preemptible-deleted``
                    no non-preemptible server this tool created is gone
                    unless this tool deleted it;
``final-state``     every accepted boot ended ACTIVE, or ERROR with a fault
                    message, within the timeout;
``stray-allocation``
                    no consumer with allocations on a compute node that is
                    not a server on that host (after the reconcile period:
                    an eviction's reservation never outlives its request);
``missing-allocation``
                    no ACTIVE server without allocations on its host.

The fault rounds (each in a zone of one host filled with preemptible
servers, so that an on-demand boot of twice their size must evict two):

``kill-reserved``   SIGKILL of the scheduler that serves the eviction,
                    after its reservation and before the first victim is
                    deleted (scheduler_launcher.py's kill-at file);
``kill-between``    ... after the first of the two victims' deletion;
``kill-gone``       ... after both are gone, before the request is answered;
``placement-500``   placement answers 500 to the reservation (fault_proxy);
``placement-409``   placement answers 409 to it, twice (the driver plans
                    again once, then gives up);
``compute-fail``    the Compute API answers 500 to the first victim's
                    deletion;
``rabbit-drop``     RabbitMQ closes every connection of one scheduler
                    (rabbitmqctl close_connection), then boots;
``redis-stop``      the schedulers' redis is shut down: a deployment-set
                    member and a capped preemptible boot are refused, a
                    plain boot is placed; redis starts again and a member
                    is placed.

A killed scheduler, and the redis shut down, are started again by run.sh's
supervisor loop (it restarts them while ``$FAULTS/hold-<service>`` is
absent).
"""

import argparse
import collections
import concurrent.futures
import json
import os
import random
import re
import subprocess
import sys
import time
import uuid

ENV = os.environ
PREEMPTIBLE_KEY = 'nova_sched_ext:preemptible'
COMPUTE_VERSION = '2.60'
#: seconds a boot may take to reach ACTIVE or ERROR
BOOT_TIMEOUT = 600
#: client threads that send the boots of a phase
CLIENT_THREADS = 16
PREFIX = 'nse-ms-'


def log(message, *args):
    print(message % args if args else message, flush=True)


def shorten(text, width):
    """``text`` on one line, at most ``width`` characters, cut after a word.

    A reason cut in the middle of a word ("... could )") reads like a bug
    of its own; one that ends on a word and an ellipsis says it goes on.
    """
    text = ' '.join(text.split())
    if len(text) <= width:
        return text
    cut = text[:width - 1]
    if text[width - 1] != ' ' and ' ' in cut:
        # drop the word the cut went through
        cut = cut.rsplit(' ', 1)[0]
    return cut.rstrip(' ,;:') + '\u2026'


def as_expected(boot, expected, why=''):
    """``ERROR, as expected: why (fault...)`` or ``ACTIVE, not ERROR``.

    A fault round makes some boots fail on purpose: the log says which
    failures were the point of the round.
    """
    text = boot.status
    if boot.status == expected:
        text += ', as expected' + (': %s' % why if why else '')
    else:
        text += ', not %s' % expected
    if boot.fault:
        text += ' (%s)' % shorten(boot.fault, 90)
    return text


def _session():
    from keystoneauth1.identity import v3
    from keystoneauth1 import session

    auth = v3.Password(auth_url=ENV['NSE_LITE_KEYSTONE_URL'],
                       username='admin', password=ENV['NSE_LITE_PASSWORD'],
                       project_name='admin', user_domain_id='default',
                       project_domain_id='default')
    return session.Session(auth=auth)


class Cloud(object):
    """The Compute API and placement, and what this tool created."""

    def __init__(self, compute=None, placement=None):
        if compute is None:
            from keystoneauth1 import adapter

            sess = _session()
            compute = adapter.Adapter(
                sess, service_type='compute', interface='public',
                default_microversion=COMPUTE_VERSION)
            placement = adapter.Adapter(
                sess, service_type='placement', interface='public',
                default_microversion='1.28')
            # the package's capacity API, when the cloud runs it
            self.capacity = adapter.Adapter(
                sess, service_type='numa-capacity', interface='public')
        else:
            self.capacity = None
        self.compute, self.placement = compute, placement
        self.image = ENV.get('NSE_LITE_IMAGE_ID')
        self.domain_key = ENV.get('NSE_LITE_DOMAIN_KEY', 'failure_domain')
        self.max_per_az = int(ENV.get('NSE_LITE_MAX_PER_AZ', '-1'))
        self.max_per_host = int(ENV.get('NSE_LITE_MAX_PER_HOST', '-1'))
        self.settle = int(ENV.get('NSE_LITE_RECONCILE_PERIOD', '40'))
        self.servers = {}      # id -> Boot
        self.requests = 0      # boots sent, cleanups or not
        self.deleted = set()   # ids this tool deleted
        self.flavors = []
        self.aggregates = []
        self.groups = {}       # id -> {'strategy', 'max_size'}

    # --- resources ----------------------------------------------------

    def hosts(self):
        """``{host: rp uuid}`` of the compute nodes that are up."""
        hypervisors = self.compute.get(
            '/os-hypervisors/detail').json()['hypervisors']
        return {h['service']['host']: h['id'] for h in hypervisors
                if h['state'] == 'up'}

    def free_ram(self, rp_uuid):
        inventory = self.placement.get(
            '/resource_providers/%s/inventories/MEMORY_MB'
            % rp_uuid).json()
        usage = self.placement.get(
            '/resource_providers/%s/usages' % rp_uuid).json()['usages']
        total = int((inventory['total'] - inventory['reserved']) *
                    inventory['allocation_ratio'])
        return total - usage.get('MEMORY_MB', 0)

    def flavor(self, ram, preemptible=False):
        name = '%sflavor-%s' % (PREFIX, uuid.uuid4().hex[:8])
        flavor = self.compute.post('/flavors', json={'flavor': {
            'name': name, 'ram': ram, 'vcpus': 1, 'disk': 1}}).json()[
                'flavor']
        self.flavors.append(flavor['id'])
        if preemptible:
            self.compute.post('/flavors/%s/os-extra_specs' % flavor['id'],
                              json={'extra_specs': {PREEMPTIBLE_KEY: 'true'}})
        flavor['preemptible'] = preemptible
        return flavor

    def aggregate(self, hosts, zone=None, metadata=None):
        body = {'name': '%sagg-%s' % (PREFIX, uuid.uuid4().hex[:8])}
        if zone:
            body['availability_zone'] = zone
        aggregate = self.compute.post('/os-aggregates', json={
            'aggregate': body}).json()['aggregate']
        self.aggregates.append(aggregate['id'])
        for host in hosts:
            self.compute.post('/os-aggregates/%s/action' % aggregate['id'],
                              json={'add_host': {'host': host}})
        if metadata:
            self.compute.post('/os-aggregates/%s/action' % aggregate['id'],
                              json={'set_metadata': {'metadata': metadata}})
        return aggregate

    def zone(self, hosts):
        name = '%szone-%s' % (PREFIX, uuid.uuid4().hex[:6])
        self.aggregate(hosts, zone=name)
        return name

    def deployment_set(self, strategy, max_size=None):
        group = self.compute.post('/os-server-groups', json={
            'server_group': {
                'name': '%sset-%s' % (PREFIX, uuid.uuid4().hex[:6]),
                'policies': ['anti-affinity']}}).json()['server_group']
        self.groups[group['id']] = {'strategy': strategy,
                                    'max_size': max_size}
        return group['id']

    # --- boots --------------------------------------------------------

    def boot(self, flavor, zone, group=None):
        """POST /servers; the Boot, or None if the API refused it."""
        body = {'server': {
            'name': '%s%s' % (PREFIX, uuid.uuid4().hex[:8]),
            'imageRef': self.image, 'flavorRef': flavor['id'],
            'availability_zone': zone, 'networks': 'none'}}
        if group is not None:
            hints = {'group': group}
            info = self.groups[group]
            # The set's strategy and cap go with its first member; every
            # member repeats them (the filter checks they agree).
            hints['deployment_set_strategy'] = info['strategy']
            if info['max_size'] is not None:
                hints['deployment_set_max_size'] = str(info['max_size'])
            body['os:scheduler_hints'] = hints
        response = self.compute.post('/servers', json=body,
                                     raise_exc=False)
        if response.status_code != 202:
            log('boot refused by the API: %d %s', response.status_code,
                response.text[:200])
            return None
        self.requests += 1
        server_id = response.json()['server']['id']
        boot = Boot(server_id, flavor, group, zone)
        self.servers[server_id] = boot
        return boot

    def boot_many(self, requests):
        """Send ``[(flavor, zone, group)]`` from many client threads."""
        with concurrent.futures.ThreadPoolExecutor(CLIENT_THREADS) as pool:
            boots = list(pool.map(lambda r: self.boot(*r), requests))
        return [b for b in boots if b is not None]

    def list_servers(self):
        servers = self.compute.get('/servers/detail', params={
            'all_tenants': 1, 'limit': 1000}).json()['servers']
        return {s['id']: s for s in servers}

    def wait_final(self, boots, timeout=BOOT_TIMEOUT):
        """Wait until every boot is ACTIVE or ERROR; record the outcome."""
        deadline = time.monotonic() + timeout
        pending = {b.id: b for b in boots}
        while pending and time.monotonic() < deadline:
            servers = self.list_servers()
            for server_id in list(pending):
                server = servers.get(server_id)
                boot = pending[server_id]
                if server is None:
                    boot.status = 'GONE'
                elif server['status'] in ('ACTIVE', 'ERROR'):
                    boot.status = server['status']
                    boot.host = server.get('OS-EXT-SRV-ATTR:host')
                    if boot.status == 'ERROR':
                        boot.fault = (server.get('fault') or {}).get(
                            'message', '')
                else:
                    continue
                boot.ended = time.monotonic()
                del pending[server_id]
            if pending:
                time.sleep(1)
        for boot in pending.values():
            boot.status = 'STUCK'
        return boots

    def delete(self, server_id):
        self.deleted.add(server_id)
        self.compute.delete('/servers/%s' % server_id, raise_exc=False)

    def delete_all(self, wait=True):
        for server_id in list(self.servers):
            if server_id not in self.deleted:
                self.delete(server_id)
        deadline = time.monotonic() + 120
        while wait and time.monotonic() < deadline:
            left = set(self.list_servers()) & set(self.servers)
            if not left:
                break
            time.sleep(1)

    def cleanup(self):
        self.delete_all()
        for aggregate_id in self.aggregates:
            aggregate = self.compute.get(
                '/os-aggregates/%s' % aggregate_id, raise_exc=False)
            if aggregate.status_code != 200:
                continue
            for host in aggregate.json()['aggregate']['hosts']:
                self.compute.post('/os-aggregates/%s/action' % aggregate_id,
                                  json={'remove_host': {'host': host}},
                                  raise_exc=False)
            self.compute.delete('/os-aggregates/%s' % aggregate_id,
                                raise_exc=False)
        for group_id in self.groups:
            self.compute.delete('/os-server-groups/%s' % group_id,
                                raise_exc=False)
        for flavor_id in self.flavors:
            self.compute.delete('/flavors/%s' % flavor_id, raise_exc=False)
        self.servers.clear()
        self.deleted.clear()
        self.aggregates, self.flavors, self.groups = [], [], {}

    # --- invariants ---------------------------------------------------

    def domains(self):
        """``{host: set of failure domains}``: a host alone is its own."""
        domains = collections.defaultdict(set)
        for aggregate in self.compute.get(
                '/os-aggregates').json()['aggregates']:
            value = (aggregate.get('metadata') or {}).get(self.domain_key)
            if value:
                for host in aggregate['hosts']:
                    domains[host].add(value)
        return domains

    def host_zones(self):
        zones = {}
        for aggregate in self.compute.get(
                '/os-aggregates').json()['aggregates']:
            if aggregate.get('availability_zone'):
                for host in aggregate['hosts']:
                    zones[host] = aggregate['availability_zone']
        return zones

    def check(self, label, wait_stray=True):
        """Count each invariant's violations; print and return the total."""
        violations = collections.Counter()
        details = collections.defaultdict(list)
        servers = self.list_servers()

        def violate(name, what):
            violations[name] += 1
            details[name].append(what)

        for boot in self.servers.values():
            if boot.status == 'STUCK':
                violate('final-state', '%s still building' % boot.id)
            elif boot.status == 'ERROR' and not boot.fault:
                violate('final-state', '%s in ERROR without a fault'
                        % boot.id)
            gone = boot.id not in servers and boot.id not in self.deleted
            if gone and not boot.flavor['preemptible']:
                violate('non-preemptible-deleted', boot.id)

        # Deployment sets: the ACTIVE members as the API shows them now.
        domains = self.domains()
        by_set = collections.defaultdict(list)
        for boot in self.servers.values():
            server = servers.get(boot.id)
            if boot.group and server and server['status'] == 'ACTIVE':
                by_set[boot.group].append(
                    server['OS-EXT-SRV-ATTR:host'])
        for group_id, hosts in by_set.items():
            info = self.groups[group_id]
            if info['max_size'] is not None and \
                    len(hosts) > info['max_size']:
                violate('set-cap', '%s: %d > %d' % (
                    group_id, len(hosts), info['max_size']))
            seen = collections.Counter()
            for host in hosts:
                if info['strategy'] == 'domain':
                    for domain in domains.get(host) or {'host:' + host}:
                        seen[domain] += 1
                else:
                    seen[host] += 1
            for where, n in seen.items():
                if n > 1:
                    violate('set-spread', '%s: %d members in %s'
                            % (group_id, n, where))

        # Caps: every preemptible server on a host, whoever made it.
        zones = self.host_zones()
        per_zone, per_host = collections.Counter(), collections.Counter()
        flavor_preemptible = {}
        for server in servers.values():
            host = server.get('OS-EXT-SRV-ATTR:host')
            specs = (server.get('flavor') or {}).get('extra_specs') or {}
            preemptible = str(specs.get(PREEMPTIBLE_KEY, '')).lower() in (
                'true', '1', 'yes')
            flavor_preemptible[server['id']] = preemptible
            if host and preemptible:
                per_host[host] += 1
                per_zone[zones.get(host, 'nova')] += 1
        if self.max_per_az >= 0:
            for zone, n in per_zone.items():
                if n > self.max_per_az:
                    violate('zone-cap', '%s: %d > %d'
                            % (zone, n, self.max_per_az))
        if self.max_per_host >= 0:
            for host, n in per_host.items():
                if n > self.max_per_host:
                    violate('host-cap', '%s: %d > %d'
                            % (host, n, self.max_per_host))

        # Allocations against servers, once a dead scheduler's
        # reservation had the time to be reconciled.
        stray, missing = self.allocation_mismatch(servers)
        deadline = time.monotonic() + (self.settle if wait_stray else 0)
        while stray and time.monotonic() < deadline:
            time.sleep(2)
            servers = self.list_servers()
            stray, missing = self.allocation_mismatch(servers)
        for what in stray:
            violate('stray-allocation', what)
        for what in missing:
            violate('missing-allocation', what)

        for name in ('set-spread', 'set-cap', 'zone-cap', 'host-cap',
                     'non-preemptible-deleted', 'final-state',
                     'stray-allocation', 'missing-allocation'):
            log('%s: invariant %s: %d violation(s)%s', label, name,
                violations[name], ''.join(
                    '\n    %s' % d for d in details[name][:5]))
        return sum(violations.values())

    def allocation_mismatch(self, servers):
        hosts = self.hosts()
        consumers = {}
        for host, rp_uuid in hosts.items():
            allocations = self.placement.get(
                '/resource_providers/%s/allocations' % rp_uuid).json()[
                    'allocations']
            for consumer in allocations:
                consumers.setdefault(consumer, set()).add(host)
        stray = []
        for consumer, on in consumers.items():
            server = servers.get(consumer)
            host = server and server.get('OS-EXT-SRV-ATTR:host')
            # A server being built or deleted holds its claim for a while.
            busy = server and server.get('OS-EXT-STS:task_state')
            if server is None or (host not in on and not busy):
                stray.append('%s on %s (server: %s)' % (
                    consumer, ', '.join(sorted(on)),
                    server and server['status']))
        missing = ['%s on %s' % (s['id'], s['OS-EXT-SRV-ATTR:host'])
                   for s in servers.values()
                   if s['status'] == 'ACTIVE' and
                   s['OS-EXT-SRV-ATTR:host'] in hosts and
                   s['OS-EXT-SRV-ATTR:host'] not in consumers.get(
                       s['id'], ())]
        return stray, missing


class Boot(object):

    def __init__(self, server_id, flavor, group, zone):
        self.id = server_id
        self.flavor = flavor
        self.group = group
        self.zone = zone
        self.started = time.monotonic()
        self.ended = None
        self.status = 'BUILD'
        self.host = None
        self.fault = ''


def rate(label, boots):
    if not boots:
        return
    started = min(b.started for b in boots)
    ended = max(b.ended or time.monotonic() for b in boots)
    seconds = max(ended - started, 0.001)
    log('%s: requests per minute: %.0f (%d requests in %.1f s)', label,
        len(boots) * 60.0 / seconds, len(boots), seconds)


def outcome(boots):
    """``12 ACTIVE, 2 ERROR (2 x No valid host ...)``"""
    counts = collections.Counter(b.status for b in boots)
    faults = collections.Counter(shorten(b.fault, 100) for b in boots
                                 if b.fault)
    text = ', '.join('%d %s' % (n, s) for s, n in sorted(counts.items()))
    if faults:
        text += ' (%s)' % '; '.join('%d x %s' % (n, f) for f, n in
                                    faults.most_common())
    return text


# --- the burst -----------------------------------------------------------

def burst(cloud, args):
    started = time.time()
    hosts = cloud.hosts()
    names = sorted(hosts)
    if len(names) < 3:
        sys.exit('the burst needs 3 computes, the cloud has %d' % len(names))
    zone = cloud.zone(names)
    # Two racks: the first two hosts share one, the third is alone.
    cloud.aggregate(names[:2], metadata={
        cloud.domain_key: '%srack-%s' % (PREFIX, uuid.uuid4().hex[:6])})
    violations = 0

    # 1. 60 members into 6 sets, 10 per set, all at once.
    member = cloud.flavor(ram=64)
    sets = [('host', None), ('host', 2), ('host', 3),
            ('domain', None), ('domain', 1), ('domain', 2)]
    groups = [cloud.deployment_set(s, m) for s, m in sets]
    requests = [(member, zone, g) for g in groups
                for _ in range(args.members_per_set)]
    random.shuffle(requests)
    boots = cloud.wait_final(cloud.boot_many(requests))
    rate('burst sets', boots)
    placed = collections.Counter(b.group for b in boots
                                 if b.status == 'ACTIVE')
    for (strategy, max_size), group in zip(sets, groups):
        room = 3 if strategy == 'host' else 2
        log('burst sets: set %s strategy %s max_size %s: %d placed of %d '
            'possible', group[:8], strategy, max_size, placed[group],
            min(room, max_size or room))
    violations += cloud.check('burst sets')

    # 2. Preemptible boots against the zone cap: each host could hold 6 by
    # memory, the host cap 5, the zone cap 12.
    free = min(cloud.free_ram(hosts[h]) for h in names)
    spot = cloud.flavor(ram=max(64, free // 6), preemptible=True)
    boots = cloud.wait_final(cloud.boot_many(
        [(spot, zone, None)] * args.preemptible))
    rate('burst preemptible', boots)
    log('burst preemptible: %s (zone cap %d, host cap %d: a boot beyond '
        'them ends in ERROR, as expected)', outcome(boots),
        cloud.max_per_az, cloud.max_per_host)
    violations += cloud.check('burst preemptible')

    # 3. Fill what is left with on-demand servers of the same size, then
    # on-demand boots that only eviction can place.
    on_demand = cloud.flavor(ram=spot['ram'])
    fillers = sum(cloud.free_ram(hosts[h]) // spot['ram'] for h in names)
    if fillers:
        boots = cloud.wait_final(cloud.boot_many(
            [(on_demand, zone, None)] * fillers))
        log('burst fill: %s', outcome(boots))
    evicting = cloud.wait_final(cloud.boot_many(
        [(on_demand, zone, None)] * args.on_demand))
    rate('burst eviction', evicting)
    log('burst eviction: %s', outcome(evicting))
    violations += cloud.check('burst eviction')
    rate('burst (all phases)', list(cloud.servers.values()))
    claims, refused = claim_conflicts(started)
    log('burst claims: %d, refused by placement (a conflict between the '
        'schedulers, retried on an alternate): %d (%.1f%%)', claims, refused,
        100.0 * refused / claims if claims else 0.0)
    return violations


# --- fault rounds --------------------------------------------------------

class Faults(object):
    """The control files of the launcher, the proxies and the supervisor."""

    def __init__(self):
        self.dir = ENV['NSE_LITE_FAULTS_DIR']
        self.piddir = ENV['NSE_LITE_PIDDIR']
        self.schedulers = ENV['NSE_LITE_SCHEDULERS'].split()

    def path(self, name):
        return os.path.join(self.dir, name)

    def write(self, name, text):
        tmp = self.path(name + '.tmp')
        with open(tmp, 'w') as f:
            f.write(text)
        os.replace(tmp, self.path(name))

    def remove(self, name):
        try:
            os.remove(self.path(name))
        except FileNotFoundError:
            pass

    def rules(self, proxy, rules):
        self.write('%s-rules.json' % proxy, json.dumps(rules))

    def pid(self, service):
        try:
            with open(os.path.join(self.piddir, service + '.pid')) as f:
                return int(f.read().split()[0])
        except (FileNotFoundError, ValueError, IndexError):
            return None

    def alive(self, service):
        pid = self.pid(service)
        return pid is not None and os.path.exists('/proc/%d' % pid)

    def scheduler_pids(self):
        """``{service: the pids of its processes}``, to name a killed one."""
        trees = {}
        for service in self.schedulers:
            pid = self.pid(service)
            if pid is not None:
                trees[service] = set(process_tree(pid))
        return trees

    def wait_all_up(self, timeout=120):
        """Until the supervisor restarted every scheduler (and logged)."""
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            if all(self.alive(s) for s in self.schedulers) and \
                    not os.path.exists(self.path('restarting')):
                return True
            time.sleep(1)
        return False


def eviction_flavor(cloud, hosts):
    """Preemptible servers four of which fill the emptiest host."""
    size = min(cloud.free_ram(rp) for rp in hosts.values()) // 4
    return cloud.flavor(ram=size, preemptible=True)


def wait_deleted(cloud, timeout=120):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        if not set(cloud.list_servers()) & cloud.deleted:
            return
        time.sleep(1)


def top_up(cloud, hosts, spot, zone):
    """Fill every host with preemptible servers (the zone cap is 12)."""
    count = sum(cloud.free_ram(rp) // spot['ram'] for rp in hosts.values())
    if count:
        return cloud.wait_final(cloud.boot_many([(spot, zone, None)] *
                                                count))
    return []


#: why an eviction round's on-demand boot ends in ERROR
EXPECTED_FAILURE = {
    'kill-reserved': 'its scheduler was killed, the call times out',
    'kill-between': 'its scheduler was killed, the call times out',
    'kill-gone': 'its scheduler was killed, the call times out',
    'placement-500': 'placement refused the reservation',
    'placement-409': 'placement refused the reservation twice',
    'compute-fail': 'the Compute API failed the eviction',
}


def killed_line(name, killed, schedulers):
    """``scheduler S (pid P) killed at POINT (expected: fault round N)``.

    ``killed`` is the launcher's ``POINT PID VICTIM`` record; the round's
    own SIGKILL is no failure, and the log says so in its own words (run.sh
    keeps bash from reporting the job as "Killed").
    """
    fields = killed.split()
    point = fields[0] if fields else '?'
    pid = int(fields[1]) if len(fields) > 1 and fields[1].isdigit() else None
    service = next((s for s, pids in sorted(schedulers.items())
                    if pid in pids), None)
    return 'round %s: scheduler %s (pid %s) killed at %s (expected: fault ' \
        'round %s)' % (name, service or '?', pid or '?', point, name)


def round_eviction(cloud, faults, name, hosts, zone, spot):
    """An on-demand boot that must evict two, under one fault."""
    # The cloud holds preemptible servers only: the last rounds' other
    # boots (placed or not) go, and preemptible ones fill what is free.
    for boot in list(cloud.servers.values()):
        if boot.id not in cloud.deleted and (
                boot.flavor is not spot or boot.status != 'ACTIVE'):
            cloud.delete(boot.id)
    wait_deleted(cloud)
    top_up(cloud, hosts, spot, zone)
    # A cap may refuse a refill early (coordination doc): on-demand
    # servers of the same size take the room left, so that the boot below
    # still needs two victims on one host.
    double = cloud.flavor(ram=spot['ram'] * 2)
    filler = cloud.flavor(ram=spot['ram'])
    left = sum(cloud.free_ram(rp) // spot['ram'] for rp in hosts.values())
    if left:
        log('round %s: %d on-demand server(s) fill the room the caps left',
            name, left)
        cloud.wait_final(cloud.boot_many([(filler, zone, None)] * left))
    kill = {'kill-reserved': 'reserved', 'kill-between': 'evicted',
            'kill-gone': 'gone'}.get(name)
    faults.remove('killed')
    if kill:
        faults.write('kill-at', kill)
    elif name == 'placement-500':
        faults.rules('placement', [{'method': 'POST', 'path': '/allocations',
                                    'status': 500, 'count': 1}])
    elif name == 'placement-409':
        faults.rules('placement', [{'method': 'POST', 'path': '/allocations',
                                    'status': 409, 'count': 2}])
    elif name == 'compute-fail':
        faults.rules('compute', [{'method': 'DELETE',
                                  'path_prefix': '/v2.1/servers/',
                                  'status': 500, 'count': 1}])
    # Taken before the kill: a dead process is no longer in /proc.
    schedulers = faults.scheduler_pids() if kill else {}
    # The preemptible servers there now (earlier rounds evicted some).
    present = cloud.list_servers()
    before = {b.id for b in cloud.servers.values() if b.flavor is spot and
              present.get(b.id, {}).get('status') == 'ACTIVE'}
    [boot] = cloud.wait_final(cloud.boot_many([(double, zone, None)]))
    fired = not os.path.exists(faults.path('kill-at'))
    killed = ''
    if os.path.exists(faults.path('killed')):
        with open(faults.path('killed')) as f:
            killed = f.read().strip()
    faults.remove('kill-at')
    faults.rules('placement', [])
    faults.rules('compute', [])
    now = cloud.list_servers()
    evicted = sorted(before - set(now))
    for victim in evicted:
        cloud.servers[victim].status = 'EVICTED'
    if killed:
        log(killed_line(name, killed, schedulers))
    # Every eviction round makes the boot fail (see below).
    log('round %s: on-demand boot %s %s; victims evicted: %d of %d; '
        'killed: %s', name, boot.id[:8],
        as_expected(boot, 'ERROR', EXPECTED_FAILURE[name]),
        len(evicted), len(before),
        'a scheduler, as above' if killed else (
            '-' if not kill else 'NOTHING (the point was not reached)'))
    failed = 0
    if kill and not (fired and killed):
        log('round %s: the kill point was never reached', name)
        failed += 1
    # The request fails either way: a dead scheduler never answers (the
    # conductor's call times out), a refused reservation or eviction ends
    # in NoValidHost. How many victims are gone says where it stopped.
    expected_evicted = {'kill-between': {1},
                        'kill-gone': {2}}.get(name, {0})
    if boot.status != 'ERROR':
        log('round %s: the on-demand boot ended %s, not ERROR', name,
            boot.status)
        failed += 1
    elif not kill and 'No valid host' not in boot.fault:
        log('round %s: the on-demand boot failed with %r, not NoValidHost',
            name, boot.fault)
        failed += 1
    if len(evicted) not in expected_evicted:
        log('round %s: %d victim(s) evicted, not %s', name, len(evicted),
            ' or '.join(map(str, sorted(expected_evicted))))
        failed += 1
    if kill:
        faults.wait_all_up()
    return failed + cloud.check('round %s' % name)


def round_rabbit(cloud, faults, hosts, zone):
    service = faults.schedulers[-1]
    pid = faults.pid(service)
    ports = local_ports(pid)
    closed = 0
    listing = subprocess.run(
        ['rabbitmqctl', '-q', 'list_connections', 'pid', 'peer_port'],
        capture_output=True, text=True, timeout=60)
    for line in listing.stdout.splitlines():
        fields = line.split()
        if len(fields) == 2 and fields[1].isdigit() and \
                int(fields[1]) in ports:
            subprocess.run(['rabbitmqctl', '-q', 'close_connection',
                            fields[0], 'devstack-lite fault round'],
                           capture_output=True, timeout=60)
            closed += 1
    small = cloud.flavor(ram=64)
    boots = cloud.wait_final(cloud.boot_many([(small, zone, None)] * 9))
    log('round rabbit-drop: %d connection(s) of %s (pid %s) closed; then '
        '9 boots: %s', closed, service, pid, outcome(boots))
    failed = 0 if closed else 1
    if not closed:
        log('round rabbit-drop: no connection of %s found in rabbitmqctl'
            % service)
    if listing.returncode:
        log('round rabbit-drop: rabbitmqctl failed: %s'
            % listing.stderr.strip())
    return failed + cloud.check('round rabbit-drop')


def process_tree(pid):
    """``pid`` and its descendants (a service's master and workers)."""
    children = collections.defaultdict(list)
    for entry in os.listdir('/proc'):
        if not entry.isdigit():
            continue
        try:
            with open('/proc/%s/stat' % entry) as f:
                ppid = int(f.read().rsplit(')', 1)[1].split()[1])
        except (OSError, IndexError, ValueError):
            continue
        children[ppid].append(int(entry))
    tree, todo = [], [pid]
    while todo:
        current = todo.pop()
        tree.append(current)
        todo.extend(children[current])
    return tree


def local_ports(pid):
    """The local TCP ports of the sockets of ``pid`` and its children."""
    inodes = set()
    for process in process_tree(pid):
        try:
            fds = os.listdir('/proc/%d/fd' % process)
        except OSError:
            continue
        for fd in fds:
            try:
                target = os.readlink('/proc/%d/fd/%s' % (process, fd))
            except OSError:
                continue
            match = re.match(r'socket:\[(\d+)\]', target)
            if match:
                inodes.add(match.group(1))
    ports = set()
    for table in ('/proc/net/tcp', '/proc/net/tcp6'):
        try:
            with open(table) as f:
                next(f)
                for line in f:
                    fields = line.split()
                    if fields[9] in inodes:
                        ports.add(int(fields[1].rsplit(':', 1)[1], 16))
        except FileNotFoundError:
            continue
    return ports


def round_redis(cloud, faults, hosts, zone):
    import redis

    port = int(ENV['NSE_LITE_REDIS_PORT'])
    small = cloud.flavor(ram=64)
    spot = cloud.flavor(ram=64, preemptible=True)
    group = cloud.deployment_set('host')
    faults.write('hold-nse-redis', '')
    try:
        redis.Redis(host='127.0.0.1', port=port).shutdown(nosave=True)
    except redis.exceptions.ConnectionError:
        pass  # it closes the connection as it goes
    while faults.alive('nse-redis'):
        time.sleep(0.2)
    down = cloud.wait_final(cloud.boot_many(
        [(small, zone, None), (small, zone, group), (spot, zone, None)]))
    plain, member, capped = down
    log('round redis-stop: redis down: plain boot %s; set member %s; '
        'capped preemptible %s', as_expected(plain, 'ACTIVE'),
        as_expected(member, 'ERROR', 'its set lock is on redis'),
        as_expected(capped, 'ERROR', 'its cap is counted on redis'))
    faults.remove('hold-nse-redis')
    faults.wait_all_up()
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline and not faults.alive('nse-redis'):
        time.sleep(0.5)
    time.sleep(3)
    [after] = cloud.wait_final(cloud.boot_many([(small, zone, group)]))
    log('round redis-stop: redis up again: set member %s',
        as_expected(after, 'ACTIVE'))
    failed = 0
    expected = (('plain boot while redis is down', plain, 'ACTIVE'),
                ('set member while redis is down', member, 'ERROR'),
                ('capped preemptible while redis is down', capped, 'ERROR'),
                ('set member once redis is back', after, 'ACTIVE'))
    for what, boot, status in expected:
        if boot.status != status:
            log('round redis-stop: %s ended %s, not %s', what, boot.status,
                status)
            failed += 1
    return failed + cloud.check('round redis-stop')


EVICTION_ROUNDS = ('kill-reserved', 'kill-between', 'kill-gone',
                   'placement-500', 'placement-409', 'compute-fail')
ROUNDS = EVICTION_ROUNDS + ('rabbit-drop', 'redis-stop')


def run_round(cloud, faults, name, hosts, setup):
    """One round in the zone of every host (a host has one zone only)."""
    if 'zone' not in setup:
        setup['zone'] = cloud.zone(sorted(hosts))
        setup['spot'] = eviction_flavor(cloud, hosts)
    if name in EVICTION_ROUNDS:
        return round_eviction(cloud, faults, name, hosts, setup['zone'],
                              setup['spot'])
    # The other rounds want room: the preemptible servers go.
    cloud.delete_all()
    if name == 'rabbit-drop':
        return round_rabbit(cloud, faults, hosts, setup['zone'])
    return round_redis(cloud, faults, hosts, setup['zone'])


def faults_command(cloud, args):
    faults = Faults()
    hosts = cloud.hosts()
    violations = 0
    setup = {}
    started = time.monotonic()
    for name in args.rounds or ROUNDS:
        violations += run_round(cloud, faults, name, hosts, setup)
    log('fault rounds: %d in %.0f s', len(args.rounds or ROUNDS),
        time.monotonic() - started)
    return violations


def soak(cloud, args):
    """Random rounds (and plain bursts between them) until N requests."""
    rng = random.Random(args.seed)
    faults = Faults()
    hosts = cloud.hosts()
    violations = 0
    rounds = collections.Counter()
    started = time.monotonic()
    setup = {}
    small = cloud.flavor(ram=64)
    boots = []
    while cloud.requests < args.requests:
        name = rng.choice(ROUNDS)
        rounds[name] += 1
        violations += run_round(cloud, faults, name, hosts, setup)
        # Between rounds, a plain burst on the whole cloud, then its
        # servers go (the cloud would fill up).
        burst_boots = cloud.wait_final(cloud.boot_many(
            [(small, setup['zone'], None)] * args.burst))
        boots += burst_boots
        violations += cloud.check('soak burst', wait_stray=False)
        for boot in burst_boots:
            cloud.delete(boot.id)
        log('soak: %d requests so far, %d violation(s)', cloud.requests,
            violations)
    rate('soak plain bursts', boots)
    log('soak: rounds %s; %d requests in %.0f s; %d violation(s)',
        ', '.join('%s x%d' % kv for kv in sorted(rounds.items())),
        cloud.requests, time.monotonic() - started, violations)
    return violations


# --- staleness of the kept provider state ----------------------------------

#: a scheduler log line of the kept state's poll (kept_candidates.py)
KEPT_LINE = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) .*Kept provider state: '
    r'added (?P<added>[^;]*); read again (?P<changed>[^;]*); removed ')
#: seconds a change may take to reach every scheduler's kept state
STALENESS_TIMEOUT = 60


def _log_time(stamp):
    return time.mktime(time.strptime(stamp[:19], '%Y-%m-%d %H:%M:%S')) + \
        int(stamp[20:23]) / 1000.0


def _reads(lines, pattern, fields):
    """``[(time, uuid)]`` of the UUIDs in ``fields`` of matching lines."""
    reads = []
    for line in lines:
        match = pattern.match(line)
        if not match:
            continue
        at = _log_time(match.group(1))
        for field in fields:
            for uuid_ in match.group(field).split(', '):
                if uuid_ and uuid_ != 'none':
                    reads.append((at, uuid_.strip()))
    return reads


#: a scheduler log line of a claim counted in its kept state, its own or
#: another scheduler's cast (kept_candidates.py): the claim is in the
#: state from then on, written to placement before it
COUNTED_LINE = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) .*Kept provider state: '
    r'counted a claim of (?:this|another) scheduler on (?P<counted>[^.]*)\.')


def kept_reads(lines):
    """``[(time, provider uuid)]`` of the kept state's reads in ``lines``.

    A claim counted is a read tagged ``counted``: ``(time, uuid,
    'counted')`` (see :func:`seen_after`).
    """
    return _reads(lines, KEPT_LINE, ('added', 'changed')) + [
        read + ('counted',)
        for read in _reads(lines, COUNTED_LINE, ('counted',))]


#: a capacity API log line of its kept state's poll (capacity/kept.py)
CAPACITY_LINE = re.compile(
    r'^(\d{4}-\d\d-\d\d \d\d:\d\d:\d\d\.\d{3}) .*Kept capacity state: '
    r'compute nodes read again (?P<nodes>[^;]*); providers read again '
    r'(?P<providers>[^.]*)\.')


def capacity_reads(lines):
    """``[(time, uuid)]`` of the capacity API's kept state's reads.

    A compute node's UUID is its provider's: either read counts.
    """
    return _reads(lines, CAPACITY_LINE, ('nodes', 'providers'))


def seen_after(reads, provider, since, written_after=None):
    """Seconds from ``since`` to the first read of ``provider``, or None.

    ``since`` is when the change was seen in placement; a change seen by
    polling placement was written between ``written_after`` (the poll
    before) and ``since``.  A read by a poll counts from ``since`` (one
    before it may have come before the write); a claim counted
    (tagged ``counted``) comes after the claim's write by definition, so
    it counts from ``written_after``: a scheduler that counted the claim
    before the measure saw it in placement was 0 s stale.
    """
    times = []
    for read in reads:
        at, uuid_ = read[0], read[1]
        if uuid_ != provider:
            continue
        start = since
        if len(read) > 2 and written_after is not None:
            start = written_after
        if at >= start:
            times.append(at)
    return max(0.0, min(times) - since) if times else None


def scheduler_logs():
    logdir = ENV['NSE_LITE_LOGDIR']
    return {name: os.path.join(logdir, '%s.log' % name)
            for name in ENV['NSE_LITE_SCHEDULERS'].split()}


#: the capacity API's log name (run.sh), read when it keeps state
CAPACITY_API = 'nse-capacity-api'


def kept_state_readers():
    """``{name: (log path, parser)}`` of every kept state to measure.

    Each scheduler's (kept candidates), and the capacity API's when its
    log says it counts from kept state.
    """
    readers = {name: (path, kept_reads)
               for name, path in scheduler_logs().items()}
    path = os.path.join(ENV['NSE_LITE_LOGDIR'], CAPACITY_API + '.log')
    if os.path.exists(path) and any(
            'Capacity: counted from state kept' in line
            for line in _read_lines(path)):
        readers[CAPACITY_API] = (path, capacity_reads)
    return readers


def _start_kept_capacity(cloud):
    """The capacity API starts its poller at its first request."""
    if cloud.capacity is None:
        return
    try:
        cloud.capacity.get('/v1/capacity', raise_exc=False)
    except Exception as exc:  # a cloud without the capacity API
        log('staleness: the capacity API does not answer (%s)', exc)


def _read_lines(path):
    with open(path, errors='replace') as f:
        return f.readlines()


def _wait_allocation(cloud, server_id, present, timeout=BOOT_TIMEOUT):
    """When the server's allocations were (or were not) seen, or None.

    :returns: ``(since, written_after)``: the time they were first seen
        so, and the time of the look before (they changed in between)
    """
    deadline = time.monotonic() + timeout
    looked = time.time()
    while time.monotonic() < deadline:
        body = cloud.placement.get('/allocations/%s' % server_id).json()
        if bool(body.get('allocations')) == present:
            return time.time(), looked
        looked = time.time()
        time.sleep(0.05)
    return None, None


def staleness(cloud, args):
    """Time from a change in placement to every scheduler's kept state.

    The changes, ``--changes`` of each on the hosts in turn: another
    consumer's claim on a compute node (``PUT /allocations``), an
    inventory change (``reserved`` of MEMORY_MB, as a compute reports
    it), a boot through the Compute API (measured from when its
    allocation is in placement) and its deletion (from when its
    allocation is gone: placement's generation does not move, the
    compute's word to the schedulers brings it).  For each, the time to
    the first line of each scheduler's log where its kept state read the
    provider again, and of the capacity API's log where its kept state
    (``[nova_sched_ext_capacity] kept_state``) read the compute node or
    its provider: from then on the capacity API answers with the change.
    A change one of them never reads within STALENESS_TIMEOUT s is a
    violation (kept-state-stale).
    """
    hosts = cloud.hosts()
    names = sorted(hosts)
    _start_kept_capacity(cloud)
    time.sleep(2)
    readers = kept_state_readers()
    flavor = cloud.flavor(64)
    zones = {name: cloud.zone([name]) for name in names}
    changes = []                       # (kind, provider, since)
    for number in range(args.changes):
        host = names[number % len(names)]
        provider = hosts[host]
        consumer = str(uuid.uuid4())
        since = time.time()
        cloud.placement.put('/allocations/%s' % consumer, json={
            'allocations': {provider: {'resources': {'MEMORY_MB': 64}}},
            'project_id': 'nse-staleness', 'user_id': 'nse-staleness',
            'consumer_generation': None}, microversion='1.28')
        changes.append(('claim', provider, since, None))
        time.sleep(1)
        cloud.placement.delete('/allocations/%s' % consumer)
        inventory = cloud.placement.get(
            '/resource_providers/%s/inventories/MEMORY_MB' % provider).json()
        reserved = inventory['reserved']
        for value in (reserved + 1, reserved):
            since = time.time()
            body = dict(inventory, reserved=value)
            body['resource_provider_generation'] = cloud.placement.get(
                '/resource_providers/%s' % provider).json()['generation']
            response = cloud.placement.put(
                '/resource_providers/%s/inventories/MEMORY_MB' % provider,
                json=body, raise_exc=False)
            if response.status_code == 200:
                changes.append(('inventory', provider, since, None))
            else:
                # the compute reported meanwhile (a generation conflict)
                log('staleness: inventory change on %s refused (%d); '
                    'not counted', provider, response.status_code)
            time.sleep(1)
        boot = cloud.boot(flavor, zones[host])
        if boot is None:
            continue
        since, written_after = _wait_allocation(cloud, boot.id, True)
        cloud.wait_final([boot])
        if since is not None:
            changes.append(('boot', provider, since, written_after))
        time.sleep(1)
        cloud.delete(boot.id)
        since, _written = _wait_allocation(cloud, boot.id, False,
                                           timeout=120)
        if since is not None:
            # a free: the computes' word marks it, a poll reads it
            changes.append(('delete', provider, since, None))
        time.sleep(1)
    deadline = time.time() + STALENESS_TIMEOUT
    observed = collections.defaultdict(list)   # kind -> seconds
    missing = []
    while True:
        reads = {name: parse(_read_lines(path))
                 for name, (path, parse) in readers.items()}
        observed.clear()
        missing = []
        for kind, provider, since, written_after in changes:
            for name, kept_state_reads in sorted(reads.items()):
                seconds = seen_after(kept_state_reads, provider, since,
                                     written_after)
                if seconds is None:
                    missing.append((kind, provider, name))
                else:
                    who = ('capacity API' if name == CAPACITY_API
                           else 'schedulers')
                    observed[who, kind].append(seconds)
        if not missing or time.time() > deadline:
            break
        time.sleep(1)
    schedulers = len([name for name in readers if name != CAPACITY_API])
    for who, count in (('schedulers', schedulers),
                       ('capacity API', len(readers) - schedulers)):
        for kind in ('claim', 'inventory', 'boot', 'delete'):
            values = sorted(observed[who, kind])
            if values:
                log('staleness %s%s: p50 %.0f ms, max %.0f ms (%d '
                    'observations: %d changes x %d %s)', kind,
                    ' (capacity API)' if who == 'capacity API' else '',
                    values[len(values) // 2] * 1e3, values[-1] * 1e3,
                    len(values), len(values) // max(count, 1), count,
                    'schedulers' if who == 'schedulers' else 'API')
    for kind, provider, name in missing:
        log('invariant kept-state-stale: %s on %s never read by %s within '
            '%d s', kind, provider, name, STALENESS_TIMEOUT)
    log('invariant kept-state-stale: %d violation(s)', len(missing))
    return len(missing)


def claim_conflicts(since=0.0):
    """``(claims, refused)`` in the schedulers' logs after ``since``."""
    claims = refused = 0
    for path in scheduler_logs().values():
        for line in _read_lines(path):
            if len(line) < 23 or not line[:4].isdigit():
                continue
            try:
                at = _log_time(line[:23])
            except ValueError:
                continue
            if at < since:
                continue
            if 'Attempting to claim resources in the placement API' in line:
                claims += 1
            elif 'Unable to submit allocation for instance' in line:
                refused += 1
    return claims, refused


def main(argv=None):
    parser = argparse.ArgumentParser(description=__doc__.split('\n\n')[0])
    sub = parser.add_subparsers(dest='command', required=True)
    b = sub.add_parser('burst')
    b.add_argument('--members-per-set', type=int, default=10)
    b.add_argument('--preemptible', type=int, default=30)
    b.add_argument('--on-demand', type=int, default=6)
    f = sub.add_parser('faults')
    f.add_argument('rounds', nargs='*', metavar='ROUND',
                   help='of: %s (default: all)' % ', '.join(ROUNDS))
    s = sub.add_parser('soak')
    s.add_argument('--requests', type=int, default=300)
    s.add_argument('--burst', type=int, default=12,
                   help='plain boots between two rounds')
    s.add_argument('--seed', type=int, default=13)
    st = sub.add_parser('staleness')
    st.add_argument('--changes', type=int, default=3,
                    help='changes of each kind (default 3)')
    args = parser.parse_args(argv)
    unknown = set(getattr(args, 'rounds', ())) - set(ROUNDS)
    if unknown:
        parser.error('unknown round(s) %s; the rounds are %s'
                     % (', '.join(sorted(unknown)), ', '.join(ROUNDS)))
    cloud = Cloud()
    command = {'burst': burst, 'faults': faults_command, 'soak': soak,
               'staleness': staleness}
    try:
        violations = command[args.command](cloud, args)
    finally:
        cloud.cleanup()
    log('%s: %d violation(s) in all', args.command, violations)
    return 1 if violations else 0


if __name__ == '__main__':
    sys.exit(main())

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

"""Traces for the simulator: the Huawei CSV files and synthetic ones.

A trace is a list of :class:`TraceHost` (the free capacity of each server,
per NUMA cell, and its rack) and a list of :class:`Request` in arrival
order.  The CSV trace (``../shared/data/huawei-topo-vm/``, from the public
repository ``mdl1104/Dataset-for-topology-aware-VM-placement``) has no
timestamps and no departures: its requests arrive one after another and
stay.  :func:`synthetic_requests` adds Poisson arrivals and exponential
lifetimes, so that departures free resources again.

Nothing here imports Nova: a trace is plain data.

A trace file is checked as it is read, and any fault in it is a
:class:`TraceError` naming the file, the line and the column: a header
without a needed column, a row with fewer or more fields than the header,
bytes that are not UTF-8 (a UTF-8 byte-order mark is skipped), a field
longer than the ``csv`` module reads (131,072 characters), a number that
is not one (ASCII digits only: ``int()`` would read ``1_0`` as 10, and
digits of other scripts), and a size beyond the bounds below, which keep
the simulator's cost reasonable (it builds one CPU set member and one
sibling set per vCPU, as Nova's objects have them).
"""

import csv
import dataclasses
import os
import random
import re

from nova_sched_ext import exception as sched_ext_exception

NONE = 'none'
AFFINITY = 'affinity'
ANTI_AFFINITY = 'anti-affinity'
FAULT_DOMAIN = 'fault_domain'
STRATEGIES = (NONE, AFFINITY, ANTI_AFFINITY, FAULT_DOMAIN)

HOSTS_COLUMNS = ('host_id', 'rack_id', 'numa0_vcpus', 'numa0_ram_gb',
                 'numa1_vcpus', 'numa1_ram_gb')
REQUESTS_COLUMNS = ('seq', 'flavor_vcpus', 'flavor_ram', 'numa', 'strategy',
                    'group', 'domain')

DATA_DIR_NAME = os.path.join('shared', 'data', 'huawei-topo-vm')

# What a trace may declare.  Far above any server (the trace's largest cell
# has 170 vCPUs and 404 GB; a two-socket server today has at most 384
# threads per socket), yet bounded: a replay's cost grows with each host's
# vCPUs (one CPU object per vCPU, one slot-counting step per instance that
# fits), and a host with ten million vCPUs ran for hours.  At these bounds
# one host costs some 30 seconds at worst (slots of a 2-vCPU flavor).
#: vCPUs of one host NUMA cell
MAX_CELL_VCPUS = 1024
#: memory of one host NUMA cell, GB (16 TiB)
MAX_CELL_RAM_GB = 16 * 1024
#: NUMA cells of a host: the hosts file has columns for two
MAX_HOST_CELLS = 2
#: a flavor can be no larger than a whole host
MAX_FLAVOR_VCPUS = MAX_HOST_CELLS * MAX_CELL_VCPUS
MAX_FLAVOR_RAM_GB = MAX_HOST_CELLS * MAX_CELL_RAM_GB
#: ``seq`` and ``domain``: what Nova's 32-bit integer columns hold
MAX_INTEGER = 2 ** 31 - 1
#: characters of a value that a message shows
MAX_SHOWN = 64

# fullmatch, and [0-9] rather than \d, which matches every script's digits
# (a sign, so that a negative value is told it is below the minimum)
_INTEGER = re.compile(r'-?[0-9]+', re.ASCII)
_DECIMAL = re.compile(r'-?([0-9]+\.?[0-9]*|\.[0-9]+)([eE][-+]?[0-9]+)?',
                      re.ASCII)


class TraceError(ValueError, sched_ext_exception.NovaSchedExtError):
    """A trace file that cannot be read; the message says where and why."""


@dataclasses.dataclass(frozen=True)
class TraceHost:
    """A server: its free capacity per NUMA cell and its failure domain."""

    name: str
    rack: str
    # ((vcpus, memory_mb), ...), one pair per NUMA cell, cell 0 first
    cells: tuple

    @property
    def vcpus(self):
        return sum(c[0] for c in self.cells)

    @property
    def memory_mb(self):
        return sum(c[1] for c in self.cells)


@dataclasses.dataclass(frozen=True)
class Flavor:
    """The shape of a request: what Nova's flavor says about it."""

    vcpus: int
    memory_mb: int
    numa_nodes: int
    # extra specs beyond hw:numa_nodes, as sorted (key, value) pairs
    extra_specs: tuple = ()

    @property
    def name(self):
        base = '%dc%dg-%dn' % (self.vcpus, self.memory_mb // 1024,
                               self.numa_nodes)
        if self.extra_specs:
            base += '+' + ','.join('%s=%s' % kv for kv in self.extra_specs)
        return base

    def sort_key(self):
        """Larger flavors first: vCPUs, then RAM, then NUMA nodes."""
        return (-self.vcpus, -self.memory_mb, -self.numa_nodes,
                self.extra_specs)


@dataclasses.dataclass(frozen=True)
class Request:
    """One VM creation (and, if it has a lifetime, its later deletion)."""

    seq: int
    flavor: Flavor
    strategy: str = NONE
    group: str = ''
    domain: int = None
    arrival: float = 0.0
    # None: the VM stays until the end of the replay
    lifetime: float = None

    @property
    def group_key(self):
        """Groups are numbered per strategy in the trace."""
        if self.strategy == NONE:
            return None
        return (self.strategy, self.group)


def default_data_dir(start=None):
    """``../shared/data/huawei-topo-vm`` next to the repository, if any.

    Looked up from the current directory and from this file upwards, so the
    default works from the repository root and from an installed tree
    inside the project directory alike.
    """
    starts = [start or os.getcwd(), os.path.dirname(os.path.abspath(__file__))]
    for begin in starts:
        path = os.path.abspath(begin)
        while True:
            candidate = os.path.join(path, DATA_DIR_NAME)
            if os.path.isfile(os.path.join(candidate, 'hosts.csv')):
                return candidate
            parent = os.path.dirname(path)
            if parent == path:
                break
            path = parent
    return None


def _shown(text, quote=True):
    """``text`` quoted, and cut after :data:`MAX_SHOWN` characters.

    A field can be 131,072 characters long; an error is one line.
    """
    if len(text) <= MAX_SHOWN:
        return repr(text) if quote else text
    head = text[:MAX_SHOWN]
    return '%s... (%d characters)' % (repr(head) if quote else head,
                                      len(text))


def _first_bad_line(path):
    """``(line, byte)`` of the first line of ``path`` that is not UTF-8.

    Why re-read: the decoder works on blocks of the file, so the error it
    raises does not tell the line.  Only ever called on a failing file.
    """
    with open(path, 'rb') as handle:
        for number, raw in enumerate(handle, 1):
            try:
                raw.decode('utf-8')
            except UnicodeDecodeError as exc:
                return number, raw[exc.start]
    return None, None


def _rows(path, columns):
    try:
        # utf-8-sig: a byte-order mark (spreadsheet exports write one)
        # would otherwise become part of the first column's name.
        handle = open(path, newline='', encoding='utf-8-sig')
    except OSError as exc:
        raise TraceError('cannot open trace file %s: %s' % (path, exc))
    reader = csv.reader(handle)
    with handle:
        try:
            header = tuple(next(reader, ()))
            missing = [c for c in columns if c not in header]
            if missing:
                raise TraceError(
                    '%s: missing column(s) %s; expected a header with %s, '
                    'found %s' % (path, ', '.join(missing),
                                  ','.join(columns),
                                  _shown(','.join(header), quote=False)
                                  if header else 'no header'))
            for fields in reader:
                if not fields:
                    continue    # a blank line
                line = reader.line_num
                if len(fields) != len(header):
                    absent = header[len(fields):]
                    raise TraceError(
                        '%s line %d: the row has %d field%s, the header %d%s'
                        % (path, line, len(fields),
                           '' if len(fields) == 1 else 's', len(header),
                           ' (no value for %s)' % _shown(', '.join(absent),
                                                         quote=False)
                           if absent else ''))
                yield line, dict(zip(header, fields))
        except UnicodeDecodeError as exc:
            line, byte = _first_bad_line(path)
            if line is None:
                # Cannot happen for a file that stayed the same.
                line, byte = reader.line_num + 1, exc.object[exc.start]
            raise TraceError('%s line %d: not UTF-8 text (byte 0x%02x); '
                             'save the file as UTF-8' % (path, line, byte))
        except csv.Error as exc:
            if 'field larger than field limit' in str(exc):
                raise TraceError(
                    '%s line %d: a field is longer than %d characters'
                    % (path, reader.line_num, csv.field_size_limit()))
            raise TraceError('%s line %d: %s' % (path, reader.line_num, exc))


def _number(path, line, row, column, kind=int, minimum=0,
            maximum=MAX_INTEGER):
    text = row[column].strip()
    pattern = _INTEGER if kind is int else _DECIMAL
    # An ASCII number of at most MAX_SHOWN characters: a longer one is no
    # plain count, and int() refuses more than 4,300 digits anyway.
    if len(text) > MAX_SHOWN or not pattern.fullmatch(text):
        raise TraceError('%s line %d: column %s is %s, expected a number '
                         '(ASCII digits)' % (path, line, column,
                                             _shown(text)))
    value = kind(text)
    if value < minimum:
        raise TraceError('%s line %d: column %s is %s, expected a number '
                         '>= %s' % (path, line, column, text, minimum))
    if value > maximum:
        raise TraceError('%s line %d: column %s is %s, at most %s is '
                         'allowed' % (path, line, column, text, maximum))
    return value


def _gb_to_mb(gb):
    return int(round(gb * 1024))


def read_hosts(path):
    """Read ``hosts.csv``: a list of :class:`TraceHost`.

    A cell with neither vCPUs nor RAM does not exist (single-cell hosts
    list ``0,0`` for cell 1).  A cell has at most :data:`MAX_CELL_VCPUS`
    vCPUs and :data:`MAX_CELL_RAM_GB` GB.

    :raises TraceError: naming the file, line and column at fault.
    """
    hosts = []
    seen = set()
    for line, row in _rows(path, HOSTS_COLUMNS):
        name = row['host_id'].strip()
        if not name:
            raise TraceError('%s line %d: empty host_id' % (path, line))
        if name in seen:
            raise TraceError('%s line %d: host %s listed twice'
                             % (path, line, _shown(name, quote=False)))
        seen.add(name)
        cells = []
        for cell in range(MAX_HOST_CELLS):
            vcpus = _number(path, line, row, 'numa%d_vcpus' % cell,
                            maximum=MAX_CELL_VCPUS)
            ram = _number(path, line, row, 'numa%d_ram_gb' % cell, float,
                          maximum=MAX_CELL_RAM_GB)
            if vcpus or ram:
                cells.append((vcpus, _gb_to_mb(ram)))
        if not cells:
            raise TraceError('%s line %d: host %s has no NUMA cell with '
                             'free vCPUs or RAM'
                             % (path, line, _shown(name, quote=False)))
        hosts.append(TraceHost(name=name, rack=row['rack_id'].strip(),
                               cells=tuple(cells)))
    if not hosts:
        raise TraceError('%s: no hosts' % path)
    return hosts


def read_requests(path):
    """Read ``requests_C*.csv``: a list of :class:`Request`, by ``seq``.

    A flavor has at most :data:`MAX_FLAVOR_VCPUS` vCPUs and
    :data:`MAX_FLAVOR_RAM_GB` GB (a whole host of the largest cells);
    ``seq`` and ``domain`` are at most :data:`MAX_INTEGER`.

    :raises TraceError: naming the file, line and column at fault.
    """
    requests = []
    for line, row in _rows(path, REQUESTS_COLUMNS):
        numa = _number(path, line, row, 'numa', minimum=1)
        if numa not in (1, 2):
            raise TraceError('%s line %d: numa is %d, expected 1 or 2'
                             % (path, line, numa))
        vcpus = _number(path, line, row, 'flavor_vcpus', minimum=1,
                        maximum=MAX_FLAVOR_VCPUS)
        ram = _number(path, line, row, 'flavor_ram', float,
                      maximum=MAX_FLAVOR_RAM_GB)
        strategy = (row['strategy'] or '').strip() or NONE
        if strategy not in STRATEGIES:
            raise TraceError('%s line %d: unknown strategy %s, expected one '
                             'of %s' % (path, line, _shown(strategy),
                                        ', '.join(STRATEGIES[1:])))
        group = (row['group'] or '').strip()
        if strategy != NONE and not group:
            raise TraceError('%s line %d: strategy %s without a group'
                             % (path, line, strategy))
        domain = None
        if strategy == FAULT_DOMAIN:
            domain = _number(path, line, row, 'domain')
        seq = _number(path, line, row, 'seq')
        requests.append(Request(
            seq=seq, flavor=Flavor(vcpus, _gb_to_mb(ram), numa),
            strategy=strategy, group=group, domain=domain, arrival=seq))
    requests.sort(key=lambda r: r.seq)
    return requests


def largest_flavors(requests, count=3):
    """The ``count`` largest distinct flavors of a trace, largest first."""
    flavors = {r.flavor for r in requests}
    return sorted(flavors, key=Flavor.sort_key)[:count]


# The seed's flavor families: vCPU to RAM (GB) ratios.
FAMILIES = (('compute', 2), ('general', 4), ('memory', 8))
# vCPU sizes and how often they are asked for (small VMs dominate).
SIZES = ((2, 30), (4, 30), (8, 20), (16, 11), (32, 6), (64, 3))
# From this size up a flavor spans two NUMA nodes (half and half).
DUAL_NUMA_FROM = 32
GROUP_STRATEGIES = ((AFFINITY, 1), (ANTI_AFFINITY, 1), (FAULT_DOMAIN, 2))


@dataclasses.dataclass
class SyntheticSpec:
    """What :func:`synthetic_requests` generates."""

    count: int = 5000
    seed: int = 0
    # Poisson arrivals: requests per time unit
    arrival_rate: float = 1.0
    # target share of the hosts' vCPUs in use in the steady state; sets the
    # mean lifetime (Little's law) unless mean_lifetime is given
    load: float = 0.9
    mean_lifetime: float = None
    # share of requests that belong to a server group
    group_share: float = 0.3
    group_size: tuple = (2, 6)
    # share of single-NUMA requests that are DPDK variants
    dpdk_share: float = 0.1
    # largest (vcpus, memory_mb) of a flavor: nothing larger than what a host
    # cell pair could ever take is generated
    max_vcpus: int = None
    max_memory_mb: int = None


def _weighted(rng, pairs):
    total = sum(w for _, w in pairs)
    pick = rng.uniform(0, total)
    for value, weight in pairs:
        pick -= weight
        if pick <= 0:
            return value
    return pairs[-1][0]


def _synthetic_flavor(rng, spec):
    for _ in range(100):
        family, ratio = rng.choice(FAMILIES)
        vcpus = _weighted(rng, SIZES)
        memory_mb = vcpus * ratio * 1024
        if spec.max_vcpus and vcpus > spec.max_vcpus:
            continue
        if spec.max_memory_mb and memory_mb > spec.max_memory_mb:
            continue
        numa = 2 if vcpus >= DUAL_NUMA_FROM else 1
        extra = ()
        if rng.random() < spec.dpdk_share:
            # DPDK variants keep the VM and its NIC on one NUMA node.  The
            # marker's namespace is one Nova's filters skip.
            numa = 1
            extra = (('sim:dpdk', 'true'),)
        return Flavor(vcpus, memory_mb, numa, extra)
    raise TraceError('no synthetic flavor fits max_vcpus=%s, '
                     'max_memory_mb=%s' % (spec.max_vcpus, spec.max_memory_mb))


def _mean_vcpus(spec):
    total = sum(w for _, w in SIZES)
    return sum(v * w for v, w in SIZES) / total


def synthetic_requests(spec, hosts=None):
    """A seeded synthetic trace with arrivals and departures.

    Flavors follow the seed's families (compute 1:2, general 1:4, memory
    1:8 vCPU:GB), single-NUMA below 32 vCPUs and dual-NUMA from 32, with a
    share of DPDK variants, always single-NUMA (marked by a ``sim:dpdk``
    extra spec that Nova's filters ignore, so that they count separately).
    Arrivals are Poisson; lifetimes are exponential with a mean chosen so
    that, by Little's law,
    ``spec.load`` of the hosts' vCPUs are in use in the steady state.
    Server groups arrive as bursts of members of one flavor.
    """
    rng = random.Random(spec.seed)
    mean_lifetime = spec.mean_lifetime
    if mean_lifetime is None:
        capacity = sum(h.vcpus for h in hosts or ()) or 1000
        mean_lifetime = (spec.load * capacity /
                         (spec.arrival_rate * _mean_vcpus(spec)))
    requests = []
    now = 0.0
    group_ids = {s: 0 for s, _ in GROUP_STRATEGIES}
    while len(requests) < spec.count:
        now += rng.expovariate(spec.arrival_rate)
        flavor = _synthetic_flavor(rng, spec)
        if rng.random() < spec.group_share:
            strategy = _weighted(rng, GROUP_STRATEGIES)
            group_ids[strategy] += 1
            size = rng.randint(*spec.group_size)
            for member in range(size):
                if len(requests) >= spec.count:
                    break
                requests.append(Request(
                    seq=len(requests), flavor=flavor, strategy=strategy,
                    group=str(group_ids[strategy]),
                    domain=member % 3 if strategy == FAULT_DOMAIN else None,
                    arrival=now,
                    lifetime=rng.expovariate(1.0 / mean_lifetime)))
        else:
            requests.append(Request(
                seq=len(requests), flavor=flavor, arrival=now,
                lifetime=rng.expovariate(1.0 / mean_lifetime)))
    return requests


def synthetic_hosts(count, seed=0, cells=2, vcpus_per_cell=48,
                    memory_mb_per_cell=192 * 1024, hosts_per_rack=20):
    """Identical empty hosts, ``hosts_per_rack`` to a rack."""
    del seed  # identical hosts: nothing to draw
    return [TraceHost(name='host-%d' % i, rack=str(i // hosts_per_rack),
                      cells=((vcpus_per_cell, memory_mb_per_cell),) * cells)
            for i in range(count)]

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

"""The broker's configuration: a YAML file the deployer writes.

It is read and checked whole by :func:`load` (or :func:`parse` for a
mapping already read); every fault is a :class:`BrokerConfigError` whose
one line names the file, the key (``clusters.east-1.pools[1]``) and the
problem, and nothing is used of a file that has one.  A file over
:data:`MAX_CONFIG_BYTES` is refused unread; one whose aliases expand past
:data:`MAX_CONFIG_VALUES` values or :data:`MAX_CONFIG_DEPTH` levels, or
that repeats a key in a mapping, is refused before anything is built of
it.  The sections (see
``etc/nova-sched-ext-broker.yaml.sample`` and ``doc/source/broker.rst``):

``broker``
    ``chooser`` (an entry point of :data:`CHOOSER_NAMESPACE`, default
    ``most-capacity``), ``conversion`` (the order of the role's
    variants, one of :data:`CONVERSIONS`, default ``priority``),
    ``boot_timeout`` and ``poll_interval`` (seconds),
    ``max_attempts`` (boots tried per request), ``connect_timeout`` and
    ``read_timeout`` (seconds, every call to a cluster's APIs),
    ``survey_workers`` (clusters read at once).
``clusters``
    by cluster name: ``cloud`` (its ``clouds.yaml`` entry, default the
    cluster's name), ``region``, ``datacenter``, optional ``zone`` (the
    availability zone booted into and counted), ``pools``, and optional
    ``connect_timeout`` and ``read_timeout`` of its own.
``flavor_families``
    by base flavor: ``variants``, in priority order, each a ``flavor``
    (its name in every cluster), a ``pool`` and a ``numa`` kind
    (``single`` or ``dual``).  A ``dual`` variant may declare ``uneven``
    splits (see :func:`uneven_variants`): each becomes a variant of kind
    ``uneven`` right after it, a flavor of the same size whose vCPUs and
    RAM ``hw:numa_cpus.N`` / ``hw:numa_mem.N`` spread unevenly over the
    two nodes.
``roles``
    by role name: ``numa`` (the NUMA kinds the role may get, ``uneven``
    included only for a role that may get an uneven split),
    optional ``pools`` (the pools it may get; default all) and
    ``preemptible`` (its instances count against the data center's cap).
    :data:`DEFAULT_ROLES` (the seed's three) apply unless overridden by
    name.
``preemptible_caps``
    by data center: the preemptible instances it may hold at most.
``deployment_sets``
    ``max_size`` (the members of one set across every cluster; default
    none) and ``caps`` (a lower cap by set name).
"""

import dataclasses
import os
import re
import reprlib
import typing

import yaml

from nova_sched_ext import exception as sched_ext_exception

#: the stevedore namespace of the cluster choosers
CHOOSER_NAMESPACE = 'nova_sched_ext.broker_choosers'
DEFAULT_CHOOSER = 'most-capacity'

#: the role's variants in the family's order: the first one a cluster
#: has room for wins (the seed's greedy conversion)
PRIORITY = 'priority'
#: inside each pool (the pools in the family's order), the NUMA kind the
#: clusters have most room for first, the family's order breaking ties
MOST_ROOM = 'most-room'
CONVERSIONS = (PRIORITY, MOST_ROOM)
DEFAULT_CONVERSION = PRIORITY

SINGLE = 'single'
DUAL = 'dual'
#: a dual-NUMA flavor whose two nodes get different shares of its vCPUs
#: and RAM (``hw:numa_cpus.N``, ``hw:numa_mem.N``); never declared as a
#: variant, always derived from a ``dual`` variant's ``uneven`` section
UNEVEN = 'uneven'
NUMA_KINDS = (SINGLE, DUAL, UNEVEN)
#: the kinds a variant may be declared with
DECLARED_KINDS = (SINGLE, DUAL)

#: the default name of an uneven variant's flavor
DEFAULT_UNEVEN_NAME = '{flavor}.u{cpus0}-{cpus1}'
#: the fields an uneven variant's name may use
UNEVEN_NAME_FIELDS = ('flavor', 'cpus0', 'cpus1', 'mem0', 'mem1')
#: the extra specs an uneven variant sets itself
UNEVEN_OWN_SPECS = re.compile(r'hw:numa_(nodes|cpus\.\d+|mem\.\d+)$')
#: extra specs that name CPUs of the guest: their numbers would not
#: follow the split
UNEVEN_REFUSED_SPECS = ('hw:cpu_dedicated_mask', 'hw:cpu_realtime_mask')
#: the most uneven variants one dual variant may have
MAX_UNEVEN_VARIANTS = 64
#: the smallest large page (KiB) an x86 or arm64 host offers:
#: ``hw:mem_page_size: large`` needs each node's RAM a multiple of it
SMALLEST_LARGE_PAGE_KB = 2048

DEFAULT_BOOT_TIMEOUT = 600
DEFAULT_POLL_INTERVAL = 5
DEFAULT_MAX_ATTEMPTS = 4
#: seconds to open a connection to a cluster's API: a cluster that does
#: not take it by then is skipped
DEFAULT_CONNECT_TIMEOUT = 5
#: seconds a cluster's API may stay silent (between two bytes of an
#: answer): a cluster that accepts and never answers is skipped after it
DEFAULT_READ_TIMEOUT = 30
#: clusters read at once by a survey
DEFAULT_SURVEY_WORKERS = 8
#: what a configuration may ask for: a bound keeps a typo from waiting a day
MAX_BOOT_TIMEOUT = 86400
MAX_ATTEMPTS = 100
MAX_API_TIMEOUT = 3600
MAX_SURVEY_WORKERS = 64

#: The seed's three roles.  pay-as-you-go takes every variant in the
#: family's order (the seed's: dpdk single-NUMA, dpdk dual-NUMA, normal
#: single-NUMA, normal dual-NUMA); auto-scaling single-NUMA variants only;
#: preemptible dual-NUMA variants only, counted against the data
#: center's cap.
#: pay-as-you-go and preemptible also take the uneven variants a family
#: declares (after the even split); a role given in the file that lists
#: only ``single`` and ``dual`` never gets them.
DEFAULT_ROLES = {
    'pay-as-you-go': {'numa': [SINGLE, DUAL, UNEVEN]},
    'auto-scaling': {'numa': [SINGLE]},
    'preemptible': {'numa': [DUAL, UNEVEN], 'preemptible': True},
}

#: A broker configuration is a few kilobytes (the sample: 3 KiB; 29
#: clusters and a hundred families: some 30 KiB): a bigger file is a
#: mistake, refused before it is read.
MAX_CONFIG_BYTES = 1 << 20
#: the values (scalars, lists, mappings) a file may hold once its YAML
#: aliases are expanded: a few thousand in practice; an alias bomb is
#: billions
MAX_CONFIG_VALUES = 100000
#: the nesting a file may have, aliases expanded (a configuration needs 7)
MAX_CONFIG_DEPTH = 32

# Names become log lines, table cells and server names: printable, no
# spaces, bounded.
_NAME = re.compile(r'[A-Za-z0-9][A-Za-z0-9._:@-]{0,127}', re.ASCII)


class BrokerConfigError(ValueError, sched_ext_exception.UserFacingError):
    """A configuration that cannot be used; the message says where."""


#: The old name, kept for the callers that catch it (deprecated: it was
#: also the name of the capacity count's configuration error).
ConfigError = BrokerConfigError


@dataclasses.dataclass(frozen=True)
class Cluster:
    name: str
    cloud: str
    region: str
    datacenter: str
    zone: typing.Optional[str]
    pools: tuple
    #: seconds, for every call to the cluster's APIs (keystone included)
    connect_timeout: float = DEFAULT_CONNECT_TIMEOUT
    read_timeout: float = DEFAULT_READ_TIMEOUT


@dataclasses.dataclass(frozen=True)
class Variant:
    flavor: str
    pool: str
    numa: str
    #: an uneven variant's even (``dual``) variant, by flavor name
    base: typing.Optional[str] = None
    #: an uneven variant's ``((cpus, memory MiB), (cpus, memory MiB))``
    #: of NUMA nodes 0 and 1
    cells: tuple = ()
    #: an uneven variant's flavor: vCPUs, RAM (MiB) and extra specs (the
    #: base's, given in the configuration, and the split's), sorted
    #: ``(key, value)`` pairs
    vcpus: int = 0
    memory_mb: int = 0
    extra_specs: tuple = ()

    def flavor_specs(self):
        """An uneven variant's extra specs, as a dict."""
        return dict(self.extra_specs)


@dataclasses.dataclass(frozen=True)
class Family:
    name: str
    variants: tuple


@dataclasses.dataclass(frozen=True)
class Role:
    name: str
    numa: tuple
    pools: typing.Optional[tuple] = None
    preemptible: bool = False

    def allows(self, variant):
        return variant.numa in self.numa and (
            self.pools is None or variant.pool in self.pools)


@dataclasses.dataclass(frozen=True)
class Config:
    path: str
    clusters: dict
    families: dict
    roles: dict
    preemptible_caps: dict
    set_max_size: typing.Optional[int] = None
    set_caps: dict = dataclasses.field(default_factory=dict)
    chooser: str = DEFAULT_CHOOSER
    conversion: str = DEFAULT_CONVERSION
    boot_timeout: float = DEFAULT_BOOT_TIMEOUT
    poll_interval: float = DEFAULT_POLL_INTERVAL
    max_attempts: int = DEFAULT_MAX_ATTEMPTS
    survey_workers: int = DEFAULT_SURVEY_WORKERS

    def set_cap(self, name):
        """The cross-cluster cap of deployment set ``name``, or None."""
        return self.set_caps.get(name, self.set_max_size)


class _Checker:
    """Reads values out of the parsed YAML, naming the file and key."""

    def __init__(self, path):
        self.path = path

    def fail(self, key, problem):
        # a key path holds names not yet checked: bounded like values
        raise BrokerConfigError('%s: %s: %s' % (
            self.path, _clipped(key or '(top level)', 200), problem))

    def section(self, parent, name, key, known=None):
        """The mapping ``parent[name]``; absent or empty (null): {}."""
        value = parent.get(name)
        if value is None:
            return {}
        return self.mapping(value, key, known)

    def mapping(self, value, key, known=None, required=()):
        if not isinstance(value, dict):
            self.fail(key, 'expected a mapping, got %s'
                      % _kind(value))
        for name in value:
            if not isinstance(name, str):
                self.fail(key, 'the key %s is not a string' % _shown(name))
        if known is not None:
            unknown = sorted(set(value) - set(known))
            if unknown:
                self.fail(_join(key, unknown[0]),
                          'unknown key; known: %s' % ', '.join(known))
        for name in required:
            if name not in value:
                self.fail(_join(key, name), 'missing')
        return value

    def name(self, value, key):
        if not isinstance(value, str) or not _NAME.fullmatch(value):
            self.fail(key, 'expected a name (letters, digits and . _ : @ -, '
                      'at most 128, starting with a letter or digit), got '
                      '%s' % _shown(value))
        return value

    def integer(self, value, key, low, high=None):
        if isinstance(value, bool) or not isinstance(value, int):
            self.fail(key, 'expected an integer, got %s' % _shown(value))
        if value < low or (high is not None and value > high):
            self.fail(key, 'must be from %d to %s, got %d'
                      % (low, high if high is not None else 'any', value))
        return value

    def number(self, value, key, low, high):
        if isinstance(value, bool) or not isinstance(value, (int, float)):
            self.fail(key, 'expected a number, got %s' % _shown(value))
        if not low <= value <= high:
            self.fail(key, 'must be from %s to %s, got %s'
                      % (low, high, value))
        return float(value)

    def names(self, value, key, choices=None):
        if not isinstance(value, list) or not value:
            self.fail(key, 'expected a non-empty list, got %s'
                      % _shown(value))
        result = []
        for i, item in enumerate(value):
            item_key = '%s[%d]' % (key, i)
            self.name(item, item_key)
            if choices is not None and item not in choices:
                self.fail(item_key, '%s is not one of %s'
                          % (_shown(item), ', '.join(choices)))
            if item in result:
                self.fail(item_key, '%s is listed twice' % _shown(item))
            result.append(item)
        return tuple(result)


def _join(key, name):
    return '%s.%s' % (key, name) if key else name


def _kind(value):
    if value is None:
        return 'nothing'
    return {dict: 'a mapping', list: 'a list', str: 'a string',
            bool: 'a boolean', int: 'an integer',
            float: 'a number'}.get(type(value), type(value).__name__)


# What a message shows of a value: a few items of a few levels, whatever
# the value holds (an alias bomb's repr() is gigabytes).
_SHOWN = reprlib.Repr()
_SHOWN.maxlevel = 2
_SHOWN.maxlist = _SHOWN.maxtuple = _SHOWN.maxdict = _SHOWN.maxset = 4
_SHOWN.maxstring = _SHOWN.maxother = _SHOWN.maxlong = 64


def _clipped(text, limit=64):
    return text if len(text) <= limit else text[:limit - 3] + '...'


def _shown(value):
    return _clipped(_SHOWN.repr(value))


class _TooBig(sched_ext_exception.NovaSchedExtError):
    """A file past a bound; the message says which."""


class _Loader(yaml.SafeLoader):
    """YAML's safe loader, refusing a key repeated in a mapping.

    YAML forbids it and PyYAML keeps the last value silently: a second
    ``east-1`` would replace the first.  The keys a ``<<`` merge brings
    may still be overridden, as YAML allows.  The nesting is bounded as
    it is read: PyYAML's scanner slows down with every open level (5 s
    at 500) before its composer runs out of recursion.
    """

    def __init__(self, stream):
        super().__init__(stream)
        self.depth = 0

    def compose_node(self, parent, index):
        self.depth += 1
        try:
            if self.depth > MAX_CONFIG_DEPTH:
                raise _TooBig('is nested deeper than %d levels (line %d)'
                              % (MAX_CONFIG_DEPTH,
                                 self.peek_event().start_mark.line + 1))
            return super().compose_node(parent, index)
        finally:
            self.depth -= 1

    def construct_mapping(self, node, deep=False):
        if isinstance(node, yaml.MappingNode):
            first = {}
            for key_node, _value in node.value:
                if key_node.tag == 'tag:yaml.org,2002:merge':
                    continue
                key = self.construct_object(key_node, deep=deep)
                try:
                    seen = first.setdefault(key, key_node.start_mark)
                except TypeError:
                    continue    # unhashable: the safe loader says so
                if seen is not key_node.start_mark:
                    raise yaml.constructor.ConstructorError(
                        None, None, 'the key %s is repeated (first at line '
                        '%d)' % (_shown(key), seen.line + 1),
                        key_node.start_mark)
        return super().construct_mapping(node, deep=deep)


def _measure(node, depth=1, memo=None):
    """``(values, height)`` of a composed node, its aliases expanded.

    An alias is the very node it names: ``memo`` counts each node once,
    so the cost is the file's, not the expansion's.  A node that holds
    itself passes the depth.

    :raises _TooBig: at the first node past a bound
    """
    if depth > MAX_CONFIG_DEPTH:
        raise _TooBig('is nested deeper than %d levels (line %d)'
                      % (MAX_CONFIG_DEPTH, node.start_mark.line + 1))
    if memo is None:
        memo = {}
    known = memo.get(id(node))
    if known is None:
        if isinstance(node, yaml.SequenceNode):
            children = node.value
        elif isinstance(node, yaml.MappingNode):
            children = [part for pair in node.value for part in pair]
        else:
            children = ()
        values, height = 1, 0
        for child in children:
            child_values, child_height = _measure(child, depth + 1, memo)
            values += child_values
            height = max(height, child_height + 1)
            if values > MAX_CONFIG_VALUES:
                raise _TooBig('holds more than %d values once its aliases '
                              'are expanded (line %d)'
                              % (MAX_CONFIG_VALUES,
                                 node.start_mark.line + 1))
        known = memo[id(node)] = (values, height)
    if depth + known[1] > MAX_CONFIG_DEPTH:
        raise _TooBig('is nested deeper than %d levels (line %d)'
                      % (MAX_CONFIG_DEPTH, node.start_mark.line + 1))
    return known


def _read(path):
    """The text of ``path``, refused unread past :data:`MAX_CONFIG_BYTES`."""
    try:
        with open(path, 'rb') as f:
            size = os.fstat(f.fileno()).st_size
            # never more than the bound: a file may grow while it is
            # read, and a pipe has no size
            raw = (f.read(MAX_CONFIG_BYTES + 1)
                   if size <= MAX_CONFIG_BYTES else b'')
    except OSError as exc:
        raise BrokerConfigError('%s: cannot be read: %s'
                                % (path, exc.strerror or exc))
    if size > MAX_CONFIG_BYTES or len(raw) > MAX_CONFIG_BYTES:
        raise BrokerConfigError(
            '%s: is larger than %d KiB%s: a broker configuration is a few '
            'kilobytes' % (path, MAX_CONFIG_BYTES // 1024,
                           ' (%d bytes)' % size
                           if size > MAX_CONFIG_BYTES else ''))
    try:
        return raw.decode('utf-8')
    except UnicodeDecodeError as exc:
        raise BrokerConfigError('%s: is not UTF-8 text (byte %d)'
                                % (path, exc.start))


def load(path):
    """The :class:`Config` of a YAML file, or :class:`BrokerConfigError`."""
    loader = _Loader(_read(path))
    try:
        node = loader.get_single_node()
        if node is not None:
            _measure(node)
        data = None if node is None else loader.construct_document(node)
    except yaml.YAMLError as exc:
        mark = getattr(exc, 'problem_mark', None)
        where = (' at line %d, column %d' % (mark.line + 1, mark.column + 1)
                 if mark is not None else '')
        problem = getattr(exc, 'problem', None) or str(exc).splitlines()[0]
        raise BrokerConfigError('%s: is not valid YAML%s: %s'
                                % (path, where, _clipped(problem, 200)))
    except _TooBig as exc:
        raise BrokerConfigError('%s: %s' % (path, exc))
    except ValueError as exc:
        # an integer of more digits than Python converts
        raise BrokerConfigError(
            '%s: cannot be read: %s'
            % (path, _clipped(str(exc).splitlines()[0], 200)))
    finally:
        loader.dispose()
    return parse(data, path)


def parse(data, path='<configuration>'):
    """The :class:`Config` of a mapping, or :class:`BrokerConfigError`."""
    check = _Checker(path)
    check.mapping(data, '', known=(
        'broker', 'clusters', 'flavor_families', 'roles',
        'preemptible_caps', 'deployment_sets'),
        required=('clusters', 'flavor_families'))
    settings = _broker_settings(check, data)
    clusters = _clusters(check, data['clusters'], timeouts={
        name: settings.pop(name) for name in _API_TIMEOUTS
        if name in settings})
    families = _families(check, data['flavor_families'], clusters)
    roles = _roles(check, data)
    datacenters = {c.datacenter for c in clusters.values()}
    caps = {}
    raw_caps = check.section(data, 'preemptible_caps', 'preemptible_caps')
    for dc, cap in raw_caps.items():
        key = 'preemptible_caps.%s' % dc
        if dc not in datacenters:
            check.fail(key, 'no cluster is in data center %s (known: %s)'
                       % (_shown(dc), ', '.join(sorted(datacenters))))
        caps[dc] = check.integer(cap, key, 0)
    sets = check.section(data, 'deployment_sets', 'deployment_sets',
                         known=('max_size', 'caps'))
    set_max_size = None
    if sets.get('max_size') is not None:
        set_max_size = check.integer(sets['max_size'],
                                     'deployment_sets.max_size', 1)
    set_caps = {}
    for name, cap in check.section(sets, 'caps',
                                   'deployment_sets.caps').items():
        key = 'deployment_sets.caps.%s' % name
        check.name(name, key)
        set_caps[name] = check.integer(cap, key, 1)
    return Config(path=path, clusters=clusters, families=families,
                  roles=roles, preemptible_caps=caps,
                  set_max_size=set_max_size, set_caps=set_caps, **settings)


# The timeouts of the calls to a cluster's APIs: in broker (every
# cluster's) and in a cluster (its own).
_API_TIMEOUTS = ('connect_timeout', 'read_timeout')


def _api_timeouts(check, raw, key):
    return {name: check.number(raw[name], _join(key, name), 0.1,
                               MAX_API_TIMEOUT)
            for name in _API_TIMEOUTS if name in raw}


def _broker_settings(check, data):
    raw = check.section(data, 'broker', 'broker', known=(
        'chooser', 'conversion', 'boot_timeout', 'poll_interval',
        'max_attempts') + _API_TIMEOUTS + ('survey_workers',))
    settings = _api_timeouts(check, raw, 'broker')
    if 'chooser' in raw:
        settings['chooser'] = check.name(raw['chooser'], 'broker.chooser')
    if 'conversion' in raw:
        if raw['conversion'] not in CONVERSIONS:
            check.fail('broker.conversion', 'expected one of %s, got %s'
                       % (', '.join(CONVERSIONS), _shown(raw['conversion'])))
        settings['conversion'] = raw['conversion']
    if 'boot_timeout' in raw:
        settings['boot_timeout'] = check.number(
            raw['boot_timeout'], 'broker.boot_timeout', 1, MAX_BOOT_TIMEOUT)
    if 'poll_interval' in raw:
        settings['poll_interval'] = check.number(
            raw['poll_interval'], 'broker.poll_interval', 0.1, 600)
    if 'max_attempts' in raw:
        settings['max_attempts'] = check.integer(
            raw['max_attempts'], 'broker.max_attempts', 1, MAX_ATTEMPTS)
    if 'survey_workers' in raw:
        settings['survey_workers'] = check.integer(
            raw['survey_workers'], 'broker.survey_workers', 1,
            MAX_SURVEY_WORKERS)
    return settings


def _clusters(check, raw, timeouts):
    check.mapping(raw, 'clusters')
    if not raw:
        check.fail('clusters', 'no cluster is configured')
    clusters = {}
    clouds = {}
    for name, body in raw.items():
        key = 'clusters.%s' % name
        check.name(name, key)
        check.mapping(body, key, known=('cloud', 'region', 'datacenter',
                                        'zone', 'pools') + _API_TIMEOUTS,
                      required=('region', 'datacenter', 'pools'))
        cloud = check.name(body.get('cloud', name), key + '.cloud')
        region = check.name(body['region'], key + '.region')
        if (cloud, region) in clouds:
            check.fail(key, 'cloud %r region %r is already cluster %s'
                       % (cloud, region, clouds[cloud, region]))
        clouds[cloud, region] = name
        zone = body.get('zone')
        if zone is not None:
            zone = check.name(zone, key + '.zone')
        clusters[name] = Cluster(
            name=name, cloud=cloud, region=region,
            datacenter=check.name(body['datacenter'], key + '.datacenter'),
            zone=zone, pools=check.names(body['pools'], key + '.pools'),
            **dict(timeouts, **_api_timeouts(check, body, key)))
    return clusters


def _families(check, raw, clusters):
    check.mapping(raw, 'flavor_families')
    if not raw:
        check.fail('flavor_families', 'no flavor family is configured')
    pools = {p for c in clusters.values() for p in c.pools}
    families = {}
    for name, body in raw.items():
        key = 'flavor_families.%s' % name
        check.name(name, key)
        check.mapping(body, key, known=('variants',), required=('variants',))
        variants = body['variants']
        if not isinstance(variants, list) or not variants:
            check.fail(key + '.variants', 'expected a non-empty list, got %s'
                       % _shown(variants))
        seen = set()
        result = []
        for i, item in enumerate(variants):
            item_key = '%s.variants[%d]' % (key, i)
            check.mapping(item, item_key,
                          known=('flavor', 'pool', 'numa', 'uneven'),
                          required=('flavor', 'pool', 'numa'))
            flavor = check.name(item['flavor'], item_key + '.flavor')
            if flavor in seen:
                check.fail(item_key + '.flavor',
                           'flavor %r is listed twice' % flavor)
            seen.add(flavor)
            pool = check.name(item['pool'], item_key + '.pool')
            if pool not in pools:
                check.fail(item_key + '.pool',
                           'no cluster has pool %r (pools: %s)'
                           % (pool, ', '.join(sorted(pools))))
            numa = item['numa']
            if numa not in DECLARED_KINDS:
                check.fail(item_key + '.numa', 'expected one of %s, got %s'
                           % (', '.join(DECLARED_KINDS), _shown(numa)))
            variant = Variant(flavor=flavor, pool=pool, numa=numa)
            result.append(variant)
            if item.get('uneven') is not None:
                if numa != DUAL:
                    check.fail(item_key + '.uneven', 'only a dual variant '
                               'has uneven splits, this one is %s' % numa)
                for uneven in uneven_variants(
                        check, variant, item['uneven'],
                        item_key + '.uneven'):
                    if uneven.flavor in seen:
                        check.fail(item_key + '.uneven', 'flavor %r is '
                                   'listed twice (split %s; set uneven.name '
                                   'to tell the splits apart)'
                                   % (uneven.flavor, _split_text(
                                       uneven.cells)))
                    seen.add(uneven.flavor)
                    result.append(uneven)
        families[name] = Family(name=name, variants=tuple(result))
    return families


def _roles(check, data):
    raw = check.section(data, 'roles', 'roles')
    merged = dict(DEFAULT_ROLES)
    merged.update(raw)
    roles = {}
    for name, body in merged.items():
        key = 'roles.%s' % name
        check.name(name, key)
        check.mapping(body, key, known=('numa', 'pools', 'preemptible'),
                      required=('numa',))
        preemptible = body.get('preemptible', False)
        if not isinstance(preemptible, bool):
            check.fail(key + '.preemptible', 'expected true or false, got %s'
                       % _shown(preemptible))
        pools = body.get('pools')
        roles[name] = Role(
            name=name,
            numa=check.names(body['numa'], key + '.numa', NUMA_KINDS),
            pools=None if pools is None else check.names(pools,
                                                         key + '.pools'),
            preemptible=preemptible)
    return roles


_RATIO = re.compile(r'(\d{1,6}):(\d{1,6})$', re.ASCII)
_PAGE_SIZE = re.compile(r'(\d{1,12})\s*([KMGT])?(i?B)?$', re.ASCII | re.I)
_PAGE_UNITS_KB = {None: 1, 'K': 1, 'M': 1024, 'G': 1024 ** 2,
                  'T': 1024 ** 3}


def _split_text(cells):
    return '%d+%d vCPUs, %d+%d MiB' % (cells[0][0], cells[1][0],
                                       cells[0][1], cells[1][1])


def _cpu_range(first, count):
    last = first + count - 1
    return str(first) if count == 1 else '%d-%d' % (first, last)


def page_size_kb(value):
    """The page size (KiB) ``hw:mem_page_size`` asks for, as Nova reads it.

    ``small`` is 4 KiB; ``large`` the smallest large page
    (:data:`SMALLEST_LARGE_PAGE_KB`, the least each node's RAM must be a
    multiple of); ``any`` None (Nova may take small pages); a number is
    KiB, or a size with a unit (``2MB``, ``1GiB``).

    :raises ValueError: none of these
    """
    text = str(value).strip()
    lowered = text.lower()
    if lowered == 'any':
        return None
    if lowered == 'small':
        return 4
    if lowered == 'large':
        return SMALLEST_LARGE_PAGE_KB
    match = _PAGE_SIZE.match(text)
    if not match or (match.group(2) is None and match.group(3)):
        raise ValueError(text)
    number = int(match.group(1))
    if match.group(2) is None:
        return number      # Nova: digits alone are KiB
    return number * _PAGE_UNITS_KB[match.group(2).upper()]


def uneven_variants(check, base, raw, key):
    """The uneven variants of the dual variant ``base``, in order.

    ``raw`` (the variant's ``uneven`` mapping):

    ``vcpus``, ``ram``
        the flavor's vCPUs and RAM (MiB), which the splits divide;
    ``extra_specs``
        the flavor's other extra specs (``hw:cpu_policy``,
        ``hw:mem_page_size``, the pool's traits ...), kept on every
        uneven flavor;
    ``splits``
        explicit splits: ``'3:1'`` (the same share of the vCPUs and of
        the RAM on node 0 and node 1) or ``{cpus: [12, 4], ram: [24576,
        8192]}``;
    ``min_share``
        a rule: every split that gives each node at least this percent
        of the vCPUs (above 0, below 50), the RAM in the same proportion;
        since Nova tries the guest's nodes on the host's in every order,
        a split and its mirror (12+4, 4+12) fit the same hosts, and the
        rule makes only the one with more on node 0; a split whose RAM
        share is not whole MiB, or not whole pages, is skipped;
    ``name``
        the flavors' names (default :data:`DEFAULT_UNEVEN_NAME`, fields
        :data:`UNEVEN_NAME_FIELDS`).

    Each fault is one line through ``check``: a node with 0 CPUs or RAM,
    a split that does not add up to the flavor's vCPUs or RAM, RAM per
    node below the page size or not a multiple of it, a rule's percent
    out of range.
    """
    check.mapping(raw, key, known=('vcpus', 'ram', 'extra_specs', 'splits',
                                   'min_share', 'name'),
                  required=('vcpus', 'ram'))
    if raw.get('splits') is None and raw.get('min_share') is None:
        check.fail(key, 'give splits, min_share or both')
    vcpus = check.integer(raw['vcpus'], key + '.vcpus', 2, MAX_CPUS_FLAVOR)
    ram = check.integer(raw['ram'], key + '.ram', 2, MAX_RAM_MB)
    specs = _uneven_specs(check, raw.get('extra_specs'),
                          key + '.extra_specs')
    page_kb = None
    if 'hw:mem_page_size' in specs:
        try:
            page_kb = page_size_kb(specs['hw:mem_page_size'])
        except ValueError:
            check.fail(key + '.extra_specs.hw:mem_page_size',
                       'expected small, large, any or a size (2048, 2MB, '
                       '1GB), got %s' % _shown(specs['hw:mem_page_size']))
    template = raw.get('name', DEFAULT_UNEVEN_NAME)
    if not isinstance(template, str):
        check.fail(key + '.name', 'expected a string, got %s'
                   % _shown(template))

    cells_list = []
    splits = raw.get('splits')
    if splits is not None:
        if not isinstance(splits, list) or not splits:
            check.fail(key + '.splits', 'expected a non-empty list, got %s'
                       % _shown(splits))
        for i, split in enumerate(splits):
            split_key = '%s.splits[%d]' % (key, i)
            cells = _explicit_split(check, split, split_key, vcpus, ram)
            _check_pages(check, cells, page_kb, split_key)
            if cells in cells_list:
                check.fail(split_key, 'split %s is listed twice'
                           % _split_text(cells))
            cells_list.append(cells)
    if raw.get('min_share') is not None:
        share = raw['min_share']
        share_key = key + '.min_share'
        if isinstance(share, bool) or not isinstance(share, (int, float)):
            check.fail(share_key, 'expected a percent, got %s'
                       % _shown(share))
        if not 0 < share < 50:
            check.fail(share_key, 'must be above 0 and below 50 (percent '
                       'of the vCPUs on each node), got %s' % share)
        found = False
        # node 1 from the most even split down to the least
        for cpus1 in range((vcpus - 1) // 2, 0, -1):
            if cpus1 * 100 < share * vcpus:
                break
            if (ram * cpus1) % vcpus:
                continue
            mem1 = ram * cpus1 // vcpus
            cells = ((vcpus - cpus1, ram - mem1), (cpus1, mem1))
            if page_kb is not None and (
                    mem1 * 1024 < page_kb or (mem1 * 1024) % page_kb or
                    (cells[0][1] * 1024) % page_kb):
                continue
            found = True
            if cells not in cells_list:
                cells_list.append(cells)
        if not found:
            check.fail(share_key, '%s %% of %d vCPUs and %d MiB leaves no '
                       'uneven split (whole CPUs, MiB and pages on each '
                       'node)' % (share, vcpus, ram))
    if len(cells_list) > MAX_UNEVEN_VARIANTS:
        check.fail(key, '%d uneven splits, at most %d: raise min_share'
                   % (len(cells_list), MAX_UNEVEN_VARIANTS))

    result = []
    for cells in cells_list:
        (cpus0, mem0), (cpus1, mem1) = cells
        try:
            name = template.format(flavor=base.flavor, cpus0=cpus0,
                                   cpus1=cpus1, mem0=mem0, mem1=mem1)
        except (KeyError, IndexError, ValueError, AttributeError) as exc:
            check.fail(key + '.name', 'cannot be formatted (%s; fields: %s)'
                       % (_clipped(str(exc)), ', '.join(UNEVEN_NAME_FIELDS)))
        check.name(name, key + '.name')
        flavor_specs = dict(specs)
        flavor_specs.update({
            'hw:numa_nodes': '2',
            'hw:numa_cpus.0': _cpu_range(0, cpus0),
            'hw:numa_cpus.1': _cpu_range(cpus0, cpus1),
            'hw:numa_mem.0': str(mem0),
            'hw:numa_mem.1': str(mem1)})
        result.append(Variant(
            flavor=name, pool=base.pool, numa=UNEVEN, base=base.flavor,
            cells=cells, vcpus=vcpus, memory_mb=ram,
            extra_specs=tuple(sorted(flavor_specs.items()))))
    return result


#: bounds of an uneven family's size (Nova's own flavor limits are wider;
#: these keep a typo from building a million-CPU split)
MAX_CPUS_FLAVOR = 4096
MAX_RAM_MB = 1 << 30


def _uneven_specs(check, raw, key):
    if raw is None:
        return {}
    check.mapping(raw, key)
    specs = {}
    for name, value in raw.items():
        spec_key = _join(key, name)
        if isinstance(value, bool) or not isinstance(value, (str, int)):
            check.fail(spec_key, 'expected a string, got %s'
                       % _shown(value))
        value = str(value)
        if UNEVEN_OWN_SPECS.match(name):
            if name == 'hw:numa_nodes' and value == '2':
                continue
            check.fail(spec_key, 'is set by each uneven split, not by the '
                       'family')
        if name in UNEVEN_REFUSED_SPECS:
            check.fail(spec_key, 'names guest CPUs, which the split moves '
                       'between nodes: it cannot be kept on uneven variants')
        specs[name] = value
    return specs


def _explicit_split(check, split, key, vcpus, ram):
    """``((cpus0, mem0), (cpus1, mem1))`` of one ``splits`` item."""
    if isinstance(split, str):
        match = _RATIO.match(split.strip())
        if not match:
            check.fail(key, "expected a ratio ('3:1') or {cpus: [a, b], "
                       "ram: [x, y]}, got %s" % _shown(split))
        parts = int(match.group(1)), int(match.group(2))
        for node, part in enumerate(parts):
            if part == 0:
                check.fail(key, 'node %d gets 0 CPUs' % node)
        whole = sum(parts)
        if (vcpus * parts[0]) % whole:
            check.fail(key, '%s of %d vCPUs is not a whole number of CPUs '
                       'per node' % (split, vcpus))
        if (ram * parts[0]) % whole:
            check.fail(key, '%s of %d MiB is not a whole number of MiB per '
                       'node' % (split, ram))
        cpus = (vcpus * parts[0] // whole, vcpus * parts[1] // whole)
        mems = (ram * parts[0] // whole, ram * parts[1] // whole)
    else:
        check.mapping(split, key, known=('cpus', 'ram'),
                      required=('cpus', 'ram'))
        cpus = _pair(check, split['cpus'], key + '.cpus', 'CPUs')
        mems = _pair(check, split['ram'], key + '.ram', 'MiB of RAM')
        if sum(cpus) != vcpus:
            check.fail(key + '.cpus', 'adds up to %d vCPUs, the flavor has '
                       '%d' % (sum(cpus), vcpus))
        if sum(mems) != ram:
            check.fail(key + '.ram', 'adds up to %d MiB, the flavor has %d'
                       % (sum(mems), ram))
    if cpus[0] == cpus[1] and mems[0] == mems[1]:
        check.fail(key, 'is the even split, which the dual variant is')
    return (cpus[0], mems[0]), (cpus[1], mems[1])


def _pair(check, value, key, unit):
    if not isinstance(value, list) or len(value) != 2:
        check.fail(key, 'expected two numbers (node 0, node 1), got %s'
                   % _shown(value))
    for node, item in enumerate(value):
        check.integer(item, '%s[%d]' % (key, node), 0)
        if item == 0:
            check.fail(key, 'node %d has 0 %s' % (node, unit))
    return tuple(value)


def _check_pages(check, cells, page_kb, key):
    if page_kb is None:
        return
    for node, (_cpus, mem) in enumerate(cells):
        if mem * 1024 < page_kb:
            check.fail(key, 'node %d gets %d MiB of RAM, less than one %d '
                       'KiB page (hw:mem_page_size)' % (node, mem, page_kb))
    for node, (_cpus, mem) in enumerate(cells):
        if (mem * 1024) % page_kb:
            check.fail(key, 'node %d gets %d MiB of RAM, not a whole number '
                       'of %d KiB pages (hw:mem_page_size)'
                       % (node, mem, page_kb))

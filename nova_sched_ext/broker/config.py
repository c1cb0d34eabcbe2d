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
    (``single`` or ``dual``).
``roles``
    by role name: ``numa`` (the NUMA kinds the role may get),
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
NUMA_KINDS = (SINGLE, DUAL)

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
DEFAULT_ROLES = {
    'pay-as-you-go': {'numa': [SINGLE, DUAL]},
    'auto-scaling': {'numa': [SINGLE]},
    'preemptible': {'numa': [DUAL], 'preemptible': True},
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
            check.mapping(item, item_key, known=('flavor', 'pool', 'numa'),
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
            if numa not in NUMA_KINDS:
                check.fail(item_key + '.numa', 'expected one of %s, got %s'
                           % (', '.join(NUMA_KINDS), _shown(numa)))
            result.append(Variant(flavor=flavor, pool=pool, numa=numa))
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

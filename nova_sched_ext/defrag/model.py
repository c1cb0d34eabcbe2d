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

"""The cloud as the defragmentation planner sees it.

Plain data, built by whoever reads the cloud: :mod:`.sources` from Nova's
cells and placement (as the capacity count reads them), the simulator from
its replay, the tests by hand.  Nova's own objects are kept where Nova's
functions must decide (a host's ``NUMATopology`` with the usage of its
instances, an instance's fitted ``InstanceNUMATopology`` and the
constraints its flavor gives, ``numa_get_constraints``), and the
placement inventories in the capacity count's form
(:class:`nova_sched_ext.cloud.placement.Inventory`).
"""

import dataclasses
import hashlib
import json
import os
import stat
import typing

from nova_sched_ext import exception as sched_ext_exception

#: The ``format`` of a plan document (``planner.Plan.to_dict()``); here,
#: where nothing imports Nova, so that Watcher's strategy can check it too.
PLAN_FORMAT = 'nova-sched-ext-defrag-plan/1'

#: The key of a plan document's checksum (:func:`plan_checksum`).
CHECKSUM = 'checksum'

#: Why an instance is never moved (:attr:`Instance.unmovable`).
PCI_DEVICES = 'it has PCI devices (live migration would lose them)'


#: The largest plan or saved state read, in bytes.  A plan of 5 % of a
#: 10,000-instance cloud is under 1 MiB, the simulator's end state of a
#: whole trace (1,710 hosts, 4,600 instances) 1.3 MiB; a file over this
#: is not one of ours, and parsing it would take seconds and gigabytes.
MAX_DOCUMENT_BYTES = 64 * 1024 * 1024


class PlanError(ValueError, sched_ext_exception.UserFacingError):
    """A user error in the planner's input; the message is one line."""


def plan_checksum(document):
    """``sha256:<hex digest>`` of a plan document, its checksum left out.

    Over the canonical JSON of everything else (keys sorted, no spaces,
    ASCII): the moves and what they were planned with (budget, scope,
    never-move list, slots).  ``plan`` writes it, ``apply`` refuses a plan
    that does not match it.  It shows that the plan is the one ``plan``
    wrote, unchanged; it is no secret, and not a signature against
    whoever may write the file.
    """
    content = {key: value for key, value in document.items()
               if key != CHECKSUM}
    text = json.dumps(content, sort_keys=True, separators=(',', ':'),
                      ensure_ascii=True, allow_nan=False)
    return 'sha256:' + hashlib.sha256(text.encode('ascii')).hexdigest()


def _read_bounded(stream, noun, path, error):
    """The bytes of ``stream``, or ``error`` if over the size we read."""
    limit = MAX_DOCUMENT_BYTES
    too_large = error('%s %s is larger than %d MiB, the most read: no plan '
                      'or saved state is that large'
                      % (noun, path, limit // (1024 * 1024)))
    info = os.fstat(stream.fileno())
    # A regular file is refused by its size, before anything is read; a
    # pipe or device by what it gives.
    if stat.S_ISREG(info.st_mode) and info.st_size > limit:
        raise too_large
    data = stream.read(limit + 1)
    if len(data) > limit:
        raise too_large
    return data


def read_document(path, file_format, noun, what, error):
    """The JSON object of a file of ours whose ``format`` is ``file_format``.

    Plans and saved states are read alike: a file that cannot be read, is
    larger than :data:`MAX_DOCUMENT_BYTES`, is not JSON (or JSON nested
    too deeply to parse) or is not ours raises ``error`` with one line
    naming it.  ``file_format`` may be a tuple of the formats accepted.

    :param noun: what the file is called in messages (``'plan file'``)
    :param what: what it should have been (``'a plan of ...'``)
    """
    try:
        with open(path, 'rb') as stream:
            data = _read_bounded(stream, noun, path, error)
    except OSError as exc:
        raise error('cannot read %s %s: %s'
                    % (noun, path, exc.strerror or exc))
    try:
        document = json.loads(data)
    except RecursionError:
        raise error('%s %s is not %s: its JSON is nested too deeply to '
                    'read' % (noun, path, what)) from None
    except ValueError as exc:
        raise error('%s %s is not JSON: %s' % (noun, path, exc))
    formats = (file_format,) if isinstance(file_format, str) \
        else tuple(file_format)
    if not isinstance(document, dict) or \
            document.get('format') not in formats:
        raise error('%s is not %s (format %s)'
                    % (path, what, ' or '.join(formats)))
    return document


@dataclasses.dataclass
class Host:
    """One compute node."""

    name: str
    #: ``objects.NUMATopology`` with the usage of the instances on it
    numa_topology: typing.Any
    #: ``{resource class: cloud.placement.Inventory}``
    inventories: dict
    #: ``{resource class: used}``
    usages: dict
    cpu_allocation_ratio: float = 1.0
    ram_allocation_ratio: float = 1.0
    availability_zone: typing.Optional[str] = None
    #: names of its host aggregates
    aggregates: frozenset = frozenset()
    #: ``{key: frozenset(values)}`` of those aggregates' metadata
    aggregate_metadata: dict = dataclasses.field(default_factory=dict)
    #: its failure domains (the deployment sets' domain key)
    failure_domains: frozenset = frozenset()
    #: None, or why the scheduler does not use it (disabled, down)
    disabled_reason: typing.Optional[str] = None
    #: Nova's ``PciDeviceStats`` of its PCI devices, or None (none known):
    #: slots of flavors with PCI devices count them, and Nova's fit of a
    #: move prefers the cells without devices, as the scheduler's does
    pci_stats: typing.Any = None


@dataclasses.dataclass
class Instance:
    """One server on a host."""

    uuid: str
    host: str
    flavor_name: str
    vcpus: int
    memory_mb: int
    #: ``{resource class: amount}`` of its placement allocation
    resources: dict
    #: ``InstanceNUMATopology`` its flavor asks for
    #: (``numa_get_constraints``), or None: what a move is fitted with
    requested_topology: typing.Any = None
    #: ``InstanceNUMATopology`` Nova gave it on its host, or None
    numa_topology: typing.Any = None
    project_id: typing.Optional[str] = None
    #: the server group it is in, if any
    group: typing.Optional[str] = None
    #: its ``deployment_set_partition`` (``partition`` strategy)
    partition: typing.Optional[int] = None
    preemptible: bool = False
    #: None, or why it cannot live-migrate (PCI devices, a task state,
    #: not ACTIVE)
    unmovable: typing.Optional[str] = None
    #: aggregate metadata its flavor requires
    #: (``aggregate_instance_extra_specs:``): ``{key: value}``
    required_metadata: dict = dataclasses.field(default_factory=dict)


@dataclasses.dataclass
class ServerGroup:
    """A server group, or a deployment set (a group with a strategy)."""

    uuid: str
    policy: str
    max_server_per_host: int = 1
    #: ``host``, ``domain`` or ``partition`` for a deployment set
    deployment_set_strategy: typing.Optional[str] = None


@dataclasses.dataclass
class Cloud:
    hosts: dict                       # name -> Host
    instances: dict                   # uuid -> Instance
    groups: dict = dataclasses.field(default_factory=dict)
    #: ``[nova_sched_ext] preemptible_max_per_host`` (-1: no cap)
    preemptible_max_per_host: int = -1


def part_of(cloud, hosts):
    """The part of ``cloud`` a reader gives for ``hosts`` (host names).

    Those of the hosts the cloud has, every instance on them and the
    groups of those instances: what ``read_cloud(hosts=...)`` returns to
    the executor, which re-reads only the hosts a move touches.
    """
    wanted = set(hosts)
    instances = {uuid: instance for uuid, instance in cloud.instances.items()
                 if instance.host in wanted}
    groups = {instance.group for instance in instances.values()}
    return Cloud(
        hosts={name: host for name, host in cloud.hosts.items()
               if name in wanted},
        instances=instances,
        groups={uuid: group for uuid, group in cloud.groups.items()
                if uuid in groups},
        preemptible_max_per_host=cloud.preemptible_max_per_host)


@dataclasses.dataclass(frozen=True)
class Budget:
    """The most a plan may move; None: no bound of that kind."""

    max_moves: typing.Optional[int] = None
    max_ram_mb: typing.Optional[int] = None
    #: a share of the instances in scope, 0..1
    max_share: typing.Optional[float] = None

    def __post_init__(self):
        for name in ('max_moves', 'max_ram_mb'):
            value = getattr(self, name)
            if value is not None and value < 0:
                raise PlanError('the budget %s must not be negative, not %s'
                                % (name.replace('_', ' '), value))
        if self.max_share is not None and not 0 <= self.max_share <= 1:
            raise PlanError('the budget share of instances must be between '
                            '0 and 100 %%, not %s %%'
                            % (self.max_share * 100))

    def moves_allowed(self, instances):
        """The most moves for a scope of ``instances`` instances."""
        allowed = [self.max_moves] if self.max_moves is not None else []
        if self.max_share is not None:
            allowed.append(int(instances * self.max_share))
        return min(allowed) if allowed else instances


@dataclasses.dataclass(frozen=True)
class Scope:
    """Which hosts a plan may touch: all of these that are given."""

    availability_zone: typing.Optional[str] = None
    aggregate: typing.Optional[str] = None
    hosts: typing.Optional[frozenset] = None

    def contains(self, host):
        if self.availability_zone is not None and \
                host.availability_zone != self.availability_zone:
            return False
        if self.aggregate is not None and \
                self.aggregate not in host.aggregates:
            return False
        return self.hosts is None or host.name in self.hosts

    def check(self, cloud):
        """Refuse a scope naming a zone, aggregate or host the cloud lacks.

        :raises PlanError: one line naming what is unknown; the planner
            itself refuses a scope of known names that matches no host
        """
        hosts = cloud.hosts.values()
        if self.availability_zone is not None and not any(
                h.availability_zone == self.availability_zone
                for h in hosts):
            raise PlanError('no compute host is in availability zone %s'
                            % self.availability_zone)
        if self.aggregate is not None and not any(
                self.aggregate in h.aggregates for h in hosts):
            raise PlanError('no compute host is in a host aggregate named %s'
                            % self.aggregate)
        if self.hosts is not None:
            if not self.hosts:
                raise PlanError('the list of hosts of the scope is empty')
            unknown = sorted(self.hosts - set(cloud.hosts))
            if unknown:
                raise PlanError('no compute host named %s'
                                % ', '.join(unknown))

    def describe(self):
        parts = []
        if self.availability_zone is not None:
            parts.append('availability zone %s' % self.availability_zone)
        if self.aggregate is not None:
            parts.append('aggregate %s' % self.aggregate)
        if self.hosts is not None:
            parts.append('hosts %s' % ', '.join(sorted(self.hosts)))
        return ' and '.join(parts) or 'the whole cloud'


@dataclasses.dataclass(frozen=True)
class NeverMove:
    """Instances and projects the operator keeps where they are."""

    instances: frozenset = frozenset()
    projects: frozenset = frozenset()

    def why(self, instance):
        if instance.uuid in self.instances:
            return 'it is on the never-move list'
        if instance.project_id is not None and \
                instance.project_id in self.projects:
            return 'its project %s is on the never-move list' % (
                instance.project_id)
        return None

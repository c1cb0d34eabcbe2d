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


"""Placement's ``GET /allocation_candidates``, answered from kept state.

A pure function of what was read: :func:`parse` turns the query string
Nova sends (``ResourceRequest.to_querystring()``, at microversion
:data:`MICROVERSION`, which every supported Nova sends) into a
:class:`Query`, and :func:`answer` gives what placement would answer for
it on the providers given, in placement's own JSON shapes: the
allocation requests and the provider summaries that Nova's report
client returns from ``get_allocation_candidates``.

The subset it answers, and why each limit is there (anything outside
raises :class:`OutsideSubset`, and the caller asks placement):

* **one request group**, the unnumbered one (``resources``,
  ``required``, ``member_of``, ``in_tree``), with ``limit``,
  ``group_policy`` (meaningless without numbered groups) and
  ``root_required``: a numbered group (a port's bandwidth, a vGPU, a
  PCI device in placement) or ``same_subtree`` needs the provider trees'
  nesting, which the kept state does not model;
* **compute nodes that are trees of one provider**, and no sharing
  provider (``MISC_SHARES_VIA_AGGREGATE``) among those given: a nested
  tree or a sharing provider lets placement split a group's resources
  over several providers (:func:`answer` refuses the query when it
  meets one, so a cloud that has them is answered by placement);
* **traits and aggregates by name**: ``required=A,!B``, ``member_of=
  in:X,Y`` (any of), repeated (all of), ``member_of=!in:X,Y`` (none of),
  ``root_required=A,!B``; ``required=in:...`` (any-of traits, 1.39) is
  outside.

The rules are placement's, from its ``objects/research_context.py`` and
``objects/allocation_candidate.py``: a provider is a candidate when it
has an inventory of every requested class with room for the amount
(:mod:`nova_sched_ext.cloud.room`: units, then ``used + amount <=
(total - reserved) * allocation_ratio``), holds every required trait and
no forbidden one (on the provider, which is its own root here), belongs
to one aggregate of every ``member_of`` and to none of a forbidden one,
and is the root ``in_tree`` names.  Its summary lists every inventory of
the provider (``capacity`` as the integer placement reports, ``used``),
its traits, parent and root.  ``limit`` keeps the first candidates, in
the order of the providers given.

An empty answer is not NoValidHost: the kept state may be stale, so a
caller asks placement's own query before it gives up, and claims go to
placement as Nova makes them, so a stale answer costs a failed claim,
never an over-commit.
"""

import copy
import typing
from urllib import parse as urlparse

from nova_sched_ext.cloud import placement
from nova_sched_ext.cloud import room
from nova_sched_ext import exception as sched_ext_exception

#: Nova's microversion for the query (``SAME_SUBTREE_VERSION``, 31 to 34).
MICROVERSION = '1.36'

#: The trait of a provider that shares its inventory through aggregates.
SHARING_TRAIT = placement.SHARING_TRAIT

#: The parameters of the subset; any other is outside it.
KNOWN = frozenset(('resources', 'required', 'member_of', 'in_tree',
                   'limit', 'group_policy', 'root_required'))


class OutsideSubset(sched_ext_exception.NovaSchedExtError):
    """The query or the cloud needs placement's own answer; says why.

    Not an error of anyone's: the caller asks placement instead.
    """


class Query(typing.NamedTuple):
    """One ``GET /allocation_candidates`` of the subset."""

    resources: dict                    # {resource class: amount > 0}
    required: frozenset = frozenset()
    forbidden: frozenset = frozenset()
    #: each an any-of set; the provider must be in one of every set
    member_of: tuple = ()
    #: the provider must be in none of these
    forbidden_aggregates: frozenset = frozenset()
    in_tree: typing.Optional[str] = None
    root_required: frozenset = frozenset()
    root_forbidden: frozenset = frozenset()
    limit: typing.Optional[int] = None


def _traits(value, name):
    """``(required, forbidden)`` of ``A,!B``."""
    if value.startswith('in:'):
        raise OutsideSubset('%s=in:... (any-of traits)' % name)
    required, forbidden = set(), set()
    for item in value.split(','):
        item = item.strip()
        if not item:
            raise OutsideSubset('%s has an empty trait' % name)
        if item.startswith('!'):
            forbidden.add(item[1:])
        else:
            required.add(item)
    return frozenset(required), frozenset(forbidden)


def _resources(value):
    resources = {}
    for item in value.split(','):
        rc, sep, amount = item.partition(':')
        if not sep or not rc:
            raise OutsideSubset('resources item %r' % item)
        try:
            number = int(amount)
        except ValueError:
            raise OutsideSubset('resources amount %r' % item)
        if number <= 0 or rc in resources:
            raise OutsideSubset('resources item %r' % item)
        resources[rc] = number
    return resources


def parse(querystring):
    """The :class:`Query` of a query string, or :class:`OutsideSubset`."""
    params = urlparse.parse_qsl(querystring, keep_blank_values=True,
                                strict_parsing=False)
    fields = {'member_of': [], 'forbidden_aggregates': set()}
    seen = set()
    for name, value in params:
        if name not in KNOWN:
            raise OutsideSubset('parameter %s' % name)
        if name != 'member_of':
            if name in seen:
                raise OutsideSubset('parameter %s given twice' % name)
            seen.add(name)
        if name == 'resources':
            fields['resources'] = _resources(value)
        elif name == 'required':
            fields['required'], fields['forbidden'] = _traits(value, name)
        elif name == 'root_required':
            (fields['root_required'],
             fields['root_forbidden']) = _traits(value, name)
        elif name == 'member_of':
            negated = value.startswith('!')
            body = value[1:] if negated else value
            body = body[3:] if body.startswith('in:') else body
            aggregates = frozenset(a for a in body.split(',') if a)
            if not aggregates:
                raise OutsideSubset('member_of=%s' % value)
            if negated:
                fields['forbidden_aggregates'] |= aggregates
            else:
                fields['member_of'].append(aggregates)
        elif name == 'in_tree':
            fields['in_tree'] = value
        elif name == 'limit':
            try:
                fields['limit'] = int(value)
            except ValueError:
                raise OutsideSubset('limit=%s' % value)
            if fields['limit'] < 1:
                raise OutsideSubset('limit=%s' % value)
        # group_policy: it concerns numbered groups only, and there are
        # none in the subset.
    if not fields.get('resources'):
        raise OutsideSubset('no resources in the unnumbered group')
    fields['member_of'] = tuple(fields['member_of'])
    fields['forbidden_aggregates'] = frozenset(
        fields['forbidden_aggregates'])
    return Query(**fields)


def outside_reason(provider):
    """Why placement alone can answer for ``provider``, or None.

    A nested provider or one that shares its inventory lets placement
    split a group's resources over several providers.
    """
    if provider.parent_uuid is not None:
        return 'provider %s is nested' % provider.uuid
    if SHARING_TRAIT in provider.traits:
        return 'provider %s shares its inventory' % provider.uuid
    return None


def is_candidate(query, provider):
    """Whether placement offers ``provider`` for ``query`` (subset rules)."""
    return candidate_test(query)(provider)


def candidate_test(query):
    """:func:`is_candidate` of ``query``, as a function of a provider.

    What the query asks is read once, not once per provider: the kept
    state asks it of every provider at every request.
    """
    in_tree = query.in_tree
    required = query.required | query.root_required
    forbidden = query.forbidden | query.root_forbidden
    forbidden_aggregates = query.forbidden_aggregates
    member_of = query.member_of
    resources = tuple(query.resources.items())
    fits = room.fits_headroom

    def test(provider):
        if in_tree is not None and in_tree != provider.uuid:
            return False
        traits = provider.traits
        if not required <= traits or forbidden & traits:
            return False
        if forbidden_aggregates or member_of:
            aggregates = provider.aggregates
            if forbidden_aggregates & aggregates:
                return False
            for any_of in member_of:
                if not any_of & aggregates:
                    return False
        headroom = provider.headroom()
        for rc, amount in resources:
            rc_room = headroom.get(rc)
            if rc_room is None or not fits(rc_room, amount):
                return False
        return True

    return test


def summary(provider):
    """The provider summary placement gives at :data:`MICROVERSION`.

    Built once per provider object (a ``Provider`` is never changed, only
    replaced) and shared by every answer that offers it: nothing changes
    a summary (Nova's manager only reads them, and merges a fallback's
    into the answer's outer dict).
    """
    cached = provider.__dict__.get('_summary')
    if cached is None:
        usages = provider.usages
        cached = provider.__dict__['_summary'] = {
            'resources': {rc: {'capacity': rc_room.capacity,
                               'used': usages.get(rc, 0)}
                          for rc, rc_room in provider.headroom().items()},
            'traits': sorted(provider.traits),
            'parent_provider_uuid': None,
            'root_provider_uuid': provider.uuid,
        }
    return cached


class AllocationRequest(dict):
    """One allocation request of an answer: a ``dict``, deep-copied fast.

    Nova's manager deep-copies each host's allocation requests for every
    request, as its filters pull the hosts in (``hosts_with_alloc_reqs``:
    ``copy.deepcopy``), 1,000 hosts a request by default. An answer's
    requests hold only dicts, lists, strings and integers, so a plain
    recursive copy (:func:`plain_copy`) gives what ``copy.deepcopy`` gives,
    at under half its cost. It is still a ``dict`` to everything else:
    JSON, ``==``, Nova's ``Selection``.
    """

    __slots__ = ()

    def __deepcopy__(self, memo):
        return AllocationRequest(
            {key: plain_copy(item) for key, item in self.items()})


_ATOMIC = frozenset((str, int, float, bool, type(None)))


def plain_copy(value):
    """A deep copy of JSON-shaped data; ``copy.deepcopy`` of anything else.

    The same values as ``copy.deepcopy``; unlike it, an object met twice
    is copied twice (an answer's requests share none).
    """
    kind = type(value)
    if kind is dict:
        return {key: plain_copy(item) for key, item in value.items()}
    if kind is list:
        return [plain_copy(item) for item in value]
    if kind in _ATOMIC:
        return value
    return copy.deepcopy(value)


def answer(query, providers):
    """``(allocation_requests, provider_summaries)`` of ``query``.

    ``providers``: :class:`~nova_sched_ext.cloud.placement.Provider`
    (with their ``aggregates``), in the order candidates are taken for
    ``limit``.  Raises :class:`OutsideSubset` on a nested or sharing
    provider (before looking at any candidate, so the answer never
    depends on where in the list one is).
    """
    providers = list(providers)
    for provider in providers:
        reason = outside_reason(provider)
        if reason:
            raise OutsideSubset(reason)
    return candidates(query, providers)


def candidates(query, providers):
    """:func:`answer` of providers known to be inside the subset.

    For a caller that checks :func:`outside_reason` once per provider as
    it reads it (:class:`~nova_sched_ext.cloud.provider_state.
    ProviderState`) rather than on every query.
    """
    allocation_requests = []
    summaries = {}
    limit = query.limit
    test = candidate_test(query)
    for provider in providers:
        if limit is not None and len(allocation_requests) >= limit:
            break
        if not test(provider):
            continue
        allocation_requests.append(AllocationRequest(
            allocations={provider.uuid: {
                'resources': dict(query.resources)}},
            mappings={'': [provider.uuid]},
        ))
        summaries[provider.uuid] = summary(provider)
    return allocation_requests, summaries

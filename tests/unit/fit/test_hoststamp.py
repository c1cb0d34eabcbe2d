"""hoststamp: the one "has this host changed since I built it" rule."""

import datetime
from unittest import mock

from nova import objects
from nova.tests.unit.scheduler import fakes

from nova_sched_ext.fit import adapters
from nova_sched_ext.fit import engine
from nova_sched_ext.fit import hoststamp
from tests import base


def host_state(updated=None):
    topology = objects.NUMATopology(cells=[])
    return fakes.FakeHostState('h', 'h', {
        'numa_topology': topology, 'pci_stats': None,
        'cpu_allocation_ratio': 16.0, 'ram_allocation_ratio': 1.5,
        'vcpus_total': 64, 'vcpus_used': 4, 'total_usable_ram_mb': 65536,
        'free_ram_mb': 32768, 'updated': updated})


class TestHostStamp(base.TestCase):

    def assertChanged(self, host, **values):
        recorded = hoststamp.version(host)
        for name, value in values.items():
            setattr(host, name, value)
        self.assertFalse(hoststamp.unchanged(recorded, host), values)

    def test_a_stamped_host_is_unchanged_while_its_stamp_is(self):
        when = datetime.datetime(2026, 1, 1, 12, 0, 0)
        host = host_state(when)
        recorded = hoststamp.version(host)
        # Nova's HostManager before each request: new, equal objects.
        host.numa_topology = objects.NUMATopology(cells=[])
        host.updated = when.replace()
        self.assertTrue(hoststamp.unchanged(recorded, host))
        self.assertEqual(hoststamp.vouching_stamp(recorded),
                         hoststamp.stamp(host))

    def test_each_stamp_field_tells(self):
        when = datetime.datetime(2026, 1, 1, 12, 0, 0)
        for name, value in (
                ('updated', when + datetime.timedelta(seconds=1)),
                ('free_ram_mb', 0), ('vcpus_used', 5),
                ('cpu_allocation_ratio', 4.0),
                ('ram_allocation_ratio', 1.0)):
            host = host_state(when)
            self.assertChanged(host, **{name: value})
            self.assertNotEqual(hoststamp.vouching_stamp(
                hoststamp.version(host_state(when))), hoststamp.stamp(host))

    def test_a_host_without_a_stamp_is_compared_field_by_field(self):
        host = host_state()
        recorded = hoststamp.version(host)
        self.assertIs(hoststamp.NO_STAMP, hoststamp.vouching_stamp(recorded))
        self.assertNotEqual(hoststamp.vouching_stamp(recorded),
                            hoststamp.stamp(host))
        self.assertTrue(hoststamp.unchanged(recorded, host))
        for name, value in (
                ('numa_topology', objects.NUMATopology(cells=[])),
                ('pci_stats', object()), ('vcpus_total', 32),
                ('total_usable_ram_mb', 1024), ('vcpus_used', 0),
                ('updated', datetime.datetime(2026, 1, 1))):
            self.assertChanged(host_state(), **{name: value})

    def test_the_same_nan_is_unchanged(self):
        host = host_state()
        host.cpu_allocation_ratio = float('nan')
        self.assertTrue(hoststamp.unchanged(hoststamp.version(host), host))
        self.assertChanged(host, cpu_allocation_ratio=float('nan'))

    def test_the_filter_cache_uses_the_rule(self):
        host = host_state()
        adapters.prepared_host(host)
        entry = host._nova_sched_ext_fit
        self.assertEqual(hoststamp.version(host), entry[1])
        self.assertIs(hoststamp.NO_STAMP, entry[0])
        # A size the old per-host check did not look at on a host without
        # a stamp.
        host.vcpus_total = 8
        adapters.prepared_host(host)
        self.assertIsNot(entry, host._nova_sched_ext_fit)


class TestPreparedHostsReadsTheStamp(base.TestCase):
    """``adapters.prepared_hosts`` reads the stamp inline, for speed.

    Its tuple must be :data:`hoststamp.STAMP_FIELDS`, in that order: a field
    dropped from it, or added to ``STAMP_FIELDS`` only, fails the first
    test; one read wrongly would fail the second.
    """

    def cached_host(self):
        # Every stamp field a different value, so that a field read in
        # the wrong place cannot compare equal.
        host = host_state(datetime.datetime(2026, 1, 1, 12, 0, 0))
        self.assertEqual(len(hoststamp.STAMP_FIELDS),
                         len(set(map(repr, hoststamp.stamp(host)))))
        adapters.prepared_hosts([host])
        return host, host._nova_sched_ext_fit

    def test_an_unchanged_stamped_host_is_vouched_for_inline(self):
        host, entry = self.cached_host()
        # Nova's HostManager before each request: new, equal objects.
        host.numa_topology = objects.NUMATopology(cells=[])
        host.updated = host.updated.replace()
        with mock.patch.object(
                hoststamp, 'unchanged',
                side_effect=AssertionError('the inline stamp did not match '
                                           'hoststamp.stamp')), \
                mock.patch.object(adapters, '_refresh',
                                  side_effect=AssertionError('rebuilt')):
            prepared = adapters.prepared_hosts([host])
        self.assertIs(entry, host._nova_sched_ext_fit)
        self.assertEqual([entry[2]], prepared)

    def test_a_change_of_any_stamp_field_is_seen(self):
        for name in hoststamp.STAMP_FIELDS:
            host, entry = self.cached_host()
            # Unequal to any value the field had.
            setattr(host, name, object())
            with mock.patch.object(adapters, '_refresh',
                                   return_value=entry) as refresh:
                adapters.prepared_hosts([host])
            reused = not refresh.called
            self.assertEqual(hoststamp.unchanged(entry[1], host), reused,
                             name)
            self.assertFalse(reused, name)


class TestPreparedHostsPerCandidateCount(base.TestCase):
    """A host with several allocation candidates is packed once per count.

    A pinned flavor's hosts each have two candidates (Nova asks placement
    for PCPU and again for VCPU): the model that replays two runs is kept
    beside the host's model, not packed again for every request.
    """

    def host(self, candidates):
        from tests.unit.fit import test_slotcache
        host = test_slotcache.host_state(
            'h', test_slotcache.bench_host(2))
        host.updated = datetime.datetime(2026, 1, 1, 12, 0, 0)
        host.allocation_candidates = [{'mappings': {}}] * candidates
        return host

    def test_the_model_of_a_count_is_packed_once_and_equals_a_fresh_one(self):
        host = self.host(2)
        [first] = adapters.prepared_hosts([host])
        self.assertEqual(2, first.model.candidates)
        entry = host._nova_sched_ext_fit
        self.assertEqual(engine.prepare(entry[2].model._replace(
            candidates=2)), first)
        with mock.patch.object(engine, 'prepare',
                               side_effect=AssertionError('packed again')):
            [again] = adapters.prepared_hosts([host])
        self.assertIs(first, again)
        # One candidate: the host's own model; three: packed once more.
        host.allocation_candidates = [{'mappings': {}}]
        self.assertEqual([entry[2]], adapters.prepared_hosts([host]))
        self.assertEqual(1, entry[2].model.candidates)
        host.allocation_candidates = [{'mappings': {}}] * 3
        [three] = adapters.prepared_hosts([host])
        self.assertEqual(3, three.model.candidates)
        self.assertEqual({2, 3}, set(entry[3]))

    def test_a_changed_host_drops_its_models_per_count(self):
        host = self.host(2)
        [before] = adapters.prepared_hosts([host])
        host.vcpus_used = 40
        [after] = adapters.prepared_hosts([host])
        self.assertIsNot(before, after)
        self.assertEqual(engine.prepare(
            host._nova_sched_ext_fit[2].model._replace(candidates=2)), after)
        self.assertNotEqual(before, after)

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

"""Kept provider state saved to a file, so that a restart reads only changes.

A process that keeps placement's providers
(:class:`~nova_sched_ext.cloud.provider_state.ProviderState`: the
scheduler's kept candidates, the capacity service's kept state) reads
every provider when it starts: four calls each, as placement has no bulk
read, so 5 minutes at 10,000 providers, each process on its own.  With
``kept_state_snapshot_file`` set it saves what it keeps to that file
every ``kept_state_snapshot_interval`` seconds and when it stops; when it
starts again it takes the file (if it is at most
``kept_state_snapshot_max_age`` old), and its first poll reads, as every
poll does, only the providers whose generation placement moved since the
save, that are new, or that went.

**Why the state taken from a file is as safe as one read.**  Placement
moves a provider's generation on every change of its inventories, traits
or aggregates and on every allocation written against it: whatever took
room, or changed what the candidate query reads, since the save is read
again at the first poll.  What placement does not mark is room freed
(``DELETE /allocations``), which a running state learns from the computes;
freed while no process kept the state, it shows as less room than
placement has, never more.  That hides no fit (a request the kept state
cannot place is asked of placement's own query), and the usages resync
(``kept_state_resync_interval``) finds it.  To leave nothing to chance
(a provider deleted and created again with the same UUID can come back at
the generation the file has), every provider taken from the file is also
read again in full in the background, ``kept_state_snapshot_verify_per_poll``
at each poll, until each has been read once.

A file that cannot be used (missing, too old, unreadable, of another
format) costs one line in the log and a full first read, as without it.
A save that fails costs one warning line (the first time for each
reason; the next ones at debug) and the state goes on.  The file is
written whole and then renamed over the old one: processes that share it
(the capacity API's workers) each take a whole file.
"""

import json
import os
import threading
import time

from oslo_log import log as logging

from nova_sched_ext.cloud import placement
from nova_sched_ext import exception

LOG = logging.getLogger(__name__)

#: What the file says it is, and the layout's version.
FORMAT = 'nova-sched-ext kept provider state'
VERSION = 1

_INVENTORY_FIELDS = placement.Inventory._fields


class SnapshotError(exception.NovaSchedExtError, ValueError):
    """A snapshot file that cannot be used; the message says why."""


def encode(providers, saved_at):
    """The JSON-able document of ``providers`` (in their order)."""
    return {
        'format': FORMAT, 'version': VERSION, 'saved_at': saved_at,
        'providers': [{
            'uuid': rp.uuid, 'name': rp.name, 'parent': rp.parent_uuid,
            'generation': rp.generation,
            'inventories': {rc: list(inv)
                            for rc, inv in rp.inventories.items()},
            'usages': dict(rp.usages),
            'traits': sorted(rp.traits),
            'aggregates': sorted(rp.aggregates)}
            for rp in providers]}


def decode(document):
    """``(saved_at, [Provider])`` of a document :func:`encode` made.

    :raises SnapshotError: it is not one
    """
    if not isinstance(document, dict) or document.get('format') != FORMAT:
        raise SnapshotError('not a kept provider state file')
    if document.get('version') != VERSION:
        raise SnapshotError('layout version %r, this release reads %d'
                            % (document.get('version'), VERSION))
    try:
        saved_at = float(document['saved_at'])
        providers = [placement.Provider(
            uuid=str(rp['uuid']), name=rp['name'],
            parent_uuid=rp['parent'],
            inventories={
                str(rc): placement.Inventory(**dict(zip(
                    _INVENTORY_FIELDS, _inventory_values(values))))
                for rc, values in rp['inventories'].items()},
            usages={str(rc): int(used)
                    for rc, used in rp['usages'].items()},
            traits=frozenset(str(t) for t in rp['traits']),
            aggregates=frozenset(str(a) for a in rp['aggregates']),
            generation=(None if rp['generation'] is None
                        else int(rp['generation'])))
            for rp in document['providers']]
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise SnapshotError('damaged (%s: %s)'
                            % (type(exc).__name__, exc)) from None
    return saved_at, providers


def _inventory_values(values):
    if len(values) != len(_INVENTORY_FIELDS):
        raise ValueError('an inventory of %d values' % len(values))
    return [int(value) for value in values[:-1]] + [float(values[-1])]


class Snapshot(object):
    """One kept state's snapshot file, as its section's options set it.

    :param path: the file
    :param interval: seconds between two saves while polling
    :param max_age: seconds after its save past which a file is not taken
    :param verify_per_poll: providers taken from the file read again in
        full at each poll (0: none)
    :param what: the state's name in log lines, e.g. ``'Kept provider
        state'``
    """

    def __init__(self, path, interval, max_age, verify_per_poll, what,
                 wall_clock=time.time, clock=time.monotonic):
        self.path = path
        self.interval = interval
        self.max_age = max_age
        self.verify_per_poll = verify_per_poll
        self._what = what
        self._wall_clock = wall_clock
        self._clock = clock
        self._saved_at = None
        self._save_lock = threading.Lock()
        self._failures_told = set()

    @classmethod
    def from_options(cls, opts, what, **clocks):
        """The snapshot a section's options ask for, or None (no file)."""
        if not opts.kept_state_snapshot_file:
            return None
        return cls(opts.kept_state_snapshot_file,
                   opts.kept_state_snapshot_interval,
                   opts.kept_state_snapshot_max_age,
                   opts.kept_state_snapshot_verify_per_poll, what, **clocks)

    def load(self):
        """The providers of the file, or None when it cannot be used.

        One line says which (info when there is no file yet, a warning
        otherwise); the caller then reads every provider.
        """
        try:
            with open(self.path, 'rb') as stream:
                document = json.load(stream)
            saved_at, providers = decode(document)
        except FileNotFoundError:
            LOG.info('%s: no snapshot at %s yet; reading every provider.',
                     self._what, self.path)
            return None
        except (OSError, ValueError) as exc:
            # json's decoding errors and SnapshotError are ValueErrors
            LOG.warning('%s: snapshot %s not used (%s); reading every '
                        'provider.', self._what, self.path, exc)
            return None
        age = self._wall_clock() - saved_at
        if age > self.max_age:
            LOG.info('%s: snapshot %s is %d s old, older than '
                     'kept_state_snapshot_max_age (%d s); reading every '
                     'provider.', self._what, self.path, age, self.max_age)
            return None
        LOG.info('%s: took %d provider(s) from snapshot %s (%d s old); the '
                 'first poll reads those placement changed since.',
                 self._what, len(providers), self.path, max(age, 0))
        # A save counts from now: the state is the file's until a poll.
        self._saved_at = self._clock()
        return providers

    def due(self):
        """Whether a save is due (never saved, or ``interval`` ago)."""
        return (self._saved_at is None or
                self._clock() - self._saved_at >= self.interval)

    def save(self, providers):
        """Write ``providers`` to the file now; False if it failed.

        A save that failed is tried again an ``interval`` later, not at
        the next poll: encoding the state costs about a second at 10,000
        providers.
        """
        with self._save_lock:
            started = self._clock()
            temporary = '%s.%d.tmp' % (self.path, os.getpid())
            try:
                data = json.dumps(encode(providers, self._wall_clock()),
                                  separators=(',', ':')).encode('utf-8')
                descriptor = os.open(
                    temporary, os.O_WRONLY | os.O_CREAT | os.O_TRUNC, 0o640)
                with os.fdopen(descriptor, 'wb') as stream:
                    stream.write(data)
                os.replace(temporary, self.path)
            except (OSError, TypeError, ValueError) as exc:
                self._saved_at = self._clock()
                self._tell_failure(exc)
                _remove_quietly(temporary)
                return False
            self._saved_at = self._clock()
            LOG.debug('%s: saved %d provider(s) to %s in %.2f s.',
                      self._what, len(providers), self.path,
                      self._saved_at - started)
            return True

    def _tell_failure(self, exc):
        reason = '%s: %s' % (type(exc).__name__,
                             getattr(exc, 'strerror', None) or exc)
        log = LOG.debug if reason in self._failures_told else LOG.warning
        self._failures_told.add(reason)
        log('%s: cannot save the snapshot %s (%s); the state goes on '
            'without it (check kept_state_snapshot_file).', self._what,
            self.path, reason)


def _remove_quietly(path):
    try:
        os.unlink(path)
    except OSError:
        pass

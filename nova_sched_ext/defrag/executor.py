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

"""Apply a plan: live migrations one at a time, each checked again first.

The cloud may have changed since the plan was made, so before each move
the executor reads it again (``read_cloud()``, a :class:`~.model.Cloud`)
and checks the move as the planner did (:mod:`.validity` and Nova's NUMA
fit on the target); a move that no longer holds is skipped with its
reason.  A move is the Compute API's live migration to the planned host
(openstacksdk's ``live_migrate_server``); after it the server must be
ACTIVE, with no task state, on the planned host.  The first failure stops
the run: every move before it stays in place, and the outcome says where
it stopped.  A run can be resumed with the same plan: a move whose
instance is already on its target counts as done.
"""

import time
import typing

from oslo_log import log as logging

from nova_sched_ext.defrag import model
from nova_sched_ext.defrag import planner
from nova_sched_ext.defrag import state as planning_state
from nova_sched_ext.defrag import validity

LOG = logging.getLogger(__name__)

DONE, ALREADY, SKIPPED, FAILED, WOULD = (
    'moved', 'already there', 'skipped', 'failed', 'would move')


class PlanFileError(model.PlanError):
    """A plan file that cannot be applied; the message is one line."""


def load_plan(path):
    """The moves of a plan file (``Plan.to_dict()`` as JSON)."""
    plan = model.read_document(path, planner.FORMAT, 'plan file',
                               'a plan of nova-sched-ext-defrag',
                               PlanFileError)
    moves = plan.get('moves')
    if not isinstance(moves, list):
        raise PlanFileError('plan file %s has no list of moves' % path)
    for number, move in enumerate(moves):
        if not isinstance(move, dict) or not all(
                isinstance(move.get(key), str)
                for key in ('instance', 'source', 'target')):
            raise PlanFileError('plan file %s: move %d lacks an instance, '
                                'source or target' % (path, number + 1))
    return moves


class Step(typing.NamedTuple):
    number: int
    instance: str
    source: str
    target: str
    status: str
    reason: str = ''


class Outcome(typing.NamedTuple):
    steps: list
    #: the number (1-based) of the move that failed, or None
    stopped_at: typing.Optional[int]

    @property
    def moved(self):
        return sum(1 for s in self.steps if s.status == DONE)


class Executor(object):

    def __init__(self, compute, read_cloud, wait_timeout=600,
                 poll_interval=5, progress=None, sleep=time.sleep,
                 clock=time.monotonic):
        """Apply plans on the cloud ``read_cloud()`` reads.

        :param compute: openstacksdk's compute proxy (``connection.compute``)
        :param read_cloud: a callable returning the cloud now
        :param progress: called with each :class:`Step` as it finishes
        """
        self.compute = compute
        self.read_cloud = read_cloud
        self.wait_timeout = wait_timeout
        self.poll_interval = poll_interval
        self.progress = progress or (lambda step: None)
        self.sleep = sleep
        self.clock = clock

    def check_names(self, moves, cloud):
        """Refuse, before anything moves, a plan naming what is not there."""
        for number, move in enumerate(moves, 1):
            if move['instance'] not in cloud.instances:
                raise PlanFileError('move %d: no instance %s in the cloud'
                                    % (number, move['instance']))
            for key in ('source', 'target'):
                if move[key] not in cloud.hosts:
                    raise PlanFileError('move %d: no host %s (its %s) in '
                                        'the cloud' % (number, move[key],
                                                       key))

    def why_not_now(self, move, cloud):
        """None if the move holds on the cloud as it is now, else why."""
        state = planning_state.PlanningState(cloud, ())
        instance = cloud.instances[move['instance']]
        groups = validity.GroupIndex(cloud)
        if state.where[instance.uuid] != move['source']:
            return 'it is on %s now, not on %s' % (
                state.where[instance.uuid], move['source'])
        why = validity.why_unmovable(state, instance, model.NeverMove(),
                                     groups) or \
            validity.why_not_target(state, instance, move['target'], groups)
        if why:
            return why
        fits, _fitted = state.nova_fit(instance.uuid, move['target'])
        if not fits:
            return ("the target no longer takes it: Nova's NUMA fit finds "
                    'no cells for it there')
        return None

    def apply(self, moves, dry_run=False):
        """Apply ``moves`` (from :func:`load_plan`) in order."""
        self.check_names(moves, self.read_cloud())
        steps = []
        for number, move in enumerate(moves, 1):
            cloud = self.read_cloud()
            step = self._one(number, move, cloud, dry_run)
            steps.append(step)
            self.progress(step)
            if step.status == FAILED:
                return Outcome(steps, number)
        return Outcome(steps, None)

    def _one(self, number, move, cloud, dry_run):
        def step(status, reason=''):
            return Step(number, move['instance'], move['source'],
                        move['target'], status, reason)
        instance = cloud.instances.get(move['instance'])
        if instance is None:
            return step(SKIPPED, 'the instance is gone')
        if instance.host == move['target']:
            return step(ALREADY)
        why = self.why_not_now(move, cloud)
        if why:
            LOG.info('Defragmentation: move %d of %s skipped: %s',
                     number, move['instance'], why)
            return step(SKIPPED, why)
        if dry_run:
            return step(WOULD)
        try:
            self.compute.live_migrate_server(
                move['instance'], host=move['target'],
                block_migration='auto')
        except Exception as exc:  # openstacksdk raises many kinds
            return step(FAILED, 'the Compute API refused the live '
                        'migration: %s' % _one_line(exc))
        return self._wait(move, step)

    def _wait(self, move, step):
        deadline = self.clock() + self.wait_timeout
        while True:
            try:
                server = self.compute.get_server(move['instance'])
            except Exception as exc:
                return step(FAILED, 'cannot read the server: %s'
                            % _one_line(exc))
            status = getattr(server, 'status', None)
            task_state = getattr(server, 'task_state', None)
            host = getattr(server, 'compute_host', None)
            if status == 'ERROR':
                return step(FAILED, 'the server went to ERROR')
            if status == 'ACTIVE' and not task_state:
                if host == move['target']:
                    return step(DONE)
                return step(FAILED, 'the migration ended with the server '
                            'on %s, not on %s' % (host, move['target']))
            if self.clock() >= deadline:
                return step(FAILED, 'the server is still %s (task %s) after '
                            '%d s' % (status, task_state, self.wait_timeout))
            self.sleep(self.poll_interval)


def _one_line(exc):
    return ' '.join(str(exc).split()) or type(exc).__name__

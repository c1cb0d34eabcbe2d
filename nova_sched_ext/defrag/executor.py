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

The executor reads the whole cloud once (``read_cloud()``, a
:class:`~.model.Cloud`) into a picture (a
:class:`~.state.PlanningState`) and keeps that picture current with its
own moves (a finished move puts its instance on its target).  The cloud
may have changed since the plan was made, and changes beside the
executor, so before each move it reads again what the move touches
(``read_cloud(hosts=[...])``: its source, its target and the host the
picture has the instance on, with the instances on them) and checks the
move on those fresh facts as the planner did (:mod:`.validity`, the
never-move lists, and Nova's NUMA fit on the target); a move that no
longer holds is skipped with its reason.  A move whose instance this
run has put on its target already is done, unread.  What a move does
not touch (a deployment set's members on other hosts) is as the picture
has it; Nova's scheduler checks the destination of every live migration
as well.

A move is the Compute API's live migration to the planned host
(openstacksdk's ``live_migrate_server``); after it the server must be
ACTIVE, with no task state, on the planned host, and its migration record
completed (Nova frees the source's room only then).  The first failure
stops the run: every move before it stays in place, and the outcome says
where it stopped.  A run can be resumed with the same plan: a move whose
instance is already on its target counts as done.

A dry run reads the cloud once and plays each move that would be made on
the picture, in order, so that a later move is checked against the cloud
the earlier ones would leave (a plan listing a move twice would make it
once, the second time it is already there).
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
#: Migration record states of a live migration that did not complete.
ENDED_BADLY = ('error', 'failed', 'cancelled')


class PlanFileError(model.PlanError):
    """A plan file that cannot be applied; the message is one line."""


class PlanFile(typing.NamedTuple):
    """What ``apply`` takes from a plan file."""

    moves: list
    #: the never-move list the plan was made with (checked again)
    never_move: model.NeverMove


def _strings(value):
    return isinstance(value, list) and all(isinstance(v, str) for v in value)


def read_plan(path, ignore_checksum=False):
    """The :class:`PlanFile` of a plan file (``Plan.to_dict()`` as JSON).

    A plan whose checksum is missing (a plan of an older version, or one
    written by hand) or does not match its content (edited since ``plan``
    wrote it) is refused, unless ``ignore_checksum``.
    """
    plan = model.read_document(path, planner.FORMAT, 'plan file',
                               'a plan of nova-sched-ext-defrag',
                               PlanFileError)
    checksum = plan.get(model.CHECKSUM)
    if checksum is None:
        problem = 'has no checksum: it was written by hand or by an older ' \
            'nova-sched-ext-defrag plan'
    elif checksum != model.plan_checksum(plan):
        problem = 'does not match its checksum: it was changed after ' \
            'nova-sched-ext-defrag plan wrote it'
    else:
        problem = None
    if problem and not ignore_checksum:
        raise PlanFileError('plan file %s %s; run plan again, or apply it '
                            'as it is with --ignore-checksum'
                            % (path, problem))
    if problem:
        LOG.warning('Defragmentation: plan file %s %s; applied as asked '
                    '(--ignore-checksum), every move checked against the '
                    'cloud first.', path, problem)
    moves = plan.get('moves')
    if not isinstance(moves, list):
        raise PlanFileError('plan file %s has no list of moves' % path)
    for number, move in enumerate(moves):
        if not isinstance(move, dict) or not all(
                isinstance(move.get(key), str)
                for key in ('instance', 'source', 'target')):
            raise PlanFileError('plan file %s: move %d lacks an instance, '
                                'source or target' % (path, number + 1))
    never_move = plan.get('never_move', {})
    if not isinstance(never_move, dict) or not all(
            _strings(never_move.get(key, []))
            for key in ('instances', 'projects')):
        raise PlanFileError('plan file %s: its never_move is not lists of '
                            'instances and projects' % path)
    return PlanFile(moves, model.NeverMove(
        instances=frozenset(never_move.get('instances', ())),
        projects=frozenset(never_move.get('projects', ()))))


def load_plan(path, ignore_checksum=False):
    """The moves of a plan file (:func:`read_plan`)."""
    return read_plan(path, ignore_checksum).moves


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
                 clock=time.monotonic, never_move=None):
        """Apply plans on the cloud ``read_cloud()`` reads.

        :param compute: openstacksdk's compute proxy (``connection.compute``)
        :param read_cloud: a callable returning the cloud now; with
            ``hosts`` (a list of host names), only those hosts, the
            instances on them and their groups (:func:`~.model.part_of`)
        :param progress: called with each :class:`Step` as it finishes
        :param never_move: a :class:`~.model.NeverMove` (the plan's): a
            move of such an instance is skipped
        """
        self.compute = compute
        self.read_cloud = read_cloud
        self.wait_timeout = wait_timeout
        self.poll_interval = poll_interval
        self.progress = progress or (lambda step: None)
        self.sleep = sleep
        self.clock = clock
        self.never_move = never_move or model.NeverMove()
        #: ``{instance: target}`` of the moves this run has made
        self._moved = {}

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

    def why_not_now(self, move, state):
        """None if the move holds on the picture ``state`` now, else why."""
        uuid = move['instance']
        where = state.where.get(uuid)
        if where is None:
            return 'it is on neither %s nor %s now' % (move['source'],
                                                       move['target'])
        if where != move['source']:
            return 'it is on %s now, not on %s' % (where, move['source'])
        instance = state.cloud.instances[uuid]
        groups = validity.GroupIndex(state.cloud)
        why = validity.why_unmovable(state, instance, self.never_move,
                                     groups) or \
            validity.why_not_target(state, instance, move['target'], groups)
        if why:
            return why
        fits, _fitted = state.nova_fit(uuid, move['target'])
        if not fits:
            return ("the target no longer takes it: Nova's NUMA fit finds "
                    'no cells for it there')
        return None

    def account(self, state, move):
        """Play a move a dry run would make on the picture.

        As the planner plays one: Nova's fit on the target and Nova's
        usage accounting on both hosts, for the moves after it.
        """
        fits, fitted = state.nova_fit(move['instance'], move['target'])
        state.apply(move['instance'], move['target'],
                    fitted if fits else None)
        state.settle()

    def apply(self, moves, dry_run=False, parallel=1):
        """Apply ``moves`` (from :func:`load_plan`) in order.

        :param parallel: at most this many live migrations at once; a
            batch is consecutive moves that share no host and no server
            group, so that none can change what another was checked
            against.  A failure stops the run once its batch has ended.
        """
        if parallel < 1:
            raise model.PlanError('the number of migrations at once must '
                                  'be at least 1, not %d' % parallel)
        cloud = self.read_cloud()
        self.check_names(moves, cloud)
        state = planning_state.PlanningState(cloud, ())
        self._moved = {}
        steps = []
        number = 0
        while number < len(moves):
            batch = _batch(moves, number, parallel, state.cloud)
            if number and not dry_run:
                self._read_again(batch, state)
            finished = self._batch(batch, state, dry_run)
            steps.extend(finished)
            failed = [s.number for s in finished if s.status == FAILED]
            if failed:
                return Outcome(steps, min(failed))
            number += len(batch)
        return Outcome(steps, None)

    def _read_again(self, batch, state):
        """Read again the hosts the batch's moves touch, into the picture.

        Not for a move whose instance this run has put on its target
        already: the picture has it there from the Compute API's word.
        """
        hosts = set()
        for _number, move in batch:
            if self._moved.get(move['instance']) == move['target']:
                continue
            hosts.update((move['source'], move['target']))
            where = state.where.get(move['instance'])
            if where is not None:
                hosts.add(where)
        if hosts:
            state.refresh(self.read_cloud(hosts=sorted(hosts)))

    def _batch(self, batch, state, dry_run):
        """The steps of a batch of ``(number, move)``, in their order."""
        finished, started = [], []
        for number, move in batch:
            step = self._start(number, move, state, dry_run)
            if step is None:
                started.append((number, move))
            else:
                finished.append(step)
                self.progress(step)
        finished.extend(self._wait(started))
        for step in finished:
            if step.status == DONE:
                # Every later move that touches its hosts reads them
                # again: the picture needs only where the instance is.
                state.relocate(step.instance, step.target)
                self._moved[step.instance] = step.target
        return sorted(finished, key=lambda s: s.number)

    def _start(self, number, move, state, dry_run):
        """None once the migration is under way, else the move's step."""
        def step(status, reason=''):
            return _step(number, move, status, reason)
        if state.where.get(move['instance']) == move['target']:
            return step(ALREADY)
        why = self.why_not_now(move, state)
        if why:
            LOG.info('Defragmentation: move %d of %s skipped: %s',
                     number, move['instance'], why)
            return step(SKIPPED, why)
        if dry_run:
            self.account(state, move)
            return step(WOULD)
        try:
            self.compute.live_migrate_server(
                move['instance'], host=move['target'],
                block_migration='auto')
        except Exception as exc:  # openstacksdk raises many kinds
            return step(FAILED, 'the Compute API refused the live '
                        'migration: %s' % _one_line(exc))
        return None

    def _wait(self, started):
        """The steps of the migrations ``started``, as each one ends."""
        deadline = self.clock() + self.wait_timeout
        pending = list(started)
        finished = []
        while pending:
            for number, move in list(pending):
                step = self._poll(number, move, self.clock() >= deadline)
                if step is not None:
                    pending.remove((number, move))
                    finished.append(step)
                    self.progress(step)
            if pending:
                self.sleep(self.poll_interval)
        return finished

    def _poll(self, number, move, late):
        """The step of a migration that ended, or None while it runs."""
        def step(status, reason=''):
            return _step(number, move, status, reason)
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
            if host != move['target']:
                return step(FAILED, 'the migration ended with the server '
                            'on %s, not on %s' % (host, move['target']))
            record = self._migration_status(move)
            if record in (None, 'completed'):
                return step(DONE)
            if record in ENDED_BADLY:
                return step(FAILED, 'the server is on %s, but its migration '
                            'ended %s' % (host, record))
        if late:
            return step(FAILED, 'the server is still %s (task %s) after '
                        '%d s' % (status, task_state, self.wait_timeout))
        return None

    def _migration_status(self, move):
        """The status of the move's live-migration record, None if unlisted.

        The server is ACTIVE on its target before Nova is done at the
        source: there, ``_post_live_migration`` frees the instance's NUMA
        cells, marks the migration ``completed`` and only then deletes
        the source's allocation.  Until then the room the move was for is
        not free, so a move is done when its record is completed.
        """
        try:
            records = [
                m for m in self.compute.migrations(
                    server_id=move['instance'],
                    migration_type='live-migration')
                if getattr(m, 'dest_compute', None) == move['target'] and
                getattr(m, 'server_id', move['instance']) == move['instance']]
        except Exception as exc:  # openstacksdk raises many kinds
            LOG.warning('Defragmentation: cannot list the migrations of %s, '
                        'counting the move done by the server alone: %s',
                        move['instance'], _one_line(exc))
            return None
        if not records:
            return None
        return max(records, key=lambda m: m.id or 0).status


def _step(number, move, status, reason=''):
    return Step(number, move['instance'], move['source'], move['target'],
                status, reason)


def _batch(moves, first, most, cloud):
    """``[(number, move)]``: the moves from ``first`` to run at once.

    Consecutive, at most ``most``, no host or server group twice.
    """
    batch, hosts, groups = [], set(), set()
    for index in range(first, min(len(moves), first + most)):
        move = moves[index]
        instance = cloud.instances.get(move['instance'])
        group = instance.group if instance is not None else None
        touched = {move['source'], move['target']}
        if batch and (touched & hosts or (group and group in groups)):
            break
        batch.append((index + 1, move))
        hosts |= touched
        if group:
            groups.add(group)
    return batch


def _one_line(exc):
    return ' '.join(str(exc).split()) or type(exc).__name__

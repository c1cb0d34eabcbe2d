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

"""The coordination backend that every scheduler process shares.

Several ``nova-sched-ext-scheduler`` processes, on several hosts and each
with several workers, keep the package's guarantees only through one
shared backend:

- the lock of a deployment set
  (:mod:`nova_sched_ext.deployment_set.lock`);
- the lock around the count-and-claim of a preemptible request, and the
  preemptible placements the cells do not show yet
  (:mod:`nova_sched_ext.preemption.caps`);
- the record of every eviction in progress, which another scheduler rolls
  back when its owner dies (:mod:`nova_sched_ext.preemption.journal`).

The backend is the `tooz <https://docs.openstack.org/tooz/>`_ URL of
``[nova_sched_ext] coordination_url`` (``redis://host:6379`` is the
tested one for several hosts), or, unset, the file backend in
``deployment_set_lock_dir`` (the scheduler processes of one host only).
Locks are tooz locks, on any backend tooz has.  Records live beside them:
on redis a hash per kind of record and one key with a time to live per
*lease* (redis's own clock expires it, so the schedulers' clocks do not
matter); with the file backend, one JSON file per record.  Other tooz
backends hold locks only (:class:`BackendUnsupported` for records).

A record has a lease held by the scheduler process that wrote it: while
the process lives it renews the lease (:meth:`Backend.put` with
``keep_alive``); when the process dies the lease runs out, and another
process may :meth:`~Backend.take_over` the record, which succeeds for one
process only.  Updates and deletions by the owner check, atomically, that
nobody took the record over.

Outages: the first failure of the backend marks it down and logs one
ERROR line; while it is down every use fails at once with
:class:`CoordinationBackendUnavailable` (no request waits on a dead
backend), and a thread probes it every :data:`PROBE_INTERVAL` seconds;
the first answer logs one INFO line and lifts the mark.  What a failure
refuses is the caller's choice: the deployment-set lock, the preemptible
caps and the eviction refuse their requests with NoValidHost; requests
that need none of them never touch the backend.

The package's modules, one concern each:

- :mod:`~nova_sched_ext.coordination.backend`: :class:`Backend`, one
  scheduler manager's use of it (:func:`for_manager`), and the check at
  start (:func:`check_at_start`);
- :mod:`~nova_sched_ext.coordination.locks`: the tooz locks;
- :mod:`~nova_sched_ext.coordination.leases`: records with leases, and
  the heartbeat that renews them;
- :mod:`~nova_sched_ext.coordination.records`: the record stores (redis,
  files);
- :mod:`~nova_sched_ext.coordination.outage`: an outage noted, refused
  and probed;
- :mod:`~nova_sched_ext.coordination.common`: the backend's URL and the
  redis client's options;
- :mod:`~nova_sched_ext.coordination.exception`: the errors.

The names the rest of the package uses are imported here: this module's
path is the one to import.  tooz's private client factory is reached
through :mod:`nova_sched_ext.compat.tooz` only.
"""


from nova_sched_ext.coordination.backend import Backend  # noqa: F401
from nova_sched_ext.coordination.backend import check_at_start  # noqa: F401
from nova_sched_ext.coordination.backend import for_manager  # noqa: F401
from nova_sched_ext.coordination.common import backend_url  # noqa: F401
from nova_sched_ext.coordination.common import REDIS_CONNECT_TIMEOUT  # noqa
from nova_sched_ext.coordination.common import safe_url  # noqa: F401
from nova_sched_ext.coordination.exception import BackendUnavailable  # noqa
from nova_sched_ext.coordination.exception import CoordinationBackendUnavailable  # noqa
from nova_sched_ext.coordination.exception import BackendUnsupported  # noqa
from nova_sched_ext.coordination.exception import BackendUnusable  # noqa
from nova_sched_ext.coordination.exception import LockTimeout  # noqa: F401
from nova_sched_ext.coordination.exception import LockUnavailable  # noqa
from nova_sched_ext.coordination.leases import HEARTBEAT_INTERVAL  # noqa
from nova_sched_ext.coordination.outage import PROBE_INTERVAL  # noqa: F401
from nova_sched_ext.coordination.records import FileRecords  # noqa: F401
from nova_sched_ext.coordination.records import has_records  # noqa: F401
from nova_sched_ext.coordination.records import RedisRecords  # noqa: F401
from nova_sched_ext.coordination.records import REDIS_NAMESPACE  # noqa

"""The NUMA fit engine: does an instance NUMA topology fit on a host?

* :mod:`~nova_sched_ext.fit.model`: the compact host / request model.
* :mod:`~nova_sched_ext.fit.adapters`: builds it from Nova's ``HostState``
  and ``RequestSpec`` (cached per host topology).
* :mod:`~nova_sched_ext.fit.hoststamp`: whether a ``HostState`` changed
  since its model was built, for every cache of those models.
* :mod:`~nova_sched_ext.fit.engine`: ``check_hosts`` answers YES / NO /
  UNKNOWN for many hosts in one call, in C (``_c/cfit.c`` through cffi) or in
  the pure-Python twin :mod:`~nova_sched_ext.fit.pyfit`.
* :mod:`~nova_sched_ext.fit.lowlevel`: the only module that imports the
  compiled C helper: one function per C entry point, one exception.

Contract: inside the supported subset (see ``doc/source/numa_fit.rst``) the
answer equals ``nova.virt.hardware.numa_fit_instance_to_host(...) is not
None``; outside it the answer is UNKNOWN, never NO.
"""

from nova_sched_ext.fit.model import NO  # noqa: F401
from nova_sched_ext.fit.model import UNKNOWN  # noqa: F401
from nova_sched_ext.fit.model import YES  # noqa: F401

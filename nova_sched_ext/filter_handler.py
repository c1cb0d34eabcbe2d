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

"""Nova's filter handler and host loop, without their per-host overhead.

The kept host manager (:mod:`nova_sched_ext.host_state`) filters with
these; they give what Nova's give, host for host and line for line.

* :class:`QuietHostFilterHandler`: Nova's ``BaseFilterHandler.
  get_filtered_objects`` (Nova 31 to 34) keeps, after every filter, a
  list of ``(host, nodename)`` of every host left, read by one debug line
  only, whether DEBUG is on or not: 1,000 hosts and seven filters make
  14,000 attribute reads a request. With ``nova.filters`` logging at
  DEBUG, Nova's own method runs; otherwise the same loop, the same INFO
  lines, without that list.
* :func:`one_pass_filter_all`: Nova's ``BaseHostFilter._filter_one``
  asks ``request_is_rebuild(spec_obj)`` (an object-field test and a dict
  lookup) once per host and filter. For a filter that keeps Nova's host
  loop (:func:`nova_sched_ext.compat.nova.runs_novas_host_loop`), the
  question is asked once per request: no filter changes the request's
  scheduler hints, so the answer is the same for every host.
"""

import logging

from nova import filters as nova_filters
from nova.scheduler import filters as host_filters
from nova.scheduler import utils as scheduler_utils

from nova_sched_ext.compat import nova as nova_compat

#: Nova's handler logs to it (its operators' logging configuration names
#: it): so does this one
_LOG = logging.getLogger(nova_filters.__name__)
_LOG_MSG = "%(cls_name)s: (start: %(start)s, end: %(end)s)"
_ALL_REMOVED = ("Filtering removed all hosts for the request with "
                "instance ID '%(inst_uuid)s'. Filter results: "
                "%(str_results)s")


class QuietHostFilterHandler(host_filters.HostFilterHandler):
    """Nova's host filter handler, without the debug-only host lists."""

    def get_filtered_objects(self, filters, objs, spec_obj, index=0):
        if _LOG.isEnabledFor(logging.DEBUG):
            return super().get_filtered_objects(filters, objs, spec_obj,
                                                index)
        list_objs = list(objs)
        part_filter_results = []
        for filter_ in filters:
            if not filter_.run_filter_for_index(index):
                continue
            cls_name = filter_.__class__.__name__
            start_count = len(list_objs)
            objs = filter_.filter_all(list_objs, spec_obj)
            if objs is None:
                return None
            list_objs = list(objs)
            part_filter_results.append(_LOG_MSG % {
                'cls_name': cls_name, 'start': start_count,
                'end': len(list_objs)})
            if not list_objs:
                _LOG.info("Filter %s returned 0 hosts", cls_name)
                break
        if not list_objs:
            _LOG.info(_ALL_REMOVED, {
                'inst_uuid': spec_obj.instance_uuid,
                'str_results': str(part_filter_results)})
        return list_objs


def one_pass_filter_all(host_filter):
    """``host_filter.filter_all`` asking whether it is a rebuild once.

    Only for a filter :func:`~nova_sched_ext.compat.nova.
    runs_novas_host_loop` vouches for: its hosts are decided by
    ``host_passes`` alone, every host passing on a rebuild unless the
    filter has ``RUN_ON_REBUILD``. A generator, as Nova's.
    """
    def filter_all(filter_obj_list, spec_obj):
        if (not host_filter.RUN_ON_REBUILD and
                scheduler_utils.request_is_rebuild(spec_obj)):
            yield from filter_obj_list
            return
        host_passes = host_filter.host_passes
        for obj in filter_obj_list:
            if host_passes(obj, spec_obj):
                yield obj

    return filter_all


def quicken(host_manager):
    """Filter ``host_manager``'s requests with the quiet handler and loop.

    Its handler when it is Nova's own, and each enabled filter that keeps
    Nova's host loop; anything else is left as it is.
    """
    handler = getattr(host_manager, 'filter_handler', None)
    if type(handler) is host_filters.HostFilterHandler:
        # Nova's loader finds filters next to the handler's module:
        # turned, not made
        handler.__class__ = QuietHostFilterHandler
    for host_filter in getattr(host_manager, 'enabled_filters', ()):
        if nova_compat.runs_novas_host_loop(host_filter):
            host_filter.filter_all = one_pass_filter_all(host_filter)

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

"""The capacity API: a read-only JSON view of the NUMA-exact capacity.

Routes:

``GET /``
    The version document (public).
``GET /v1``
    The document of version 1.
``GET /v1/capacity``
    The capacity report of :func:`nova_sched_ext.capacity.compute` as JSON.
    Query parameters: ``flavor`` (repeatable; default every flavor),
    ``by`` (one of :data:`~nova_sched_ext.conf.capacity.SCOPES`,
    default ``cloud``), ``az``, ``aggregate``, ``per_host`` and ``fresh``
    (booleans).

Errors are JSON (``{"errors": [{"status", "title", "detail",
"request_id"}]}``): 400 for a bad query (including an unknown flavor, zone
or aggregate the count reports), 401 without a valid token, 403 without
one of ``[nova_sched_ext_capacity] allowed_roles``, 503 with
``Retry-After`` when a backend (database, placement) cannot be reached or
the count outlasts ``api_answer_timeout``, 500 for anything else. The
``detail`` of a 500 or 503 is a fixed line: what the backend or library
said (host names, URLs) goes to the service log only.

A count reads every host of the scope, so reports are kept per query (the
flavors sorted and deduplicated) for ``refresh_interval`` seconds, and
concurrent requests for the same query wait for one count instead of each
starting their own. The count runs in a thread of its own: a request waits
for it at most ``api_answer_timeout`` seconds.

With ``[nova_sched_ext_capacity] kept_state`` the report comes from the
state the service keeps current (:mod:`~nova_sched_ext.capacity.kept`),
counted in the request's thread in milliseconds, its ``Age`` the seconds
since the poll it reflects started; ``fresh=true``, and every query while
the kept state is not ready or too old, are counted in full as above.

This module holds the WSGI application only; :mod:`.wsgi` reads the
configuration and wraps it in keystonemiddleware.
"""

import collections
from concurrent import futures
import json
import threading
import time

from keystoneauth1 import exceptions as ks_exc
from oslo_db import exception as db_exc
from oslo_log import log as logging
import webob
import webob.dec

from nova_sched_ext.capacity import errors
from nova_sched_ext.conf import capacity as capacity_conf
from nova_sched_ext import exception as sched_ext_exception

LOG = logging.getLogger(__name__)

VERSION = 'v1'

#: query parameters of GET /v1/capacity
QUERY_PARAMETERS = ('flavor', 'by', 'az', 'aggregate', 'per_host', 'fresh')

_TRUE = ('1', 'true', 'yes', 'on')
_FALSE = ('0', 'false', 'no', 'off')

#: Retry-After (seconds) of a 503 for a backend that cannot be reached
RETRY_AFTER_UNAVAILABLE = 30
#: Retry-After (seconds) of a 503 for a count that goes on
RETRY_AFTER_COUNTING = 10


class CountUnderWay(sched_ext_exception.NovaSchedExtError):
    """The count did not finish in time; it goes on."""


class HTTPError(sched_ext_exception.NovaSchedExtError):
    """An error answer; the message is its one-line ``detail``."""

    def __init__(self, status, title, detail, headers=None):
        super().__init__(detail)
        self.status = status
        self.title = title
        self.detail = detail
        self.headers = headers or {}


def _unavailable_errors():
    """Exceptions that mean a backend is unreachable, not a bad request."""
    from nova import exception as nova_exc
    errors = (db_exc.DBConnectionError, ks_exc.ConnectionError,
              ks_exc.EndpointNotFound, ks_exc.ServiceUnavailable,
              ks_exc.GatewayTimeout, ks_exc.BadGateway,
              nova_exc.PlacementAPIConnectFailure)
    return errors + tuple(getattr(nova_exc, name) for name in (
        'CellTimeout', 'ResourceProviderRetrievalFailed')
        if hasattr(nova_exc, name))


def _one_line(exc):
    text = str(exc).strip() or type(exc).__name__
    return text.splitlines()[0]


Query = collections.namedtuple(
    'Query', ['flavors', 'by', 'az', 'aggregate', 'per_host'])


class ReportCache:
    """Reports by query, reused for ``ttl`` seconds, one count at a time.

    ``count(query)`` returns the report dictionary; it runs in a thread of
    its own, so that a request can stop waiting for it. Requests for a
    query that is being counted wait for that count and share its result
    or its error; a failed count is not kept, a count that outlasts its
    requests is.
    """

    def __init__(self, count, ttl, size, clock=time.monotonic):
        self._count = count
        self._ttl = ttl
        self._size = size
        self._clock = clock
        self._lock = threading.Lock()
        # query -> (finished at, report dict, JSON body)
        self._entries = collections.OrderedDict()
        # query -> Future of the count under way
        self._flights = {}

    def get(self, query, fresh=False, timeout=None):
        """(report, JSON body, age in seconds) for the query.

        :param timeout: seconds to wait for a count (None: no limit)
        :raises CountUnderWay: the count took longer than ``timeout``
        """
        with self._lock:
            now = self._clock()
            entry = self._entries.get(query)
            if entry is not None and not fresh and now - entry[0] < self._ttl:
                self._entries.move_to_end(query)
                return entry[1], entry[2], now - entry[0]
            flight = self._flights.get(query)
            leader = flight is None
            if leader:
                flight = futures.Future()
                self._flights[query] = flight
        if leader:
            threading.Thread(target=self._run, args=(query, flight),
                             name='capacity-count', daemon=True).start()
        else:
            LOG.debug('Capacity query %s: waiting for the count under way',
                      query)
        try:
            report, body = flight.result(timeout)
        except futures.TimeoutError:
            raise CountUnderWay(query) from None
        return report, body, 0.0

    def _run(self, query, flight):
        try:
            started = self._clock()
            report = self._count(query)
            body = json.dumps(report).encode('utf-8')
            LOG.debug('Capacity query %s counted in %.3f s', query,
                      self._clock() - started)
        except BaseException as exc:
            # The waiting requests log it; one that gave up does not.
            LOG.debug('Capacity query %s failed', query, exc_info=True)
            with self._lock:
                del self._flights[query]
            flight.set_exception(exc)
            return
        with self._lock:
            del self._flights[query]
            self._entries[query] = (self._clock(), report, body)
            self._entries.move_to_end(query)
            while len(self._entries) > self._size:
                self._entries.popitem(last=False)
        flight.set_result((report, body))


class CapacityApp:
    """The WSGI application of the capacity API.

    :param conf: the configuration (``[nova_sched_ext_capacity]``)
    :param context_factory: returns the request context a count runs with
        (an admin context: the caller's roles were checked here)
    :param check_roles: require one of ``allowed_roles`` in the X-Roles
        header keystonemiddleware sets; False for ``auth_strategy =
        noauth``
    :param clock: the monotonic clock reports are aged with
    """

    def __init__(self, conf, context_factory, check_roles=True,
                 clock=time.monotonic, kept=None):
        self._conf = conf.nova_sched_ext_capacity
        #: the :class:`~nova_sched_ext.capacity.kept.KeptCount` reports
        #: come from while it is usable (``kept_state``), or None
        self.kept = kept
        self._context_factory = context_factory
        self._check_roles = check_roles
        self._allowed_roles = {role.strip().lower()
                               for role in self._conf.allowed_roles
                               if role.strip()}
        self.cache = ReportCache(self._count, self._conf.refresh_interval,
                                 self._conf.api_cache_size, clock=clock)
        self._routes = {
            '/': self._versions,
            '/v1': self._version,
            '/v1/': self._version,
            '/v1/capacity': self._capacity,
        }

    # -- WSGI ------------------------------------------------------------

    @webob.dec.wsgify
    def __call__(self, request):
        try:
            handler = self._routes.get(request.path_info or '/')
            if handler is None:
                raise HTTPError(404, 'Not Found',
                                'No such resource: %s' % request.path_info)
            if request.method not in ('GET', 'HEAD'):
                raise HTTPError(405, 'Method Not Allowed',
                                'The capacity API is read-only: use GET',
                                headers={'Allow': 'GET, HEAD'})
            return handler(request)
        except HTTPError as exc:
            return self._error(request, exc)
        except Exception:
            LOG.exception('Capacity API request %s %s failed',
                          request.method, request.path_qs)
            # What failed, and where, is for the service log only.
            return self._error(request, HTTPError(
                500, 'Internal Server Error',
                'The capacity count failed unexpectedly; the service log '
                'has the details'))

    @staticmethod
    def _json(body, status=200, headers=None):
        if not isinstance(body, bytes):
            body = json.dumps(body).encode('utf-8')
        response = webob.Response(body=body, status=status,
                                  content_type='application/json',
                                  charset=None)
        for name, value in (headers or {}).items():
            response.headers[name] = value
        return response

    def _error(self, request, exc):
        error = {'status': exc.status, 'title': exc.title,
                 'detail': exc.detail}
        request_id = request.environ.get('openstack.request_id')
        if request_id:
            error['request_id'] = request_id
        return self._json({'errors': [error]}, status=exc.status,
                          headers=exc.headers)

    # -- versions --------------------------------------------------------

    @staticmethod
    def _version_entry(request):
        return {'id': VERSION, 'status': 'CURRENT',
                'links': [{'rel': 'self',
                           'href': request.application_url + '/v1/'}]}

    def _versions(self, request):
        return self._json({'versions': [self._version_entry(request)]})

    def _version(self, request):
        return self._json({'version': self._version_entry(request)})

    # -- capacity --------------------------------------------------------

    def _authorize(self, request):
        if not self._check_roles:
            return
        if request.environ.get('HTTP_X_IDENTITY_STATUS') != 'Confirmed':
            raise HTTPError(401, 'Unauthorized',
                            'The request needs a valid keystone token',
                            headers={'WWW-Authenticate': 'Keystone'})
        roles = {role.strip().lower() for role in request.environ.get(
            'HTTP_X_ROLES', '').split(',')}
        if not roles & self._allowed_roles:
            raise HTTPError(403, 'Forbidden',
                            'Reading the capacity needs one of the roles %s'
                            % ', '.join(sorted(self._allowed_roles)))

    @staticmethod
    def _boolean(request, name):
        value = request.GET.get(name)
        if value is None:
            return False
        if value.lower() in _TRUE or value == '':
            return True
        if value.lower() in _FALSE:
            return False
        raise HTTPError(400, 'Bad Request',
                        'Invalid value %r for %s: use true or false'
                        % (value, name))

    def parse_query(self, request):
        """(Query, fresh) of a GET /v1/capacity request.

        The flavors of the query are sorted and deduplicated: the same
        flavors in any order are one report.
        """
        try:
            request.GET
        except UnicodeDecodeError:
            raise HTTPError(400, 'Bad Request',
                            'The query string is not valid UTF-8') from None
        unknown = sorted(set(request.GET) - set(QUERY_PARAMETERS))
        if unknown:
            raise HTTPError(400, 'Bad Request',
                            'Unknown query parameter(s): %s; known: %s'
                            % (', '.join(unknown),
                               ', '.join(QUERY_PARAMETERS)))
        for name in ('by', 'az', 'aggregate', 'per_host', 'fresh'):
            if len(request.GET.getall(name)) > 1:
                raise HTTPError(400, 'Bad Request',
                                'Query parameter %s is given more than once'
                                % name)
        flavors = set()
        for flavor in request.GET.getall('flavor'):
            flavor = flavor.strip()
            if not flavor:
                raise HTTPError(400, 'Bad Request',
                                'Empty flavor in the query')
            flavors.add(flavor)
        by = request.GET.get('by', 'cloud')
        if by not in capacity_conf.SCOPES:
            raise HTTPError(400, 'Bad Request',
                            'Invalid value %r for by: use one of %s'
                            % (by, ', '.join(capacity_conf.SCOPES)))
        query = Query(flavors=tuple(sorted(flavors)) or None, by=by,
                      az=request.GET.get('az') or None,
                      aggregate=request.GET.get('aggregate') or None,
                      per_host=self._boolean(request, 'per_host'))
        fresh = self._boolean(request, 'fresh')
        if fresh and not self._conf.allow_fresh:
            raise HTTPError(400, 'Bad Request',
                            'fresh=true is disabled on this service '
                            '([nova_sched_ext_capacity] allow_fresh)')
        return query, fresh

    def _count(self, query):
        # Imported here: the package's core imports Nova, which wsgi.py
        # must configure first.
        from nova_sched_ext import capacity
        report = capacity.compute(
            self._context_factory(),
            flavors=list(query.flavors) if query.flavors else None,
            by=query.by, az=query.az, aggregate=query.aggregate,
            per_host=query.per_host)
        return report.to_dict()

    def _from_kept(self, query, fresh):
        """``(body, age)`` from the kept state, or None: count in full."""
        if self.kept is None:
            return None
        # Started by the process that serves: a WSGI server that forks its
        # workers after loading the application leaves threads behind.
        self.kept.start()
        if fresh:
            return None
        why = self.kept.unusable()
        if why is not None:
            self.kept.counts[why[0]] += 1
            LOG.debug('Capacity query %s counted in full: the kept state '
                      'cannot be used (%s)', query, why[1])
            return None
        report = self.kept.report(
            flavors=list(query.flavors) if query.flavors else None,
            by=query.by, az=query.az, aggregate=query.aggregate,
            per_host=query.per_host)
        self.kept.counts['kept'] += 1
        return (json.dumps(report.to_dict()).encode('utf-8'),
                self.kept.age() or 0.0)

    def _capacity(self, request):
        self._authorize(request)
        query, fresh = self.parse_query(request)
        try:
            kept = self._from_kept(query, fresh)
            if kept is not None:
                body, age = kept
            else:
                _report, body, age = self.cache.get(
                    query, fresh=fresh,
                    timeout=self._conf.api_answer_timeout)
        except CountUnderWay:
            LOG.warning('Capacity query %s: not counted within %d s '
                        '(api_answer_timeout); the count goes on',
                        query, self._conf.api_answer_timeout)
            raise HTTPError(
                503, 'Service Unavailable',
                'The capacity is still being counted; try again later',
                headers={'Retry-After': str(RETRY_AFTER_COUNTING)})
        except errors.ConfigError as exc:
            # The service's configuration, not the caller's query.
            LOG.error('Capacity query %s: the service cannot count: %s',
                      query, _one_line(exc))
            raise HTTPError(500, 'Internal Server Error',
                            'The capacity service cannot count with its '
                            'configuration; the service log has the details')
        except errors.CapacityError as exc:
            if exc.unavailable:
                # the count's own word for a database or placement down
                raise self._unavailable(query, exc)
            raise HTTPError(400, 'Bad Request', _one_line(exc))
        except _unavailable_errors() as exc:
            raise self._unavailable(query, exc)
        return self._json(body, headers={'Age': str(int(age))})

    @staticmethod
    def _unavailable(query, exc):
        LOG.warning('Capacity query %s: a backend is unreachable: %s',
                    query, _one_line(exc))
        # What the backend said names hosts and URLs: the log has it.
        return HTTPError(503, 'Service Unavailable',
                         'The capacity cannot be counted now: a database or '
                         'placement cannot be reached; try again later',
                         headers={'Retry-After':
                                  str(RETRY_AFTER_UNAVAILABLE)})

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


"""The cells and their databases, read at once: one policy for a failure.

Every read that fans out over the cells goes through :func:`in_cells`,
:func:`in_every_cell` or, for a caller that goes on without a cell,
:func:`answers`.  The detection is Nova's (``scatter_gather_cells`` gives a
sentinel for a cell that did not answer within ``nova.context.CELL_TIMEOUT``
seconds, and the exception a cell raised), the verdict is this module's
(:func:`failure`): one :class:`~.errors.CellUnavailable` (or its
:class:`~.errors.CellMisconfigured` when the cell's database cannot even be
used), with one message shape.

The API database is read under :func:`database`, which turns its errors
into one-line :class:`~.errors.BackendUnavailable` or
:class:`~.errors.ConfigError` naming what was read.
"""

import contextlib

from nova import context as nova_context
from nova import objects
from oslo_config import cfg
from oslo_db import exception as db_exc
import oslo_messaging
import sqlalchemy.exc

from nova_sched_ext.cloud import errors

CONF = cfg.CONF

#: Errors of a database that cannot be reached or read.
DB_ERRORS = (db_exc.DBError, sqlalchemy.exc.SQLAlchemyError)


@contextlib.contextmanager
def database(what):
    """Turn the errors of reading ``what`` into one-line cloud errors."""
    try:
        yield
    except db_exc.CantStartEngineError as exc:
        raise errors.ConfigError(
            'cannot use the %s: %s (check the [api_database] and '
            '[database] connection options of nova.conf)'
            % (what, errors.one_line(exc))) from None
    except DB_ERRORS as exc:
        raise errors.BackendUnavailable(
            'cannot read the %s: %s' % (what, errors.one_line(exc))) from None


def register_transport_options(conf=CONF):
    """Register ``[DEFAULT] transport_url`` & co. of oslo.messaging.

    A cell mapping formats its transport URL with ``[DEFAULT]
    transport_url`` when it is loaded; oslo.messaging registers the option
    when RPC starts, and the operator services start none
    (``parse_args(init_rpc=False)``). Building a ``TransportURL`` registers
    it, and connects to nothing.
    """
    oslo_messaging.TransportURL(conf)


def enabled_cells(context):
    """The cells nova-scheduler schedules to, as its HostManager finds."""
    register_transport_options()
    with database('API database (cell mappings)'):
        cells = objects.CellMappingList.get_all(context)
    return [c for c in cells if not c.is_cell0() and not c.disabled]


def failure(cell, result):
    """The :class:`~.errors.CellUnavailable` a cell's answer is, or None.

    :param cell: the ``CellMapping`` asked (or its UUID, when the caller
        only has that)
    :param result: what ``scatter_gather_cells`` gave for it
    """
    if result is nova_context.did_not_respond_sentinel:
        return errors.CellUnavailable(cell,
                                      timeout=nova_context.CELL_TIMEOUT)
    if isinstance(result, db_exc.CantStartEngineError):
        return errors.CellMisconfigured(cell, result)
    if isinstance(result, Exception):
        return errors.CellUnavailable(cell, result)
    return None


def answers(context, cells, function, *args):
    """``[(cell, result or CellUnavailable)]`` of the cells, read at once.

    For a caller that goes on without a cell that does not answer (the
    scheduler's host state, as Nova's ``HostManager`` does): the failure
    is given, never raised.
    """
    results = nova_context.scatter_gather_cells(
        context, cells, nova_context.CELL_TIMEOUT, function, *args)
    by_uuid = {cell.uuid: cell for cell in cells}
    return [(by_uuid.get(cell_uuid, cell_uuid),
             failure(by_uuid.get(cell_uuid, cell_uuid), result) or result)
            for cell_uuid, result in results.items()]


def in_cells(context, cells, function, *args):
    """``(cell, function(cell context, *args))`` of every cell, read at once.

    :raises CellUnavailable: a cell whose database does not answer, cannot
        be used or fails the read, in one line naming it
    """
    for cell, result in answers(context, cells, function, *args):
        if isinstance(result, errors.CellUnavailable):
            raise result
        yield cell, result


def in_every_cell(context, function, *args):
    """``{cell uuid: function(cell context, *args)}`` of all cells but cell0.

    Disabled cells are read too (their instances still exist), as Nova's
    ``scatter_gather_skip_cell0`` reads them.

    :raises CellUnavailable: a cell does not answer or fails the read
    """
    results = nova_context.scatter_gather_skip_cell0(context, function, *args)
    for cell_uuid, result in results.items():
        error = failure(cell_uuid, result)
        if error is not None:
            raise error
    return results

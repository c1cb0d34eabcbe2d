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

"""The plain-text tables of the console scripts, drawn one way.

::

    +------+-------+
    | Host | Slots |
    +------+-------+
    | h1   |     3 |
    +------+-------+

The frame of OpenStackClient's and prettytable's tables, which operators
read every day; a table is the human form of a command's output, its
``--json`` the form for scripts.
"""


def render(rows, headers, align=None, empty=''):
    """A framed table of ``rows`` under ``headers``, as one string.

    :param rows: sequences of cells, one per column; a cell is shown as
        ``str(cell)``
    :param align: ``'l'`` (left, the default) or ``'r'`` per column; the
        heading is aligned as its column
    :param empty: how a cell of ``None`` is shown
    """
    cells = [[str(h) for h in headers]] + [
        [empty if v is None else str(v) for v in row] for row in rows]
    widths = [max(len(r[i]) for r in cells) for i in range(len(headers))]
    align = align or ['l'] * len(headers)
    rule = '+' + '+'.join('-' * (w + 2) for w in widths) + '+'

    def line(row):
        parts = [(c.ljust(w) if a == 'l' else c.rjust(w))
                 for c, w, a in zip(row, widths, align)]
        return '| ' + ' | '.join(parts) + ' |'

    out = [rule, line(cells[0]), rule]
    out += [line(r) for r in cells[1:]]
    out.append(rule)
    return '\n'.join(out)

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

"""Fingerprints of Nova's NUMA-fit code, to tell releases apart.

A fingerprint is the SHA-256 (16 hex digits) of a function's code as
``ast.unparse`` writes it back, without its docstring and type
annotations: a change of comments, docstrings or typing (Nova 33 moved
from ``ty.Optional[X]`` to ``X | None`` everywhere) leaves it alone, a
change of what the code does changes it.  ``nova_fingerprints.json`` holds
those read from Nova 31.3.1, 32.2.1, 33.0.2 and 34.0.0 (no code of
Nova's, only digests); ``test_nova_releases`` compares them with the
installed Nova.

Regenerate the table from unpacked wheels (``pip download --no-deps
'nova==31.*'`` ... and unzip)::

    python -m tests.unit.fit.fingerprint 31=/tmp/novas/31/src \\
        32=/tmp/novas/32/src 33=/tmp/novas/33/src 34=/tmp/novas/34/src
"""

import ast
import hashlib
import json
import os
import sys

#: The table next to this module.
TABLE = os.path.join(os.path.dirname(os.path.abspath(__file__)),
                     'nova_fingerprints.json')

#: Nova's modules whose code decides a NUMA fit, by path in the tree.
MODULES = (
    'nova/virt/hardware.py',
    'nova/scheduler/filters/numa_topology_filter.py',
    'nova/pci/stats.py',
    'nova/objects/numa.py',
    'nova/objects/instance_numa.py',
)

#: The functions of ``hardware`` the package calls (``numa_fit_instance_
#: to_host`` for the filter and the oracle, ``numa_get_constraints`` for
#: flavors, ``numa_usage_from_instance_numa`` for claims and the CPU set
#: helpers): the table holds these and everything they call in the
#: module (:func:`closure`).
HARDWARE_ENTRY_POINTS = (
    'numa_fit_instance_to_host', 'numa_get_constraints',
    'numa_usage_from_instance_numa', 'get_pci_numa_policy_constraint',
    'get_cpu_dedicated_set', 'get_cpu_shared_set', 'format_cpu_spec',
)


class _Strip(ast.NodeTransformer):
    """Drop docstrings and annotations."""

    def visit_FunctionDef(self, node):
        self.generic_visit(node)
        node.returns = None
        args = node.args
        for arg in args.posonlyargs + args.args + args.kwonlyargs + [
                a for a in (args.vararg, args.kwarg) if a]:
            arg.annotation = None
        body = node.body
        if body and isinstance(body[0], ast.Expr) and isinstance(
                body[0].value, ast.Constant) and isinstance(
                body[0].value.value, str):
            node.body = body[1:] or [ast.Pass()]
        return node

    visit_AsyncFunctionDef = visit_FunctionDef

    def visit_AnnAssign(self, node):
        if node.value is None:
            return None
        return ast.copy_location(
            ast.Assign(targets=[node.target], value=node.value), node)


def _definitions(source):
    tree = _Strip().visit(ast.parse(source))
    found = {}
    for node in tree.body:
        if isinstance(node, ast.FunctionDef):
            found[node.name] = node
        elif isinstance(node, ast.ClassDef):
            for item in node.body:
                if isinstance(item, ast.FunctionDef):
                    found['%s.%s' % (node.name, item.name)] = item
    return found


def fingerprints(source):
    """``{name: fingerprint}`` of every function and method of a module.

    Methods are named ``Class.method``.
    """
    return {
        name: hashlib.sha256(ast.unparse(ast.fix_missing_locations(
            node)).encode()).hexdigest()[:16]
        for name, node in _definitions(source).items()}


def closure(source, roots):
    """The module-level functions ``roots`` call, transitively, and roots."""
    tree = ast.parse(source)
    functions = {node.name: node for node in tree.body
                 if isinstance(node, ast.FunctionDef)}
    seen, todo = set(), list(roots)
    while todo:
        name = todo.pop()
        if name in seen or name not in functions:
            continue
        seen.add(name)
        todo.extend(node.id for node in ast.walk(functions[name])
                    if isinstance(node, ast.Name) and node.id in functions)
    return seen


def table(trees):
    """The table of ``{release: source tree}``: see ``nova_fingerprints``.

    ``{module: {name: {release: fingerprint}}}`` with, for
    ``hardware.py``, the :func:`closure` of :data:`HARDWARE_ENTRY_POINTS`
    in any release, and every function of the other modules.
    """
    out = {}
    for module in MODULES:
        sources = {}
        for release, top in trees.items():
            with open(os.path.join(top, module)) as f:
                sources[release] = f.read()
        prints = {r: fingerprints(s) for r, s in sources.items()}
        if module.endswith('hardware.py'):
            names = set()
            for source in sources.values():
                names |= closure(source, HARDWARE_ENTRY_POINTS)
        else:
            names = set().union(*prints.values())
        out[module] = {name: {r: prints[r].get(name) for r in sorted(trees)}
                       for name in sorted(names)}
    return out


def main(argv):
    trees = dict(arg.split('=', 1) for arg in argv)
    with open(TABLE, 'w') as f:
        json.dump(table(trees), f, indent=1, sort_keys=True)
        f.write('\n')


if __name__ == '__main__':
    main(sys.argv[1:])

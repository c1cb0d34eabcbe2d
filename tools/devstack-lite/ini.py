#!/usr/bin/env python3
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


"""The INI editing behind devstack-lite's iniset, iniadd, iniget & co.

devstack edits configuration files with shell functions (inc/ini-config).
devstack-lite runs the plugin's phases unchanged, so it needs functions with
the same names and meaning; functions.sh implements them by calling this
script::

    ini.py set FILE SECTION OPTION VALUE       # iniset
    ini.py set-multi FILE SECTION OPTION V...  # iniset_multiline
    ini.py add FILE SECTION OPTION V...        # iniadd
    ini.py get FILE SECTION OPTION             # iniget: the first value
    ini.py get-multi FILE SECTION OPTION       # iniget_multiline
    ini.py has FILE SECTION OPTION             # ini_has_option (status)
    ini.py delete FILE SECTION OPTION          # inidelete

Semantics: ``set`` replaces the option's first line and drops its other
lines; ``set-multi`` writes one line per value; ``add`` keeps the existing
values and adds the new ones; a missing file or section is created by the
writing commands. Comments and the order of everything else are kept.
"""

import os
import re
import sys

_SECTION = re.compile(r'^\s*\[([^\]]+)\]\s*$')


def _option(line):
    """The option name a line sets, or None."""
    stripped = line.strip()
    if not stripped or stripped[0] in '#;[' or line[0] in ' \t':
        return None
    if '=' not in stripped:
        return None
    return stripped.split('=', 1)[0].strip()


def _value(line):
    return line.split('=', 1)[1].strip()


class IniFile:

    def __init__(self, path):
        self.path = path
        self.lines = []
        if os.path.exists(path):
            with open(path) as handle:
                self.lines = handle.read().splitlines()

    def save(self):
        directory = os.path.dirname(os.path.abspath(self.path))
        os.makedirs(directory, exist_ok=True)
        tmp = '%s.tmp%d' % (self.path, os.getpid())
        with open(tmp, 'w') as handle:
            handle.write('\n'.join(self.lines) + '\n')
        os.replace(tmp, self.path)

    def _section_range(self, section):
        """(first line after the header, end) of the section, or None."""
        start = None
        for index, line in enumerate(self.lines):
            match = _SECTION.match(line)
            if not match:
                continue
            if start is not None:
                return start, index
            if match.group(1).strip() == section:
                start = index + 1
        if start is not None:
            return start, len(self.lines)
        return None

    def _option_lines(self, section, option):
        bounds = self._section_range(section)
        if bounds is None:
            return []
        return [index for index in range(*bounds)
                if _option(self.lines[index]) == option]

    def values(self, section, option):
        return [_value(self.lines[index])
                for index in self._option_lines(section, option)]

    def _ensure_section(self, section):
        bounds = self._section_range(section)
        if bounds is None:
            if self.lines and self.lines[-1].strip():
                self.lines.append('')
            self.lines.append('[%s]' % section)
            bounds = self._section_range(section)
        return bounds

    def set_values(self, section, option, values):
        found = self._option_lines(section, option)
        new = ['%s = %s' % (option, value) for value in values]
        if found:
            at = found[0]
            for index in reversed(found):
                del self.lines[index]
        else:
            start, end = self._ensure_section(section)
            # After the section's last non-blank line.
            at = end
            while at > start and not self.lines[at - 1].strip():
                at -= 1
        self.lines[at:at] = new

    def delete(self, section, option):
        for index in reversed(self._option_lines(section, option)):
            del self.lines[index]


def main(argv):
    if len(argv) < 4:
        sys.exit(__doc__)
    command, path, section, option = argv[:4]
    values = argv[4:]
    ini = IniFile(path)
    if command == 'get':
        found = ini.values(section, option)
        if found:
            print(found[0])
        return 0
    if command == 'get-multi':
        print(' '.join(ini.values(section, option)))
        return 0
    if command == 'has':
        return 0 if ini.values(section, option) else 1
    if command == 'set':
        ini.set_values(section, option, [' '.join(values)])
    elif command == 'set-multi':
        ini.set_values(section, option, values)
    elif command == 'add':
        ini.set_values(section, option, ini.values(section, option) + values)
    elif command == 'delete':
        if not os.path.exists(path):
            return 0
        ini.delete(section, option)
    else:
        sys.exit('unknown command %r\n%s' % (command, __doc__))
    ini.save()
    return 0


if __name__ == '__main__':
    sys.exit(main(sys.argv[1:]))

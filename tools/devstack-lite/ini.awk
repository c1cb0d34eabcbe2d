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
#
# The INI editing behind devstack-lite's iniset, iniadd, iniget & co.
#
# devstack edits configuration files with shell functions (inc/ini-config).
# devstack-lite runs the plugin's phases unchanged, so it needs functions
# with the same names and meaning; functions.sh implements them with this
# program (POSIX awk: gawk, mawk and busybox's run it), one short-lived awk
# a call where a Python interpreter cost ten times as much:
#
#   awk -f ini.awk set FILE SECTION OPTION VALUE       # iniset
#   awk -f ini.awk set-multi FILE SECTION OPTION V...  # iniset_multiline
#   awk -f ini.awk add FILE SECTION OPTION V...        # iniadd
#   awk -f ini.awk get FILE SECTION OPTION             # iniget: first value
#   awk -f ini.awk get-multi FILE SECTION OPTION       # iniget_multiline
#   awk -f ini.awk has FILE SECTION OPTION             # ini_has_option
#   awk -f ini.awk delete FILE SECTION OPTION          # inidelete
#
# The reading commands print; the writing ones print the whole new file,
# which functions.sh puts in place (a temporary file renamed over it).
# Semantics: "set" replaces the option's first line and drops its other
# lines; "set-multi" writes one line per value; "add" keeps the existing
# values and adds the new ones; a missing section is created by the
# writing commands. Comments and the order of everything else are kept.
# Every argument is taken from ARGV and removed from it before awk could
# read it as a file or an assignment, so values are used as given (no
# escape processing, "a=b" is a value).

function strip(s) {
    sub(/^[ \t\r\n\f\v]+/, "", s)
    sub(/[ \t\r\n\f\v]+$/, "", s)
    return s
}

# The section a header line names, or "" if the line is no header.
function header(line,    s) {
    if (line !~ /^[ \t]*\[[^]]+\][ \t]*$/)
        return ""
    s = line
    sub(/^[ \t]*\[/, "", s)
    sub(/\][ \t]*$/, "", s)
    return strip(s) == "" ? " " : strip(s)
}

# The option name a line sets, or "" if it sets none.
function option_of(line,    s) {
    s = strip(line)
    if (s == "" || substr(s, 1, 1) ~ /[#;[]/ || substr(line, 1, 1) ~ /[ \t]/)
        return ""
    if (index(s, "=") == 0)
        return ""
    return strip(substr(s, 1, index(s, "=") - 1))
}

function value_of(line) {
    return strip(substr(line, index(line, "=") + 1))
}

# Sets first/last: the section's first line after its header and the line
# after its end; returns 0 if the file has no such section.
function section_range(    i, name) {
    first = 0
    for (i = 1; i <= n; i++) {
        name = header(lines[i])
        if (name == "")
            continue
        if (first) {
            last = i
            return 1
        }
        if (name == section)
            first = i + 1
    }
    if (first) {
        last = n + 1
        return 1
    }
    return 0
}

# found[1..count]: the line numbers of the option in the section.
function find_option(    i, count) {
    count = 0
    if (!section_range())
        return 0
    for (i = first; i < last; i++)
        if (option_of(lines[i]) == option)
            found[++count] = i
    return count
}

# Replaces the option's lines by one line per new[1..nnew].
function set_values(    count, at, i, j, out, m) {
    count = find_option()
    if (count) {
        at = found[1]
        m = 0
        for (i = 1; i <= n; i++) {
            if (i == at)
                for (j = 1; j <= nnew; j++)
                    out[++m] = option " = " new[j]
            if (!is_found(i, count))
                out[++m] = lines[i]
        }
    } else {
        if (!section_range()) {
            if (n && strip(lines[n]) != "")
                lines[++n] = ""
            lines[++n] = "[" section "]"
            section_range()
        }
        # After the section's last non-blank line.
        at = last
        while (at > first && strip(lines[at - 1]) == "")
            at--
        m = 0
        for (i = 1; i < at; i++)
            out[++m] = lines[i]
        for (j = 1; j <= nnew; j++)
            out[++m] = option " = " new[j]
        for (i = at; i <= n; i++)
            out[++m] = lines[i]
    }
    n = m
    for (i = 1; i <= n; i++)
        lines[i] = out[i]
}

# Whether line i is one of the count lines find_option() found.
function is_found(i, count,    j) {
    for (j = 1; j <= count; j++)
        if (found[j] == i)
            return 1
    return 0
}

function delete_option(    count, i, m) {
    count = find_option()
    m = 0
    for (i = 1; i <= n; i++) {
        if (!is_found(i, count))
            lines[++m] = lines[i]
    }
    n = m
}

function usage() {
    print "usage: awk -f ini.awk set|set-multi|add|get|get-multi|has|" \
          "delete FILE SECTION OPTION [VALUE...]" > "/dev/stderr"
    exit 2
}

BEGIN {
    if (ARGC < 5)
        usage()
    command = ARGV[1]; path = ARGV[2]; section = ARGV[3]; option = ARGV[4]
    nvalues = 0
    for (i = 5; i < ARGC; i++)
        values[++nvalues] = ARGV[i]
    for (i = 1; i < ARGC; i++)
        delete ARGV[i]
    n = 0
    while ((status = (getline line < path)) > 0)
        lines[++n] = line
    if (status == 0)
        close(path)

    if (command == "get" || command == "get-multi" || command == "has") {
        count = find_option()
        if (command == "has")
            exit count ? 0 : 1
        if (command == "get") {
            if (count)
                print value_of(lines[found[1]])
            exit 0
        }
        text = ""
        for (i = 1; i <= count; i++)
            text = text (i > 1 ? " " : "") value_of(lines[found[i]])
        print text
        exit 0
    }
    nnew = 0
    if (command == "set") {
        text = ""
        for (i = 1; i <= nvalues; i++)
            text = text (i > 1 ? " " : "") values[i]
        new[++nnew] = text
        set_values()
    } else if (command == "set-multi") {
        for (i = 1; i <= nvalues; i++)
            new[++nnew] = values[i]
        set_values()
    } else if (command == "add") {
        count = find_option()
        for (i = 1; i <= count; i++)
            new[++nnew] = value_of(lines[found[i]])
        for (i = 1; i <= nvalues; i++)
            new[++nnew] = values[i]
        set_values()
    } else if (command == "delete") {
        delete_option()
    } else {
        usage()
    }
    for (i = 1; i <= n; i++)
        print lines[i]
    if (n == 0)
        print ""
    exit 0
}

#!/usr/bin/env python3
"""Expand a systemd unit's ExecStart= the way systemd does, for the VM suite's deployment
case (the guest has no systemd as PID 1 to start the unit itself).

    unit_exec.py UNIT [ENVFILE]

Prints the environment the unit's EnvironmentFile= gives (KEY=VALUE lines), a line "--",
then the expanded argv, one word per line. The rules are systemd.service(5)'s and
systemd.exec(5)'s:
  - EnvironmentFile: KEY=VALUE lines; '#' and ';' start comments; single or double quotes
    around a value are removed (backslash escapes inside double quotes); a trailing
    backslash continues the line. ENVFILE, when given, replaces the unit's file (so a test
    can keep /etc untouched); a leading '-' on the unit's path means "optional".
  - ExecStart: split into words, honouring single and double quotes; then a word that is
    exactly $NAME is replaced by NAME's value split at whitespace (into zero or more words),
    and ${NAME} or $NAME inside any other word is replaced by the value as it is; $$ is a
    literal dollar. Undefined variables expand to nothing.
"""
import re
import sys

VAR = re.compile(r"\$\$|\$\{([A-Za-z_][A-Za-z0-9_]*)\}|\$([A-Za-z_][A-Za-z0-9_]*)")


def unit_lines(path):
    """(key, value) of the [Service] section, continuation lines joined."""
    section, pending = None, ""
    for raw in open(path, encoding="utf-8"):
        line = pending + raw.rstrip("\n")
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1] + " "
            continue
        line = line.strip()
        if not line or line[0] in "#;":
            continue
        if line.startswith("["):
            section = line.strip("[]")
            continue
        if section == "Service" and "=" in line:
            key, value = line.split("=", 1)
            yield key.strip(), value.strip()


def unquote_value(v):
    if len(v) >= 2 and v[0] == v[-1] == "'":
        return v[1:-1]
    if len(v) >= 2 and v[0] == v[-1] == '"':
        return re.sub(r"\\(.)", r"\1", v[1:-1])
    return v


def env_file(path):
    env = {}
    pending = ""
    for raw in open(path, encoding="utf-8"):
        line = pending + raw.rstrip("\n")
        pending = ""
        if line.endswith("\\"):
            pending = line[:-1]
            continue
        line = line.strip()
        if not line or line[0] in "#;" or "=" not in line:
            continue
        key, value = line.split("=", 1)
        env[key.strip()] = unquote_value(value.strip())
    return env


def split_words(cmdline):
    """systemd's word splitting: whitespace separates, quotes group, backslash escapes."""
    words, cur, quote, have = [], [], None, False
    i = 0
    while i < len(cmdline):
        c = cmdline[i]
        if quote:
            if c == quote:
                quote = None
            elif c == "\\" and quote == '"' and i + 1 < len(cmdline):
                i += 1
                cur.append(cmdline[i])
            else:
                cur.append(c)
        elif c in "'\"":
            quote, have = c, True
        elif c.isspace():
            if cur or have:
                words.append(("".join(cur), have))
            cur, have = [], False
        elif c == "\\" and i + 1 < len(cmdline):
            i += 1
            cur.append(cmdline[i])
        else:
            cur.append(c)
        i += 1
    if quote:
        sys.exit(f"unit_exec.py: unterminated quote in {cmdline!r}")
    if cur or have:
        words.append(("".join(cur), have))
    return words


def expand(words, env):
    argv = []
    for word, quoted in words:
        m = re.fullmatch(r"\$([A-Za-z_][A-Za-z0-9_]*)", word)
        if m and not quoted:
            argv.extend(env.get(m.group(1), "").split())
            continue

        def sub(mm):
            if mm.group(0) == "$$":
                return "$"
            return env.get(mm.group(1) or mm.group(2), "")

        argv.append(VAR.sub(sub, word))
    return argv


def main():
    unit = sys.argv[1]
    override = sys.argv[2] if len(sys.argv) > 2 else None
    env, exec_start = {}, None
    for key, value in unit_lines(unit):
        if key == "EnvironmentFile":
            path = override or value.lstrip("-")
            try:
                env.update(env_file(path))
            except FileNotFoundError:
                if not value.startswith("-"):
                    sys.exit(f"unit_exec.py: EnvironmentFile {path} is missing")
        elif key == "ExecStart":
            exec_start = value.lstrip("@-:+!")
    if exec_start is None:
        sys.exit(f"unit_exec.py: no ExecStart in {unit}")
    for k, v in env.items():
        print(f"{k}={v}")
    print("--")
    for w in expand(split_words(exec_start), env):
        print(w)


if __name__ == "__main__":
    main()

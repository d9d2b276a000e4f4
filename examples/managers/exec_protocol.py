"""The `exec` protocol shared by the demo manager and the demo provisioner (python3 standard
library only). Both scripts import it from the directory above their own.

A program is invoked once per operation as `<program> <operation>` with the request JSON on
stdin. It prints the result JSON on stdout and exits with 0 (success), 75 (EX_TEMPFAIL:
transient, the caller retries) or 1 (permanent). The last stderr line is the failure's detail.

State lives in one `state.json` (guarded by a lock file) in a state directory, where these
test hooks (files) apply:
  FAIL_TRANSIENT  exit 75 (empty file: every operation; otherwise only the operations
                  listed in it, one per line)
  FAIL_PERMANENT  exit 1, same rules
  DELAY_SECONDS   sleep that many seconds before answering (to try the timeout)
"""

import fcntl
import json
import os
import sys
import tempfile
import time

EX_TEMPFAIL = 75


class Permanent(Exception):
    """A request that will never succeed as is."""


class Transient(Exception):
    """Try again later."""


def state_dir(script, env_var):
    """The directory named by `env_var`, or `state` beside `script`; created if missing."""
    default = os.path.join(os.path.dirname(os.path.abspath(script)), "state")
    path = os.environ.get(env_var) or default
    os.makedirs(path, exist_ok=True)
    return path


def hook_applies(path, op):
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        ops = [line.strip() for line in f if line.strip()]
    return not ops or op in ops


def save(path, state):
    fd, tmp = tempfile.mkstemp(dir=os.path.dirname(path), prefix=".state-")
    with os.fdopen(fd, "w", encoding="utf-8") as f:
        json.dump(state, f, indent=1, sort_keys=True)
    os.replace(tmp, path)


def need(req, field):
    value = req.get(field)
    if value is None or value == "":
        raise Permanent(f"missing field '{field}'")
    return value


def run(argv, script, state_env, name, role, operations, read_only, load):
    """Answers one invocation of `script` (its state directory: see `state_dir`).
    `operations` maps an operation to `handler(state, request)`; `load(path)` reads the state
    (`read_only` operations do not write it back). `name` prefixes messages, `role` names what
    refuses an unknown operation."""
    if len(argv) < 2:
        print(f"usage: {os.path.basename(script)} <operation> < request.json", file=sys.stderr)
        return 1
    op = argv[-1]
    handler = operations.get(op)
    if handler is None:
        print(f"{name}: operation '{op}' is not supported by this {role}", file=sys.stderr)
        return 1
    directory = state_dir(script, state_env)
    delay = os.path.join(directory, "DELAY_SECONDS")
    if os.path.exists(delay):
        with open(delay, encoding="utf-8") as f:
            time.sleep(float(f.read().strip() or "0"))
    if hook_applies(os.path.join(directory, "FAIL_TRANSIENT"), op):
        print(f"{name}: transient failure of {op} requested by FAIL_TRANSIENT", file=sys.stderr)
        return EX_TEMPFAIL
    if hook_applies(os.path.join(directory, "FAIL_PERMANENT"), op):
        print(f"{name}: permanent failure of {op} requested by FAIL_PERMANENT", file=sys.stderr)
        return 1
    try:
        raw = sys.stdin.read()
        request = json.loads(raw) if raw.strip() else {}
        if not isinstance(request, dict):
            raise Permanent("the request must be a JSON object")
    except json.JSONDecodeError as e:
        print(f"{name}: invalid request JSON: {e}", file=sys.stderr)
        return 1
    except Permanent as e:
        print(f"{name}: {e}", file=sys.stderr)
        return 1
    path = os.path.join(directory, "state.json")
    try:
        with open(os.path.join(directory, ".lock"), "w", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = load(path)
            result = handler(state, request)
            if op not in read_only:
                save(path, state)
    except Permanent as e:
        print(str(e), file=sys.stderr)
        return 1
    except (Transient, OSError) as e:
        print(f"{name}: {e}", file=sys.stderr)
        return EX_TEMPFAIL
    json.dump(result, sys.stdout)
    print()
    return 0

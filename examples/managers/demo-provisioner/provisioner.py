#!/usr/bin/env python3
"""Demo `exec` provisioner for osac-net (python3 standard library only).

Invoked once per operation as

    provisioner.py <operation>

with the request JSON on stdin. It prints the result JSON on stdout and exits with
0 (success), 75 (EX_TEMPFAIL: transient, the caller retries) or 1 (permanent: the
workload goes FAILED). The last stderr line is the failure's detail for the provider (server
log and a provider-only event); tenants read a plain message with a reference.

A real provisioner would create a KubeVirt VirtualMachine, drive Ironic or build a
HyperShift cluster here; this one only records its machines in `state.json` (guarded by a
lock file) under the directory named by OSAC_DEMO_PROVISIONER_STATE (default: ./state
beside this script). Every operation is idempotent: provisioning what exists with the same
request succeeds, deleting what does not exist succeeds. `history` in the state file lists
the calls that changed something (operation and workload id), newest last.

Test hooks (files in the state directory), as in demo-exec:
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
HISTORY_LIMIT = 1000


class Permanent(Exception):
    """A request that will never succeed as is."""


def state_dir():
    default = os.path.join(os.path.dirname(os.path.abspath(__file__)), "state")
    path = os.environ.get("OSAC_DEMO_PROVISIONER_STATE") or default
    os.makedirs(path, exist_ok=True)
    return path


def hook_applies(path, op):
    if not os.path.exists(path):
        return False
    with open(path, encoding="utf-8") as f:
        ops = [line.strip() for line in f if line.strip()]
    return not ops or op in ops


def load(path):
    state = {"machines": {}, "history": []}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            state.update(json.load(f))
    return state


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


def remember(state, op, workload_id):
    state["history"] = (state["history"] + [{"operation": op, "id": workload_id}])[-HISTORY_LIMIT:]


def nics_of(req):
    nics = req.get("nics") or []
    for n in nics:
        need(n, "mac_address")
    return [
        {"name": n.get("name", ""), "mac_address": n["mac_address"].lower(),
         "subnet_id": n.get("subnet_id", ""), "primary": bool(n.get("primary"))}
        for n in nics
    ]


def record(state, op, workload_id, machine):
    """Creates the machine, or accepts the same request again; another shape is permanent."""
    existing = state["machines"].get(workload_id)
    if existing is not None:
        same = {k: v for k, v in existing.items() if k != "power"} == machine
        if not same:
            raise Permanent(f"workload '{workload_id}' is already provisioned with a different shape")
        if existing.get("power") == "on":
            return {}
    state["machines"][workload_id] = dict(machine, power="on")
    remember(state, op, workload_id)
    return {}


def forget(state, op, workload_id):
    if state["machines"].pop(workload_id, None) is not None:
        remember(state, op, workload_id)
    return {}


# ---------------------------------------------------------------- operations


def boot_vm(state, req):
    instance_id = need(req, "instance_id")
    nics = nics_of(req)
    if not nics:
        raise Permanent(f"VM '{instance_id}' needs at least one NIC")
    machine = {"kind": "vm", "hosting_cluster": need(req, "hosting_cluster"),
               "template": req.get("template", ""), "nics": nics}
    return record(state, "boot_vm", instance_id, machine)


def delete_vm(state, req):
    return forget(state, "delete_vm", need(req, "instance_id"))


def provision_baremetal(state, req):
    instance_id = need(req, "instance_id")
    machine = {"kind": "bare_metal", "host_id": need(req, "host_id"), "nics": nics_of(req)}
    return record(state, "provision_baremetal", instance_id, machine)


def deprovision_baremetal(state, req):
    return forget(state, "deprovision_baremetal", need(req, "instance_id"))


def provision_cluster(state, req):
    cluster_id = need(req, "cluster_id")
    agents = req.get("agents") or []
    if not agents or not req.get("api_vip") or not req.get("ingress_vip"):
        raise Permanent(f"cluster '{cluster_id}' needs agents and both VIPs")
    machine = {"kind": "cluster", "template": req.get("template", ""),
               "agents": sorted(need(a, "host_id") for a in agents),
               "api_vip": req["api_vip"], "ingress_vip": req["ingress_vip"]}
    return record(state, "provision_cluster", cluster_id, machine)


def deprovision_cluster(state, req):
    return forget(state, "deprovision_cluster", need(req, "cluster_id"))


def machine_of(state, req):
    """The VM or bare-metal machine a power/discovery request names, or None."""
    instance_id = need(req, "instance_id")
    kind = need(req, "kind")
    m = state["machines"].get(instance_id)
    if m is None or m["kind"] != kind:
        return None
    if kind == "bare_metal" and m["host_id"] != req.get("host_id"):
        return None
    return m


def power(state, req):
    wanted = need(req, "state")
    if wanted not in ("on", "off"):
        raise Permanent(f"power state '{wanted}' is not on or off")
    m = machine_of(state, req)
    if m is None:
        raise Permanent(f"cannot power {req['instance_id']} {wanted}: no such machine is provisioned")
    if m["power"] != wanted:
        m["power"] = wanted
        remember(state, f"power_{wanted}", req["instance_id"])
    return {}


def discover_addresses(state, req):
    # This demo sees no addresses (a real backend would read them from its guest agent or
    # its DHCP view); it reports the machine's NICs by MAC.
    m = machine_of(state, req)
    if m is None:
        return {"nics": []}
    return {"nics": [{"mac_address": n["mac_address"]} for n in m["nics"]]}


OPERATIONS = {
    f.__name__: f
    for f in (
        boot_vm,
        delete_vm,
        provision_baremetal,
        deprovision_baremetal,
        provision_cluster,
        deprovision_cluster,
        power,
        discover_addresses,
    )
}

# Operations that only read: their state is not written back.
READ_ONLY = {"discover_addresses"}


def main(argv):
    if len(argv) < 2:
        print("usage: provisioner.py <operation> < request.json", file=sys.stderr)
        return 1
    op = argv[-1]
    handler = OPERATIONS.get(op)
    if handler is None:
        print(f"demo-provisioner: operation '{op}' is not supported by this provisioner", file=sys.stderr)
        return 1
    directory = state_dir()
    delay = os.path.join(directory, "DELAY_SECONDS")
    if os.path.exists(delay):
        with open(delay, encoding="utf-8") as f:
            time.sleep(float(f.read().strip() or "0"))
    if hook_applies(os.path.join(directory, "FAIL_TRANSIENT"), op):
        print(f"demo-provisioner: transient failure of {op} requested by FAIL_TRANSIENT", file=sys.stderr)
        return EX_TEMPFAIL
    if hook_applies(os.path.join(directory, "FAIL_PERMANENT"), op):
        print(f"demo-provisioner: permanent failure of {op} requested by FAIL_PERMANENT", file=sys.stderr)
        return 1
    try:
        raw = sys.stdin.read()
        request = json.loads(raw) if raw.strip() else {}
        if not isinstance(request, dict):
            raise Permanent("the request must be a JSON object")
    except json.JSONDecodeError as e:
        print(f"demo-provisioner: invalid request JSON: {e}", file=sys.stderr)
        return 1
    except Permanent as e:
        print(f"demo-provisioner: {e}", file=sys.stderr)
        return 1
    path = os.path.join(directory, "state.json")
    try:
        with open(os.path.join(directory, ".lock"), "w", encoding="utf-8") as lock:
            fcntl.flock(lock, fcntl.LOCK_EX)
            state = load(path)
            result = handler(state, request)
            if op not in READ_ONLY:
                save(path, state)
    except Permanent as e:
        print(str(e), file=sys.stderr)
        return 1
    except OSError as e:
        print(f"demo-provisioner: {e}", file=sys.stderr)
        return EX_TEMPFAIL
    json.dump(result, sys.stdout)
    print()
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

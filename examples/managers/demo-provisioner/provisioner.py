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

import json
import os
import sys

# The exec protocol (arguments, exit codes, test hooks, the locked state file) is shared with
# the other demo program: exec_protocol.py in the directory above this script's.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True
from exec_protocol import Permanent, need, run  # noqa: E402

HISTORY_LIMIT = 1000


def load(path):
    state = {"machines": {}, "history": []}
    if os.path.exists(path):
        with open(path, encoding="utf-8") as f:
            state.update(json.load(f))
    return state


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
    """Installs the server (image, SSH key, user data are part of its shape), then powers it
    per run_strategy; a new restart_trigger restarts a server that stays on."""
    instance_id = need(req, "instance_id")
    machine = {"kind": "bare_metal", "host_id": need(req, "host_id"), "nics": nics_of(req),
               "image": req.get("image", ""), "ssh_public_key": req.get("ssh_public_key", ""),
               "user_data": req.get("user_data", "")}
    strategy = req.get("run_strategy", "always")
    if strategy not in ("always", "halted", "manual"):
        raise Permanent(f"run_strategy '{strategy}' is not always, halted or manual")
    trigger = req.get("restart_trigger", "")
    before = state["machines"].get(instance_id)
    if before is not None:
        shape = {k: v for k, v in before.items() if k not in ("power", "restart_trigger")}
        if shape != machine:
            raise Permanent(f"workload '{instance_id}' is already provisioned with a different shape")
        power = before.get("power", "on")
    else:
        remember(state, "provision_baremetal", instance_id)
        power = "on"
    if strategy == "halted":
        power = "off"
    elif strategy == "always":
        power = "on"
    if before is not None and power == "on" and before.get("restart_trigger", "") != trigger:
        remember(state, "restart", instance_id)
    state["machines"][instance_id] = dict(machine, power=power, restart_trigger=trigger)
    return {}


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
    return run(
        argv,
        __file__,
        "OSAC_DEMO_PROVISIONER_STATE",
        "demo-provisioner",
        "provisioner",
        OPERATIONS,
        READ_ONLY,
        load,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))

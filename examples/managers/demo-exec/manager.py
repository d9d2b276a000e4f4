#!/usr/bin/env python3
"""Demo `exec` fabric manager for osac-net (python3 standard library only).

Invoked once per operation as

    manager.py <operation>

with the request JSON on stdin. It prints the result JSON on stdout and exits with
0 (success), 75 (EX_TEMPFAIL: transient, the caller retries) or 1 (permanent: the
object goes FAILED). The last stderr line is the failure's detail for the provider (server log
and a provider-only event); tenants read a plain message with a reference.

State lives in JSON (one `state.json`, guarded by a lock file) under the directory named by
the environment variable OSAC_DEMO_EXEC_STATE (default: ./state beside this script).
Every operation is idempotent, and deleting something that does not exist succeeds.

Test hooks (files in the state directory):
  FAIL_TRANSIENT  exit 75 (empty file: every operation; otherwise only the operations
                  listed in it, one per line)
  FAIL_PERMANENT  exit 1, same rules
  DELAY_SECONDS   sleep that many seconds before answering (to try the timeout)
"""

import ipaddress
import json
import os
import sys

# The exec protocol (arguments, exit codes, test hooks, the locked state file) is shared with
# the other demo program: exec_protocol.py in the directory above this script's.
sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
sys.dont_write_bytecode = True
from exec_protocol import Permanent, need, run  # noqa: E402

FIRST_SEGMENT_ID = 100


def empty_state():
    return {
        "next_segment_id": FIRST_SEGMENT_ID,
        "virtual_networks": {},
        "subnets": {},
        "security_groups": {},
        "external_ips": {},
        "dnat": {},
        "snat": {},
        "attachments": {},
        "ports": {},
    }


def load(path):
    if not os.path.exists(path):
        return empty_state()
    with open(path, encoding="utf-8") as f:
        state = json.load(f)
    for key, value in empty_state().items():
        state.setdefault(key, value)
    return state


# ---------------------------------------------------------------- helpers


def prefix(value, field):
    try:
        return ipaddress.ip_network(value, strict=True)
    except (TypeError, ValueError) as e:
        raise Permanent(f"{field} '{value}': {e}") from None


def opt_prefix(req, field):
    value = req.get(field)
    return prefix(value, field) if value else None


def address(value, field):
    try:
        return ipaddress.ip_address(value)
    except ValueError as e:
        raise Permanent(f"{field} '{value}': {e}") from None


def gateway(net):
    """First usable IPv4 address; ::1 of an IPv6 prefix."""
    if net.version == 4 and net.prefixlen >= 31:
        return net.network_address
    return net.network_address + 1


def usable(net):
    first, last = int(net.network_address), int(net.broadcast_address)
    if net.version == 4 and net.prefixlen < 31:
        return first + 1, last - 1
    if net.version == 6 and net.prefixlen < 127:
        return first + 1, last
    return first, last


def lowest_free(net, used, blocked=()):
    first, last = usable(net)
    x = first
    while x <= last:
        ip = ipaddress.ip_address(x) if net.version == 6 else ipaddress.IPv4Address(x)
        skip = next((b for b in blocked if b.version == net.version and ip in b), None)
        if skip is not None:
            x = int(skip.broadcast_address) + 1
            continue
        if str(ip) not in used:
            return ip
        x += 1
    return None


def mac(value):
    parts = value.replace("-", ":").lower().split(":")
    if len(parts) != 6 or any(len(p) != 2 or any(c not in "0123456789abcdef" for c in p) for p in parts):
        raise Permanent(f"mac_address '{value}' is not a MAC address")
    return ":".join(parts)


def vn_of(state, vn_id):
    vn = state["virtual_networks"].get(vn_id)
    if vn is None:
        raise Permanent(f"virtual network '{vn_id}' does not exist")
    return vn


def consumer_of(state, addr):
    for aid, d in state["dnat"].items():
        if d["external_address"] == addr:
            return f"external IP attachment '{aid}'"
    for nid, s in state["snat"].items():
        if s["external_address"] == addr:
            return f"NAT gateway '{nid}'"
    return None


def check_external(state, addr, me):
    if addr not in {e["address"] for e in state["external_ips"].values()}:
        raise Permanent(f"external address {addr} is not allocated")
    user = consumer_of(state, addr)
    if user is not None and user != me:
        raise Permanent(f"external address {addr} is already used by {user}")


# ---------------------------------------------------------------- operations


def create_virtual_network(state, req):
    vn_id = need(req, "virtual_network_id")
    v4, v6 = opt_prefix(req, "ipv4_cidr"), opt_prefix(req, "ipv6_cidr")
    new = {
        "tenant": need(req, "tenant"),
        "ipv4_cidr": str(v4) if v4 else None,
        "ipv6_cidr": str(v6) if v6 else None,
    }
    old = state["virtual_networks"].get(vn_id)
    if old is not None and old != new:
        raise Permanent(f"virtual network '{vn_id}' already exists with a different tenant or CIDRs")
    state["virtual_networks"][vn_id] = new
    return {}


def delete_virtual_network(state, req):
    vn_id = need(req, "virtual_network_id")
    if vn_id not in state["virtual_networks"]:
        return {}
    users = [f"subnet '{k}'" for k, s in state["subnets"].items() if s["virtual_network_id"] == vn_id]
    users += [f"security group '{k}'" for k, g in state["security_groups"].items() if g["virtual_network_id"] == vn_id]
    users += [f"NAT gateway '{k}'" for k, s in state["snat"].items() if s["virtual_network_id"] == vn_id]
    users += [f"external IP attachment '{k}'" for k, d in state["dnat"].items() if d["virtual_network_id"] == vn_id]
    if users:
        raise Permanent(f"virtual network '{vn_id}' is still in use by {', '.join(sorted(users)[:5])}")
    del state["virtual_networks"][vn_id]
    return {}


def subnet_response(s):
    out = {"segment_id": s["segment_id"]}
    if s.get("ipv4_gateway"):
        out["ipv4_gateway"] = s["ipv4_gateway"]
    if s.get("ipv6_gateway"):
        out["ipv6_gateway"] = s["ipv6_gateway"]
    return out


def create_subnet(state, req):
    subnet_id = need(req, "subnet_id")
    vn_id = need(req, "virtual_network_id")
    vn = vn_of(state, vn_id)
    v4, v6 = opt_prefix(req, "ipv4_cidr"), opt_prefix(req, "ipv6_cidr")
    vip = opt_prefix(req, "vip_cidr")
    if v4 is None and v6 is None:
        raise Permanent("a subnet needs ipv4_cidr, ipv6_cidr or both")
    for net, family in ((v4, "ipv4_cidr"), (v6, "ipv6_cidr")):
        if net is None:
            continue
        parent = vn.get(family)
        if parent is None:
            raise Permanent(f"virtual network '{vn_id}' has no {family}")
        if not net.subnet_of(ipaddress.ip_network(parent)):
            raise Permanent(f"subnet CIDR '{net}' is not inside virtual network CIDR '{parent}'")
    if vip is not None:
        home = v4 if vip.version == 4 else v6
        if home is None or not vip.subnet_of(home):
            raise Permanent(f"vip_cidr '{vip}' is not inside the subnet's CIDR of its family")
    old = state["subnets"].get(subnet_id)
    if old is not None:
        if (old["virtual_network_id"], old["ipv4_cidr"], old["ipv6_cidr"]) != (
            vn_id,
            str(v4) if v4 else None,
            str(v6) if v6 else None,
        ):
            raise Permanent(f"subnet '{subnet_id}' already exists with a different virtual network or CIDRs")
        old["vip_cidr"] = str(vip) if vip else None
        return subnet_response(old)
    for other_id, other in state["subnets"].items():
        if other["virtual_network_id"] != vn_id:
            continue
        for net, family in ((v4, "ipv4_cidr"), (v6, "ipv6_cidr")):
            if net is not None and other[family] and net.overlaps(ipaddress.ip_network(other[family])):
                raise Permanent(f"subnet '{subnet_id}' overlaps subnet '{other_id}' in virtual network '{vn_id}'")
    segment_id = state["next_segment_id"]
    state["next_segment_id"] = segment_id + 1
    s = {
        "virtual_network_id": vn_id,
        "segment_id": segment_id,
        "ipv4_cidr": str(v4) if v4 else None,
        "ipv6_cidr": str(v6) if v6 else None,
        "vip_cidr": str(vip) if vip else None,
        "ipv4_gateway": str(gateway(v4)) if v4 else None,
        "ipv6_gateway": str(gateway(v6)) if v6 else None,
    }
    state["subnets"][subnet_id] = s
    return subnet_response(s)


def delete_subnet(state, req):
    subnet_id = need(req, "subnet_id")
    s = state["subnets"].get(subnet_id)
    if s is None:
        return {}
    if s["virtual_network_id"] != req.get("virtual_network_id"):
        raise Permanent(f"subnet '{subnet_id}' belongs to virtual network '{s['virtual_network_id']}'")
    ports = [k for k, a in state["attachments"].items() if a["subnet_id"] == subnet_id]
    if ports:
        raise Permanent(f"subnet '{subnet_id}' still has {len(ports)} network attachment(s), e.g. '{ports[0]}'")
    del state["subnets"][subnet_id]
    return {}


def check_rule(rule, where):
    proto = rule.get("protocol")
    if proto not in ("tcp", "udp", "icmp", "all"):
        raise Permanent(f"{where}: protocol '{proto}' is not tcp, udp, icmp or all")
    pf, pt = rule.get("port_from"), rule.get("port_to")
    if proto in ("tcp", "udp"):
        if (pf is None) != (pt is None):
            raise Permanent(f"{where}: port_from and port_to must be given together")
        if pf is not None and not (1 <= pf <= pt <= 65535):
            raise Permanent(f"{where}: port range {pf}-{pt} is invalid")
    elif pf is not None or pt is not None:
        raise Permanent(f"{where}: ports are only valid for tcp and udp")
    prefix(need(rule, "cidr"), f"{where}: cidr")


def apply_security_group(state, req):
    sg_id = need(req, "security_group_id")
    vn_id = need(req, "virtual_network_id")
    vn_of(state, vn_id)
    old = state["security_groups"].get(sg_id)
    if old is not None and old["virtual_network_id"] != vn_id:
        raise Permanent(f"security group '{sg_id}' belongs to virtual network '{old['virtual_network_id']}'")
    for direction in ("ingress", "egress"):
        for i, rule in enumerate(req.get(direction) or []):
            check_rule(rule, f"{direction} rule {i}")
    state["security_groups"][sg_id] = {
        "virtual_network_id": vn_id,
        "ingress": req.get("ingress") or [],
        "egress": req.get("egress") or [],
    }
    return {}


def delete_security_group(state, req):
    sg_id = need(req, "security_group_id")
    if sg_id not in state["security_groups"]:
        return {}
    users = [k for k, a in state["attachments"].items() if sg_id in a["security_groups"]]
    if users:
        raise Permanent(f"security group '{sg_id}' is still applied to network attachment '{users[0]}'")
    del state["security_groups"][sg_id]
    return {}


def allocate_external_ip(state, req):
    eip_id = need(req, "external_ip_id")
    pool_id = need(req, "pool_id")
    old = state["external_ips"].get(eip_id)
    if old is not None:
        if old["pool_id"] != pool_id:
            raise Permanent(f"external IP '{eip_id}' is already allocated from pool '{old['pool_id']}'")
        return {"address": old["address"]}
    cidrs = [prefix(c, "cidrs") for c in req.get("cidrs") or []]
    if not cidrs:
        raise Permanent(f"pool '{pool_id}' has no CIDRs")
    used = {e["address"] for e in state["external_ips"].values()}
    for net in sorted(cidrs, key=lambda n: (n.version, int(n.network_address), n.prefixlen)):
        ip = lowest_free(net, used)
        if ip is not None:
            state["external_ips"][eip_id] = {"pool_id": pool_id, "address": str(ip)}
            return {"address": str(ip)}
    raise Permanent(f"pool exhausted: no free address left in external IP pool '{pool_id}'")


def release_external_ip(state, req):
    eip_id = need(req, "external_ip_id")
    e = state["external_ips"].get(eip_id)
    if e is None:
        return {}
    user = consumer_of(state, e["address"])
    if user is not None:
        raise Permanent(f"external address {e['address']} is still used by {user}")
    del state["external_ips"][eip_id]
    return {}


def create_external_ip_attachment(state, req):
    att_id = need(req, "attachment_id")
    vn_id = need(req, "virtual_network_id")
    vn = vn_of(state, vn_id)
    ext = address(need(req, "external_address"), "external_address")
    target = address(need(req, "target_ip"), "target_ip")
    check_external(state, str(ext), f"external IP attachment '{att_id}'")
    if ext.version != target.version:
        raise Permanent(f"external address {ext} and target {target} are of different IP families")
    home = vn["ipv4_cidr"] if target.version == 4 else vn["ipv6_cidr"]
    if home is None or target not in ipaddress.ip_network(home):
        raise Permanent(f"target {target} is not inside virtual network '{vn_id}'")
    state["dnat"][att_id] = {"virtual_network_id": vn_id, "external_address": str(ext), "target_ip": str(target)}
    return {}


def delete_external_ip_attachment(state, req):
    state["dnat"].pop(need(req, "attachment_id"), None)
    return {}


def create_nat_gateway(state, req):
    nat_id = need(req, "nat_gateway_id")
    vn_id = need(req, "virtual_network_id")
    vn_of(state, vn_id)
    ext = address(need(req, "external_address"), "external_address")
    check_external(state, str(ext), f"NAT gateway '{nat_id}'")
    for other_id, other in state["snat"].items():
        if other["virtual_network_id"] == vn_id and other_id != nat_id:
            raise Permanent(f"virtual network '{vn_id}' already has NAT gateway '{other_id}'")
    sources = [str(prefix(c, "source_cidrs")) for c in req.get("source_cidrs") or []]
    state["snat"][nat_id] = {"virtual_network_id": vn_id, "external_address": str(ext), "source_cidrs": sources}
    return {}


def delete_nat_gateway(state, req):
    state["snat"].pop(need(req, "nat_gateway_id"), None)
    return {}


def addresses(a):
    out = {}
    if a.get("ipv4_address"):
        out["ipv4_address"] = a["ipv4_address"]
    if a.get("ipv6_address"):
        out["ipv6_address"] = a["ipv6_address"]
    return out


def create_network_attachment(state, req):
    att_id = need(req, "attachment_id")
    host, iface = need(req, "host"), need(req, "interface")
    hw = mac(need(req, "mac_address"))
    subnet_id = need(req, "subnet_id")
    vn_id = need(req, "virtual_network_id")
    s = state["subnets"].get(subnet_id)
    if s is None:
        raise Permanent(f"subnet '{subnet_id}' does not exist")
    if s["virtual_network_id"] != vn_id:
        raise Permanent(f"subnet '{subnet_id}' belongs to virtual network '{s['virtual_network_id']}'")
    sgs = sorted(set(req.get("security_groups") or []))
    for sg in sgs:
        g = state["security_groups"].get(sg)
        if g is None:
            raise Permanent(f"security group '{sg}' does not exist")
        if g["virtual_network_id"] != vn_id:
            raise Permanent(f"security group '{sg}' belongs to virtual network '{g['virtual_network_id']}'")
    port_key = f"{host}/{iface}"
    old = state["attachments"].get(att_id)
    if old is not None:
        if (old["host"], old["interface"], old["mac_address"], old["subnet_id"]) != (host, iface, hw, subnet_id):
            raise Permanent(f"network attachment '{att_id}' already exists for another port or subnet")
        old["security_groups"], old["primary"] = sgs, bool(req.get("primary"))
        return addresses(old)
    port = state["ports"].get(port_key)
    if port and port.get("attachment_id") not in (None, att_id):
        raise Permanent(f"port {port_key} is already attached by network attachment '{port['attachment_id']}'")
    for other_id, other in state["attachments"].items():
        if other["subnet_id"] == subnet_id and other["mac_address"] == hw:
            raise Permanent(f"MAC {hw} already has network attachment '{other_id}' on subnet '{subnet_id}'")
    used = set()
    for other in state["attachments"].values():
        if other["subnet_id"] == subnet_id:
            used.update(v for v in (other.get("ipv4_address"), other.get("ipv6_address")) if v)
    blocked = [ipaddress.ip_network(s["vip_cidr"])] if s.get("vip_cidr") else []
    for gw in (s.get("ipv4_gateway"), s.get("ipv6_gateway")):
        if gw:
            blocked.append(ipaddress.ip_network(gw))
    a = {
        "host": host,
        "interface": iface,
        "mac_address": hw,
        "subnet_id": subnet_id,
        "virtual_network_id": vn_id,
        "security_groups": sgs,
        "primary": bool(req.get("primary")),
        "ipv4_address": None,
        "ipv6_address": None,
    }
    for family, field in (("ipv4_cidr", "ipv4_address"), ("ipv6_cidr", "ipv6_address")):
        if s.get(family):
            ip = lowest_free(ipaddress.ip_network(s[family]), used, blocked)
            if ip is None:
                raise Permanent(f"subnet '{subnet_id}' has no free address left")
            a[field] = str(ip)
    state["attachments"][att_id] = a
    # The port leaves the parking network (if it was there) for the subnet's segment.
    state["ports"][port_key] = {"location": "attached", "attachment_id": att_id, "subnet_id": subnet_id}
    return addresses(a)


def delete_network_attachment(state, req):
    att_id = need(req, "attachment_id")
    port_key = f"{need(req, 'host')}/{need(req, 'interface')}"
    state["attachments"].pop(att_id, None)
    port = state["ports"].get(port_key)
    if not port or port.get("attachment_id") in (None, att_id):
        state["ports"][port_key] = {"location": "parked" if req.get("park") else "detached"}
    return {}


def query_dhcp_lease(state, req):
    subnet_id = need(req, "subnet_id")
    if subnet_id not in state["subnets"]:
        raise Permanent(f"subnet '{subnet_id}' does not exist")
    hw = mac(need(req, "mac_address"))
    for a in state["attachments"].values():
        if a["subnet_id"] == subnet_id and a["mac_address"] == hw:
            return addresses(a)
    return {}


OPERATIONS = {
    f.__name__: f
    for f in (
        create_virtual_network,
        delete_virtual_network,
        create_subnet,
        delete_subnet,
        apply_security_group,
        delete_security_group,
        allocate_external_ip,
        release_external_ip,
        create_external_ip_attachment,
        delete_external_ip_attachment,
        create_nat_gateway,
        delete_nat_gateway,
        create_network_attachment,
        delete_network_attachment,
        query_dhcp_lease,
    )
}

# Operations that only read: their state is not written back.
READ_ONLY = {"query_dhcp_lease"}


def main(argv):
    return run(
        argv,
        __file__,
        "OSAC_DEMO_EXEC_STATE",
        "demo-exec",
        "fabric manager",
        OPERATIONS,
        READ_ONLY,
        load,
    )


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""Uses the generated Python client (tests/fixtures/python_client/osac_client) against a server:
creates a VirtualNetwork and a Subnet and lists them, shows that the client's types refuse a
Subnet spec without its required field, and reads the VirtualNetworks' watch stream.

Usage: python_client_flow.py BASE_URL TENANT_TOKEN. Prints "ok" and exits 0 when all holds.
"""

import json
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(__file__), "..", "fixtures", "python_client"))

from osac_client import AuthenticatedClient  # noqa: E402
from osac_client.api.subnet import fulfillment_subnets_create, fulfillment_subnets_list  # noqa: E402
from osac_client.api.virtual_network import (  # noqa: E402
    fulfillment_virtual_networks_create,
    fulfillment_virtual_networks_list,
)
from osac_client.models import (  # noqa: E402
    Error,
    OsacnetV1Metadata,
    OsacnetV1Subnet,
    OsacnetV1SubnetSpec,
    OsacnetV1VirtualNetwork,
    OsacnetV1VirtualNetworkSpec,
    OsacnetV1VirtualNetworkWatchEvent,
)


def main(base, token):
    client = AuthenticatedClient(base_url=base, token=token, raise_on_unexpected_status=True)

    vn = fulfillment_virtual_networks_create.sync(
        client=client,
        body=OsacnetV1VirtualNetwork(
            metadata=OsacnetV1Metadata(name="py-net"),
            spec=OsacnetV1VirtualNetworkSpec(ipv4_cidr="10.20.0.0/16"),
        ),
    )
    assert isinstance(vn, OsacnetV1VirtualNetwork), vn
    assert vn.metadata.name == "py-net" and vn.id, vn

    subnet = fulfillment_subnets_create.sync(
        client=client,
        body=OsacnetV1Subnet(
            metadata=OsacnetV1Metadata(name="py-subnet"),
            spec=OsacnetV1SubnetSpec(virtual_network="py-net", ipv4_cidr="10.20.1.0/24"),
        ),
    )
    assert isinstance(subnet, OsacnetV1Subnet), subnet
    assert subnet.spec.virtual_network == vn.id, subnet.to_dict()

    nets = fulfillment_virtual_networks_list.sync(client=client)
    assert "py-net" in [n.metadata.name for n in nets.items], nets.to_dict()
    subnets = fulfillment_subnets_list.sync(client=client, filter_='this.spec.virtual_network == "py-net"')
    assert [s.metadata.name for s in subnets.items] == ["py-subnet"], subnets.to_dict()

    # The server's own refusal comes back as the typed Error.
    taken = fulfillment_subnets_create.sync(
        client=client,
        body=OsacnetV1Subnet(
            metadata=OsacnetV1Metadata(name="bad"),
            spec=OsacnetV1SubnetSpec(virtual_network="py-net", ipv4_cidr="not-a-cidr"),
        ),
    )
    assert isinstance(taken, Error) and "ipv4_cidr" in taken.message, taken

    # Required fields are required by the client's types: no Subnet spec without its network.
    try:
        OsacnetV1SubnetSpec(ipv4_cidr="10.20.2.0/24")
    except TypeError as e:
        assert "virtual_network" in str(e), e
    else:
        raise AssertionError("a SubnetSpec without virtual_network was built")

    # The watch: the current objects first, as ADDED, each a documented watch event.
    with client.get_httpx_client().stream(
        "GET", "/api/fulfillment/v1/virtual_networks", params={"watch": "true"}
    ) as response:
        assert response.status_code == 200, response.status_code
        assert response.headers["content-type"].startswith("text/event-stream")
        for line in response.iter_lines():
            if line.startswith("data:"):
                event = OsacnetV1VirtualNetworkWatchEvent.from_dict(json.loads(line[5:]))
                assert event.type_.value == "ADDED", event.to_dict()
                if event.object_.metadata.name == "py-net":
                    break
    print("ok")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])

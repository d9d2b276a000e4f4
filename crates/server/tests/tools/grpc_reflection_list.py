"""Lists a gRPC server's services with the stock Python reflection client (grpcio-reflection).

Usage: grpc_reflection_list.py HOST:PORT SERVICE

Prints every service name the server lists, one per line, then the methods of SERVICE as
`method SERVICE/Method`, resolved through the same client's descriptor database (this fetches
the file descriptors over reflection, as tools built on the client do).
"""

import sys

import grpc
from google.protobuf.descriptor_pool import DescriptorPool
from grpc_reflection.v1alpha.proto_reflection_descriptor_database import (
    ProtoReflectionDescriptorDatabase,
)


def main() -> None:
    target, service = sys.argv[1], sys.argv[2]
    with grpc.insecure_channel(target) as channel:
        database = ProtoReflectionDescriptorDatabase(channel)
        for name in database.get_services():
            print(name)
        pool = DescriptorPool(database)
        for method in pool.FindServiceByName(service).methods:
            print(f"method {service}/{method.name}")


if __name__ == "__main__":
    main()

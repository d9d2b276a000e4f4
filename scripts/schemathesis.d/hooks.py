"""Schemathesis hooks of scripts/schemathesis.

A list request with `watch=true` answers a server-sent event stream that stays open until the
client leaves, so a fuzzed case that sets it never finishes: such cases list instead (the
stream and its event schema are tested by the server's integration tests).
"""

import schemathesis


@schemathesis.hook
def map_query(ctx, query):
    if isinstance(query, dict) and query.get("watch") in (True, "true"):
        query = dict(query)
        query.pop("watch")
    return query

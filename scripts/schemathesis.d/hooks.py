"""Schemathesis hooks of scripts/schemathesis.

- `filter` and `order` are documented with the formats `osac-filter` (a CEL expression over
  `this`) and `osac-order` (`field [asc|desc]`, comma-separated): schemathesis draws valid values
  of those languages from the strategies below (over fields every kind shows on both surfaces),
  and arbitrary strings as invalid ones.
- A list request with `watch=true` answers a server-sent event stream that stays open until the
  client leaves; such cases list instead (the stream and its event schema are tested by the
  server's integration tests, `watch_events_fit_the_documented_stream_schema`).
"""

import schemathesis
from hypothesis import strategies as st

_NAMES = st.sampled_from(["", "a", "web", "net-1", "does-not-exist"])

schemathesis.openapi.format(
    "osac-filter",
    st.one_of(
        st.just(""),
        _NAMES.map(lambda n: f'this.metadata.name == "{n}"'),
        _NAMES.map(lambda n: f'this.metadata.name != "{n}"'),
    ),
)
schemathesis.openapi.format(
    "osac-order",
    st.lists(
        st.builds(
            lambda f, d: f + d,
            st.sampled_from(["metadata.name", "metadata.creation_timestamp", "id"]),
            st.sampled_from(["", " asc", " desc"]),
        ),
        max_size=2,
    ).map(", ".join),
)


@schemathesis.hook
def map_query(ctx, query):
    if isinstance(query, dict) and query.get("watch") in (True, "true"):
        query = dict(query)
        query.pop("watch")
    return query

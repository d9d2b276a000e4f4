-- The interval changes of object writes not folded yet into usage_intervals and
-- metering_outbox, oldest first: one row per object write that changed an interval, holding
-- what it changed as JSON. A write appends one row to one table; folding applies the rows in
-- batches (the store's sqlite/usage_changes.rs says why and how).
CREATE TABLE usage_changes (
    seq       INTEGER PRIMARY KEY,
    object_id TEXT NOT NULL,
    writes    TEXT NOT NULL
);

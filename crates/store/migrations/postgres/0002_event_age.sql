-- Event retention deletes the oldest events first; only event rows are indexed.
CREATE INDEX objects_event_age ON objects (created_at) WHERE kind = 'events';

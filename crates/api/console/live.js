// A live copy of some collections, kept by one `/console/api/watch` stream. Until every
// collection of a (re)connection has sent SYNCED, events go into a fresh copy and the previous
// one stays on screen; then the fresh copy replaces it, so objects deleted while disconnected
// disappear too. After that every event updates the copy and `onChange` is called (batched to
// one call per animation frame).

import { watch, ApiError } from './api.js';

export class Live {
  /**
   * @param params      query of the stream: {surface, collections: [..], filter}
   * @param onChange    called with this Live after the first sync and after changes
   * @param onStatus    called with 'connecting' | 'live' | 'retrying' | an ApiError
   */
  constructor(params, onChange, onStatus) {
    this.params = params;
    this.onChange = onChange;
    this.onStatus = onStatus;
    this.collections = new Map(params.collections.map((c) => [c, new Map()]));
    this.synced = false;
    this.abort = null;
    this.scheduled = false;
    this.stopped = false;
  }

  /** The objects of a collection, by id. */
  get(collection) {
    return this.collections.get(collection) || new Map();
  }

  /** The object with this id in any collection, with its collection. */
  find(id) {
    for (const [collection, objects] of this.collections) {
      const obj = objects.get(id);
      if (obj) return { collection, obj };
    }
    return null;
  }

  start() {
    this.run();
    return this;
  }

  stop() {
    this.stopped = true;
    if (this.abort) this.abort.abort();
  }

  async run() {
    let delay = 500;
    while (!this.stopped) {
      this.abort = new AbortController();
      const fresh = new Map(this.params.collections.map((c) => [c, new Map()]));
      const pending = new Set(this.params.collections);
      this.onStatus('connecting');
      try {
        const query = {
          surface: this.params.surface,
          collections: this.params.collections.join(','),
        };
        if (this.params.filter) query.filter = this.params.filter;
        await watch(query, (event, data) => {
          // A stream whose credential ended says UNAUTHENTICATED: stop, as for a 401.
          if (event === 'error') throw new ApiError(data && data.code === 'UNAUTHENTICATED' ? 401 : 500, data);
          const collection = data.collection;
          if (data.type === 'SYNCED') {
            if (pending.delete(collection)) this.collections.set(collection, fresh.get(collection));
            if (pending.size === 0) {
              this.synced = true;
              delay = 500;
              this.onStatus('live');
              this.changed();
            }
            return;
          }
          const target = pending.has(collection) ? fresh.get(collection) : this.collections.get(collection);
          if (!target || !data.object) return;
          if (data.type === 'DELETED') target.delete(data.object.id);
          else target.set(data.object.id, data.object);
          if (!pending.has(collection)) this.changed();
        }, this.abort.signal);
      } catch (e) {
        if (this.stopped) return;
        if (e instanceof ApiError && (e.status === 401 || e.status === 403 || e.status === 400)) {
          this.onStatus(e);
          return;
        }
      }
      this.abort.abort(); // a stream left because of a bad event is closed too
      if (this.stopped) return;
      this.onStatus('retrying');
      await new Promise((r) => setTimeout(r, delay));
      delay = Math.min(delay * 2, 10000);
    }
  }

  changed() {
    if (this.scheduled || !this.synced) return;
    this.scheduled = true;
    requestAnimationFrame(() => {
      this.scheduled = false;
      if (!this.stopped) this.onChange(this);
    });
  }
}

// Response cache for GET /v1/runs: the serialized page per parsed filter, valid only while the runs store's change
// stamp is unchanged. Dashboards poll the same first pages over and over; a hit costs one tiny stamp query.
// It must never serve a page that a committed write has made stale, and two filters must never share an entry.
// A page is kept from its second request on: one-off pages (cursor walks, ad-hoc filters) neither evict the pages
// being polled nor churn 28 KB buffers, which under a stream of distinct queries cost ~35 MB of RSS; and a first
// request costs no stamp query at all.
import type { RunsStore } from '../db/runs-store.ts';
import type { RunFilter } from '../db/run-types.ts';

export const MAX_ENTRIES = 64;
/** Bounds the memory held (a limit=500 page is ~280 KB); a page bigger than a quarter of it is not kept at all. */
export const MAX_BYTES = 4 * 1024 * 1024;
/** Filters asked for once since the last change, remembered (not their pages) so a second ask is cached. */
export const MAX_SEEN = 1024;

type Body = Uint8Array;

/** A page and whether this request alone holds it (built now and not kept), so it may be freed once sent. */
export interface PageResult {
  body: Body;
  owned: boolean;
}

export interface RunsPageCache {
  /**
   * The cached body for this filter, or the one `build` makes (kept from the second ask on, when the DB state allows).
   */
  page(filter: RunFilter, build: () => Body): PageResult;
  /** Entries held (tests). */
  size(): number;
}

/**
 * A key per distinct filter: every field in a fixed position, `false` for "not given" (no string, number or null
 * can be false), so `verdict=none` (null) and no verdict, or `since=0` and no since, can't collide.
 */
export function filterKey(f: RunFilter): string {
  const after = f.after ? [f.after.started_at, f.after.source, f.after.run] : false;
  return JSON.stringify([
    f.limit,
    f.verdict === undefined ? false : f.verdict,
    f.repo ?? false,
    f.group_id ?? false,
    f.status ?? false,
    f.source ?? false,
    f.since ?? false,
    f.until ?? false,
    after,
  ]);
}

export function createRunsPageCache(runs: Pick<RunsStore, 'changeStamp'>): RunsPageCache {
  // Map iteration order is insertion order: re-inserting on a hit makes the first key the least recently used.
  const entries = new Map<string, Body>();
  const seen = new Set<string>();
  let bytes = 0;
  let stampOfEntries: string | null = null;

  function keep(key: string, body: Body): PageResult {
    if (body.length > MAX_BYTES / 4) return { body, owned: true };
    seen.delete(key);
    entries.set(key, body);
    bytes += body.length;
    for (const [oldKey, old] of entries) {
      if (entries.size <= MAX_ENTRIES && bytes <= MAX_BYTES) break;
      entries.delete(oldKey);
      bytes -= old.length;
    }
    return { body, owned: false };
  }

  return {
    page(filter, build) {
      const key = filterKey(filter);
      // A filter asked for the first time is never served from nor kept in the cache, so it needs no stamp query
      // (~8 µs of a ~100 µs page when every request is a new page). `seen` only admits keys, it holds no data, so it
      // survives a stamp change: a page polled before a write is kept again on its next ask.
      if (!seen.has(key) && !entries.has(key)) {
        if (seen.size >= MAX_SEEN) seen.clear();
        seen.add(key);
        return { body: build(), owned: true };
      }
      const stamp = runs.changeStamp();
      if (stamp === null) return { body: build(), owned: true };
      // Any change anywhere in the runs table may move any page, so a new stamp drops every page at once.
      if (stamp !== stampOfEntries) {
        entries.clear();
        bytes = 0;
        stampOfEntries = stamp;
      }
      const hit = entries.get(key);
      if (hit) {
        entries.delete(key);
        entries.set(key, hit);
        return { body: hit, owned: false };
      }
      // build() reads after the stamp: a write in between (another process's commit, or the page writing a missing
      // Run JSON text) makes it read rows at least as new as the stamp, and that write also moves the stamp, so the
      // next call drops the page: never stale, at worst one extra miss.
      return keep(key, build());
    },
    size() {
      return entries.size;
    },
  };
}

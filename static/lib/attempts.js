// @ts-check
// Attempt numbers for the runs list: a run whose group has other runs is "attempt n of m" (oldest first).
// Only groups that are retry chains are looked up (a run that is not its group's first, or a group with several
// rows on the page), each with one GET /v1/runs?source=…&group_id=…, remembered until the group's rows on the page
// change. A retry chain is one source's: another source's runs naming the same group are not its attempts.
import { api, query, itemsOf } from './api.js';
import { runKey } from './run-row.js';

/** Runs looked up per group (the API's page limit; longer chains count as at least this many). */
const GROUP_LIMIT = 100;
/** Groups looked up per list render at most: a page of 50 distinct retry chains is rare, and each costs a request. */
const MAX_GROUPS = 20;

/** @typedef {import('./run-row.js').Run} Run @typedef {import('./run-row.js').AttemptInfo} AttemptInfo */

/** A retry chain's key: its source and group (another source's runs naming the group are not in it). @param {Run} r */
function groupKey(r) {
  return `${r.source}/${r.group_id || r.run}`;
}

export function createAttemptLookup() {
  /** @type {Map<string, {key: string, order: string[]}>} */
  const cache = new Map();

  /** @param {string} source @param {string} group @returns {Promise<string[]>} run keys of the group, oldest first */
  async function groupOrder(source, group) {
    const body = await api(`/v1/runs${query({ source, group_id: group, limit: GROUP_LIMIT })}`);
    return itemsOf(body).map((r) => runKey(r)).reverse();
  }

  /**
   * Attempt info per run key for the runs shown.
   * @param {Run[]} runs @returns {Promise<Map<string, AttemptInfo>>}
   */
  async function lookup(runs) {
    /** @type {Map<string, Run[]>} */
    const byGroup = new Map();
    for (const r of runs) {
      const g = groupKey(r);
      byGroup.set(g, [...(byGroup.get(g) ?? []), r]);
    }
    const chains = [...byGroup]
      .filter(([, rs]) => rs.length > 1 || rs.some((r) => r.group_id && r.group_id !== r.run))
      .slice(0, MAX_GROUPS);
    /** @type {Map<string, AttemptInfo>} */
    const out = new Map();
    await Promise.all(chains.map(async ([group, rs]) => {
      const key = rs.map((r) => `${runKey(r)}:${r.status}`).sort().join(',');
      let hit = cache.get(group);
      if (!hit || hit.key !== key) {
        try {
          const first = /** @type {Run} */ (rs[0]);
          hit = { key, order: await groupOrder(first.source, first.group_id || first.run) };
          cache.set(group, hit);
        } catch {
          return; // No numbers for this group this time; the rows still render.
        }
      }
      const order = hit.order;
      for (const r of rs) {
        const i = order.indexOf(runKey(r));
        if (i !== -1) out.set(runKey(r), { n: i + 1, m: order.length });
      }
    }));
    return out;
  }

  return { lookup };
}

/**
 * Keeps the newest row of each group (the list is newest first) and says how many earlier attempts it folds.
 * @param {Run[]} runs @param {Map<string, AttemptInfo>} attempts
 */
export function latestOnly(runs, attempts) {
  /** @type {Map<string, Run>} */
  const seen = new Map();
  /** @type {Run[]} */
  const kept = [];
  for (const r of runs) {
    const g = groupKey(r);
    if (seen.has(g)) continue;
    seen.set(g, r);
    kept.push(r);
    const info = attempts.get(runKey(r));
    if (info && info.n > 1) attempts.set(runKey(r), { ...info, earlier: info.n - 1 });
  }
  return kept;
}

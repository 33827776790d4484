// The trigger server's own series (docs/deploy.md "Metrics"): deliveries counted as their route answers; the queue
// and the jobs read from the DB when scraped.
import type { TriggerStores } from '../db/trigger-stores.ts';
import { JOB_STATUSES } from '../db/trigger-jobs-store.ts';
import type { RepoRouter } from './served-repos.ts';
import type { Reply } from '../http/respond.ts';
import { MetricsRegistry, registerDbSize, createRequestMetrics, type Counter } from '../http/metrics.ts';
import { SOURCE_NAMES } from '../webhook-sources.ts';

/** A queued job whose repository is no longer served is counted here. */
const UNSERVED = 'unserved';

export type TriggerMetrics = ReturnType<typeof createTriggerMetrics>;

export function createTriggerMetrics(stores: TriggerStores, repos: RepoRouter, dbPath: string, clock: () => number) {
  const registry = new MetricsRegistry();
  const requests = createRequestMetrics(registry);
  const deliveries = registry.counter('svc_trigger_deliveries_total', 'Webhook deliveries and /jobs requests that ' +
    'reached their route, by origin and outcome (queued, duplicate, skipped, refused)', ['origin', 'outcome']);
  // Every origin shows from the first scrape, so a rate() over a fresh server has its zero.
  for (const origin of SOURCE_NAMES) deliveries.inc([origin, 'queued'], 0);
  registry.gauge('svc_trigger_jobs', 'Jobs in the database by state', ['state'],
    () => JOB_STATUSES.map((s) => [[s], stores.jobs.countByStatus(s)] as const));
  const queue = (): Map<string, { n: number; oldest: number }> => {
    const byRepo = new Map(repos.entries.map((e) => [e.name, { n: 0, oldest: 0 }]));
    const now = clock();
    for (const group of stores.jobs.queuedGroups()) {
      const name = group.repo === null ? UNSERVED : repos.byName(group.repo)?.name ?? UNSERVED;
      const entry = byRepo.get(name) ?? { n: 0, oldest: 0 };
      byRepo.set(name, entry);
      entry.n += group.n;
      const oldest = stores.jobs.oldestQueuedIn(group.repo, group.origin);
      if (oldest) entry.oldest = Math.max(entry.oldest, (now - oldest.created_at) / 1000);
    }
    return byRepo;
  };
  // Both queue series come from one read per scrape: the depth (rendered first) keeps it for the age.
  let read: Map<string, { n: number; oldest: number }> | null = null;
  registry.gauge('svc_trigger_queue_depth', 'Jobs waiting to run, by served repository', ['repo'], () => {
    read = queue();
    return [...read].map(([repo, q]) => [[repo], q.n] as const);
  });
  registry.gauge('svc_trigger_queue_oldest_age_seconds', 'Age of the oldest waiting job, by served repository ' +
    '(0 when none waits)', ['repo'], () => {
    const q = read ?? queue();
    read = null;
    return [...q].map(([repo, v]) => [[repo], v.oldest] as const);
  });
  registerDbSize(registry, dbPath);
  return { registry, requests, deliveries };
}

// On the answer itself, not in a WeakSet of contexts (whose add and look-up cost ~1–2 µs of a delivery's ~60).
const QUEUED = Symbol('queued');

/** Marks a route's answer as a delivery whose job committed (intake.ts). */
export function queuedReply(reply: Reply): Reply {
  (reply as Reply & { [QUEUED]?: true })[QUEUED] = true;
  return reply;
}

/** An error is `refused`, a committed job `queued`, `status: "duplicate"` `duplicate`, anything else `skipped`. */
export function countDelivery(
  deliveries: Counter, origin: string, answer: () => Reply | Promise<Reply>,
): Reply | Promise<Reply> {
  const outcome = (reply: Reply): Reply => {
    const said = (reply.body as { status?: unknown } | undefined)?.status;
    const kind = QUEUED in reply ? 'queued' : said === 'duplicate' ? 'duplicate' : 'skipped';
    deliveries.inc([origin, kind]);
    return reply;
  };
  const refused = (err: unknown): never => {
    deliveries.inc([origin, 'refused']);
    throw err;
  };
  let reply: Reply | Promise<Reply>;
  try {
    reply = answer();
  } catch (err) {
    return refused(err);
  }
  return reply instanceof Promise ? reply.then(outcome, refused) : outcome(reply);
}

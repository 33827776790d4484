// A delivery on its way into the queue: what the routes hand the queue and what it answers. Types only, apart from
// queue.ts so the queue and its placement share them without a circle (DESIGN §8).
import type { SourceName } from '../webhook-sources.ts';

/** A job's origin is its source's name (src/webhook-sources.ts), as the job database stores it. */
export type Origin = SourceName;

export interface ReplyTarget {
  channel: string;
  target: Record<string, unknown>;
}

export interface EnqueueRequest {
  origin: Origin;
  /** The served repository (owner/name) the delivery was routed to (served-repos.ts). */
  repo: string;
  brief: string;
  /** The exact argv after `svc`. */
  args: string[];
  dedupeKeys: readonly string[];
  reply?: ReplyTarget | undefined;
}

export type EnqueueResult = { kind: 'queued'; jobId: string } | { kind: 'duplicate'; jobId: string } | { kind: 'full' };

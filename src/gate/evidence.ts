// Every connection through the egress gate is evidence: one record per CONNECT tunnel, plain-HTTP request, model API
// request or relayed span export, allowed or denied (docs/gate.md "The log"). This file owns the record's shape, its
// reader and the summary a receipt carries. It never records paths, headers or bodies: hosts and counts only.
import { num, obj, str } from '../untrusted.ts';

/** One connection; docs/gate.md "The log" says what each field holds. */
export interface EgressRecord {
  /** ISO time the request reached the gate. */
  time: string;
  /** `traces`: a pod's span export the gate relayed to its collector (`host`, `port`), or refused. */
  kind: 'connect' | 'http' | 'model' | 'traces';
  host: string;
  port: number;
  method: string | null;
  /** The model API name, for model requests. */
  model: string | null;
  decision: 'allowed' | 'denied';
  rule: string | null;
  reason: string | null;
  address: string | null;
  /** The status the client got, for http and model requests and refusals. */
  status: number | null;
  bytesUp: number;
  bytesDown: number;
  /** From arrival to the end of the connection. */
  ms: number;
  sni: string | null;
  /** On a shared gate (`svc gate serve`): the job, run and repository whose credential the client presented. */
  job?: string;
  run?: string;
  repo?: string;
  /** A model request the API answered 2xx, with metering on: its usage and price (docs/gate.md "Metered cost"). */
  metered?: MeteredCall;
}

/** What one model call used, as the API's response said, and what that costs by the price table. */
export interface MeteredCall {
  model: string | null;
  tokens_in: number;
  tokens_out: number;
  cache_read: number;
  cache_write: number;
  /** null: unpriced (no row for the model) or unknown usage. */
  usd: number | null;
  /** Why the usage could not be read (the response went to the client untouched); null when it was. */
  unknown: string | null;
}

function readMetered(value: unknown): MeteredCall {
  const o = obj(value);
  return {
    model: str(o.model), tokens_in: num(o.tokens_in), tokens_out: num(o.tokens_out), cache_read: num(o.cache_read),
    cache_write: num(o.cache_write), usd: typeof o.usd === 'number' && Number.isFinite(o.usd) ? o.usd : null,
    unknown: typeof o.unknown === 'string' ? o.unknown : null,
  };
}

function oneOf<T extends string>(value: unknown, allowed: readonly T[], fallback: T): T {
  return allowed.find((a) => a === value) ?? fallback;
}

/**
 * The record of a connection arriving now: denied until decided, nothing measured yet, and on a shared gate the job
 * its client spoke for (none on a run's own gate).
 */
export function arrivingRecord(
  kind: EgressRecord['kind'], asker: { who: { job: string; run: string; repo: string } | null },
  fields: Partial<EgressRecord> = {},
): EgressRecord {
  const { who } = asker;
  return {
    time: new Date().toISOString(), kind, host: '', port: 0, method: null, model: null, decision: 'denied', rule: null,
    reason: null, address: null, status: null, bytesUp: 0, bytesDown: 0, ms: 0, sni: null,
    ...(who ? { job: who.job, run: who.run, repo: who.repo } : {}), ...fields,
  };
}

function attribution(o: Record<string, unknown>): Pick<EgressRecord, 'job' | 'run' | 'repo'> {
  const job = str(o.job);
  const run = str(o.run);
  return job && run ? { job, run, repo: typeof o.repo === 'string' ? o.repo : '' } : {};
}

/** One record read back from untrusted JSON (a log line, a gate's answer); missing fields get neutral values. */
export function readEgressRecord(value: unknown): EgressRecord {
  const o = obj(value);
  return {
    time: str(o.time) ?? '', kind: oneOf(o.kind, ['connect', 'http', 'model', 'traces'] as const, 'connect'),
    host: str(o.host) ?? '', port: num(o.port), method: str(o.method), model: str(o.model),
    decision: oneOf(o.decision, ['allowed', 'denied'] as const, 'denied'), rule: str(o.rule),
    reason: str(o.reason), address: str(o.address), status: typeof o.status === 'number' ? o.status : null,
    bytesUp: num(o.bytesUp), bytesDown: num(o.bytesDown), ms: num(o.ms), sni: str(o.sni),
    ...attribution(o),
    ...(o.metered !== undefined ? { metered: readMetered(o.metered) } : {}),
  };
}

export interface EgressHost {
  host: string;
  port: number;
  allowed: number;
  denied: number;
  bytesUp: number;
  bytesDown: number;
}

export interface EgressDenial {
  host: string;
  port: number;
  reason: string;
  count: number;
}

export interface EgressSummary {
  connections: number;
  allowed: number;
  denied: number;
  bytesUp: number;
  bytesDown: number;
  /** Every destination asked for, most connections first. */
  hosts: EgressHost[];
  /** Each distinct refusal, most frequent first. */
  denials: EgressDenial[];
}

/** Per-destination and per-refusal counts, keyed by host and port (and reason). */
export interface EgressTally {
  hosts: Map<string, EgressHost>;
  denials: Map<string, EgressDenial>;
}

/**
 * Counts one record into the tally, which holds at most `cap` destinations and `cap` refusals; false when the record
 * named one past that (so it is counted in no entry).
 */
export function tallyRecord(t: EgressTally, r: EgressRecord, cap = Infinity): boolean {
  const key = `${r.host}\u0000${r.port}`;
  let host = t.hosts.get(key);
  if (!host && t.hosts.size < cap) {
    host = { host: r.host, port: r.port, allowed: 0, denied: 0, bytesUp: 0, bytesDown: 0 };
    t.hosts.set(key, host);
  }
  if (host) {
    host.bytesUp += r.bytesUp;
    host.bytesDown += r.bytesDown;
    if (r.decision === 'allowed') host.allowed += 1;
    else host.denied += 1;
  }
  if (r.decision === 'allowed') return host !== undefined;
  const reason = r.reason ?? 'denied';
  const dkey = `${key}\u0000${reason}`;
  let denial = t.denials.get(dkey);
  if (!denial && t.denials.size < cap) {
    denial = { host: r.host, port: r.port, reason, count: 0 };
    t.denials.set(dkey, denial);
  }
  if (denial) denial.count += 1;
  return host !== undefined && denial !== undefined;
}

/** The tally's destinations with the most connections first, and its refusals most frequent first. */
export function sortedTally(t: EgressTally): { hosts: EgressHost[]; denials: EgressDenial[] } {
  return {
    hosts: [...t.hosts.values()].sort((a, b) => b.allowed + b.denied - (a.allowed + a.denied)),
    denials: [...t.denials.values()].sort((a, b) => b.count - a.count),
  };
}

/** What a receipt says about a run's network: who it talked to, how much, and what it was refused. */
export function summarizeEgress(records: readonly EgressRecord[]): EgressSummary {
  const tally: EgressTally = { hosts: new Map(), denials: new Map() };
  let allowed = 0;
  let bytesUp = 0;
  let bytesDown = 0;
  for (const r of records) {
    tallyRecord(tally, r);
    if (r.decision === 'allowed') allowed += 1;
    bytesUp += r.bytesUp;
    bytesDown += r.bytesDown;
  }
  const connections = records.length;
  return { connections, allowed, denied: connections - allowed, bytesUp, bytesDown, ...sortedTally(tally) };
}

// Every connection through the gate is evidence (docs/gate.md "The log"): the record's shape, its reader and the
// summary a receipt carries. Never paths, headers or bodies: hosts and counts only.
import { num, obj, oneOf, str } from '../untrusted.ts';

/** One connection; docs/gate.md "The log" says what each field holds. */
export interface EgressRecord {
  time: string;
  /** `traces`: a pod's span export the gate relayed to its collector (`host`, `port`), or refused. */
  kind: 'connect' | 'http' | 'model' | 'traces';
  host: string;
  port: number;
  method: string | null;
  model: string | null;
  decision: 'allowed' | 'denied';
  rule: string | null;
  reason: string | null;
  address: string | null;
  status: number | null;
  bytesUp: number;
  bytesDown: number;
  ms: number;
  sni: string | null;
  /** On a shared gate (`svc gate serve`): the job, run and repository whose credential the client presented. */
  job?: string;
  run?: string;
  repo?: string;
  /** A model request the API answered 2xx, with metering on. */
  metered?: MeteredCall;
}

export interface MeteredCall {
  model: string | null;
  /** The uncached input; cached input is `cache_read`. */
  tokens_in: number;
  tokens_out: number;
  cache_read: number;
  cache_write: number;
  /** Of cache_write, the tokens written for an hour (Anthropic's `cache_creation.ephemeral_1h_input_tokens`), which
   * cost more than five minutes' writes; only when there are any. */
  cache_write_1h?: number;
  /** null: unpriced (no row for the model) or unknown usage. */
  usd: number | null;
  /** Why the usage could not be read; null when it was. */
  unknown: string | null;
  /** Only on a call counted at bounds its request could not set for certain (usage.ts Asked `doubt`): why. The count
   * may be low, so a budget the run is held to cannot be kept: its next model call is refused (budgets.ts). */
  doubt?: string;
}

/** Tokens of one call as the API counted them. */
export type CallTokens = Omit<MeteredCall, 'usd' | 'unknown' | 'doubt'>;

function readMetered(value: unknown): MeteredCall {
  const o = obj(value);
  return {
    model: str(o.model), tokens_in: num(o.tokens_in), tokens_out: num(o.tokens_out), cache_read: num(o.cache_read),
    cache_write: num(o.cache_write), usd: typeof o.usd === 'number' && Number.isFinite(o.usd) ? o.usd : null,
    unknown: typeof o.unknown === 'string' ? o.unknown : null,
    ...(typeof o.doubt === 'string' ? { doubt: o.doubt } : {}),
  };
}

/** The record of a connection arriving now: denied until decided, and on a shared gate the job it spoke for. */
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
    time: str(o.time) ?? '', kind: oneOf(o.kind, ['connect', 'http', 'model', 'traces'] as const) ?? 'connect',
    host: str(o.host) ?? '', port: num(o.port), method: str(o.method), model: str(o.model),
    decision: oneOf(o.decision, ['allowed', 'denied'] as const) ?? 'denied', rule: str(o.rule),
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
  denied: number;
  hosts: EgressHost[];
  denials: EgressDenial[];
}

/** Running totals, and counts per destination and per refusal keyed by host and port (and reason). */
export type EgressTally = Pick<EgressSummary, 'connections' | 'denied'> & {
  hosts: Map<string, EgressHost>;
  denials: Map<string, EgressDenial>;
};

export function newTally(): EgressTally {
  return { connections: 0, denied: 0, hosts: new Map(), denials: new Map() };
}

/** Counts one record; false when it named a destination or refusal past the `cap` of each (so in no entry). */
export function tallyRecord(t: EgressTally, r: EgressRecord, cap = Infinity): boolean {
  t.connections += 1;
  if (r.decision === 'denied') t.denied += 1;
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

/** The tally with its destinations most connections first, and its refusals most frequent first. */
export function tallySummary(t: EgressTally): EgressSummary {
  return {
    connections: t.connections, denied: t.denied,
    hosts: [...t.hosts.values()].sort((a, b) => b.allowed + b.denied - (a.allowed + a.denied)),
    denials: [...t.denials.values()].sort((a, b) => b.count - a.count),
  };
}

/** What a receipt says about a run's network: who it talked to, how much, and what it was refused. */
export function summarizeEgress(records: readonly EgressRecord[]): EgressSummary {
  const tally = newTally();
  for (const r of records) tallyRecord(tally, r);
  return tallySummary(tally);
}

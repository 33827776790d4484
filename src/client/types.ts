// Wire types of the Control Plane /v1 API (DESIGN §3–4), shared by the client and its callers.
import type { FailureClass, RunJson, RunStatus, Verdict } from '../run-json.ts';

export type { RunJson, RunStatus, Verdict }; // published with svc/client (client.ts: export type *)

export interface RunRef {
  source: string;
  run: string;
}

/** A run as the API answers it; open to fields a newer server may add. */
export interface Run extends RunJson {
  [extra: string]: unknown;
}

export interface RunEvent extends RunRef {
  id: number;
  seq: number;
  ts: string;
  kind: string;
  data: unknown;
}

export interface Page<T> {
  items: T[];
  next_cursor: string | null;
}

export interface PageQuery {
  limit?: number;
  cursor?: string;
}

export interface RunFilter extends PageQuery {
  /** `none` asks for runs that have no verdict yet (no receipt). */
  verdict?: Verdict | 'none';
  status?: RunStatus;
  failure?: FailureClass;
  repo?: string;
  group_id?: string;
  /** ISO-8601 or unix ms. */
  since?: string | number;
  until?: string | number;
}

export type StatsFilter = Pick<RunFilter, 'since' | 'until' | 'repo'>;

export interface StartRequest {
  brief?: string;
  spec_path?: string;
  issue_url?: string;
  repo: string;
  provider?: string;
  pr?: boolean;
  request_id?: string;
}

export interface ConfigDocument {
  config: Record<string, unknown>;
  version: number;
}

/** One entry of GET /v1/providers, which answers a bare array of these (DESIGN §4). */
export interface Provider {
  name: string;
  kind: 'builtin' | 'command';
  available: boolean;
  path: string | null;
  version: string | null;
  /** The version svc's provider conformance suite drove; null for aider and command providers. */
  tested_version: string | null;
  /** The range that run proves, e.g. ">=2.1.330 <3.0.0". */
  tested_range: string | null;
  /** Whether `version` lies in `tested_range`; null when either is unknown. */
  within_tested_range: boolean | null;
  /** Whether the `default_provider` setting names it. */
  default: boolean;
}

export interface ReviewRisk {
  score: number;
  level: string;
  reasons: string[];
  files: string[];
  [extra: string]: unknown;
}

export interface IngestBatch {
  source: string;
  runs?: Array<Omit<Run, 'source'> | Record<string, unknown>>;
  events?: Array<{ run: string; seq: number; ts: string; kind: string; data: unknown }>;
  artifacts?: Array<{ run: string; path: string; content_type: string; content_base64: string }>;
}

export interface IngestResult {
  runs: number;
  events: number;
  duplicates: number;
  artifacts: number;
  control: Array<{ run: string; action: string; [extra: string]: unknown }>;
  notifications?: number;
  /** The runs the batch sent a key for that stay unbound, stored first without one (ingest-apply.ts); else absent. */
  unbound?: string[];
  /** The runs the batch wrote with the key they moved onto (a pod's signer) that a stop was asked for; else absent. */
  stop_asked?: string[];
  /** For those runs, the highest event seq stored (the signer's events go after it); else absent. */
  last_seq?: Array<{ run: string; seq: number }>;
  /** The runs of the batch the operator deleted (DELETE /v1/runs/…): dropped, not stored; else absent. */
  deleted?: string[];
  /** How many repositories the source now serves, when the batch carried served_repos. */
  served_repos?: number;
}

export interface Artifact {
  contentType: string;
  etag: string | null;
  body: Uint8Array;
}

export interface StreamMessage {
  /** The SSE `id:` (the Control Plane event id) and `event:` (the event kind, default "message"). */
  id: string | null;
  event: string;
  /** `data:` parsed as JSON when it is JSON, else the raw text. */
  data: unknown;
}

/** Bodies the API defines loosely (stats, audit entries, catalog rows): typed as open objects. */
export type JsonObject = Record<string, unknown>;

// Starts the real Control Plane in-process on 127.0.0.1:0 with a fresh temp DB and HOME, for black-box HTTP tests.
import { mkdtempSync, rmSync, mkdirSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { startControl, type RunningControl } from '../../src/control/main.ts';
import { resolveControlSettings, type ControlSettings } from '../../src/control/settings.ts';
import type { ControlDeps } from '../../src/control/deps.ts';
import type { RunInput } from '../../src/db/run-types.ts';
import { silentLogger } from '../../src/log.ts';
import { buildOpenapi } from '../../src/control/openapi.ts';
import { controlRoutes } from '../../src/control/app.ts';
import { checkResponse } from './openapi-check.ts';

// Every response a test gets through request() is checked against the OpenAPI document: a status or body
// the document does not give that route fails the test that saw it.
const DOCUMENT = buildOpenapi('0.0.0-test', controlRoutes) as unknown as Parameters<typeof checkResponse>[0];

export class UndocumentedResponse extends Error {
  constructor(problems: string[]) {
    super(`The response differs from the OpenAPI document:\n${problems.join('\n')}`);
    this.name = 'UndocumentedResponse';
  }
}

export interface TestResponse {
  status: number;
  headers: Headers;
  /** Parsed body when it is JSON, else undefined. */
  json: any;
  text: string;
}

export interface RequestOptions {
  body?: unknown;
  headers?: Record<string, string>;
  /** Sent as `Authorization: Bearer <token>`; defaults to the server's own token when it has one. Pass null to omit. */
  token?: string | null;
}

export interface TestControl {
  url: string;
  deps: ControlDeps;
  running: RunningControl;
  /** Temp directory holding db, home (svcHome's parent) and answers. */
  dir: string;
  home: string;
  request(method: string, path: string, opts?: RequestOptions): Promise<TestResponse>;
  close(): Promise<void>;
}

export interface TestControlOptions {
  token?: string;
  host?: string;
  env?: Record<string, string>;
  settings?: Partial<ControlSettings>;
  /** Repositories to register through POST /v1/import once the server listens: runs start only in those. */
  projects?: string[];
}

export async function startTestControl(opts: TestControlOptions = {}): Promise<TestControl> {
  const dir = mkdtempSync(join(tmpdir(), 'svc-'));
  const home = join(dir, 'home');
  mkdirSync(home, { recursive: true });
  // Its own tmp, removed with `dir`: what the server and the runs it starts write there never lands in the machine's.
  const tmp = join(dir, 'tmp');
  mkdirSync(tmp);
  const env: NodeJS.ProcessEnv = { PATH: process.env.PATH, HOME: home, TMPDIR: tmp, ...opts.env };
  // The registry's defaults (an environment with only HOME), then what a test server needs.
  const settings: ControlSettings = {
    ...resolveControlSettings({ HOME: home }, {
      host: opts.host ?? '127.0.0.1', port: '0', db: join(dir, 'control.db'),
    }),
    token: opts.token,
    allowInsecureBind: true,
    answerDir: join(dir, 'answers'),
    ...opts.settings,
  };
  const running = await startControl(settings, env, silentLogger);
  const url = running.url;

  async function request(method: string, path: string, ro: RequestOptions = {}): Promise<TestResponse> {
    // Closed after each request: a pooled keep-alive connection the server closes (its keep-alive timeout) just as
    // a request goes out on it fails that request ("fetch failed", ECONNRESET: seen under load in import-ownership's
    // submodule test, after seconds of synchronous git work that also held up this process's timers).
    const headers: Record<string, string> = { connection: 'close', ...ro.headers };
    const token = ro.token === undefined ? opts.token : ro.token;
    if (token) headers.authorization ??= `Bearer ${token}`;
    let body: string | undefined;
    if (ro.body !== undefined) {
      body = typeof ro.body === 'string' ? ro.body : JSON.stringify(ro.body);
      headers['content-type'] ??= 'application/json';
    }
    const res = await fetch(url + path, { method, headers, ...(body !== undefined ? { body } : {}) });
    const text = await res.text();
    let json: unknown;
    if ((res.headers.get('content-type') ?? '').includes('json') && text) {
      try {
        json = JSON.parse(text);
      } catch {
        json = undefined;
      }
    }
    const problems = checkResponse(DOCUMENT, { method, path, status: res.status, contentType: res.headers.get('content-type'), json });
    if (problems.length > 0) throw new UndocumentedResponse(problems);
    return { status: res.status, headers: res.headers, json, text };
  }

  for (const path of opts.projects ?? []) {
    const res = await request('POST', '/v1/import', { body: { path } });
    if (res.status !== 200) throw new Error(`Registering ${path} failed: ${res.status} ${res.text}`);
  }

  return {
    url,
    deps: running.deps,
    running,
    dir,
    home,
    request,
    async close() {
      try {
        await running.close();
      } finally {
        rmSync(dir, { recursive: true, force: true }); // also when a test broke the server (its database closed)
      }
    },
  };
}

/** A run as the stores take it; `i` spreads start times one second apart from a fixed epoch. */
/** Stops, through the API, every run still active, so no worker outlives the test that started it. */
export async function stopActiveRuns(control: TestControl): Promise<void> {
  for (const r of control.deps.stores.runs.list({ limit: 100 })) {
    if (['queued', 'running', 'blocked'].includes(r.status)) {
      await control.request('POST', `/v1/runs/${r.source}/${r.run}/stop`, { body: {} }).catch(() => undefined);
    }
  }
}

export function makeRun(i: number, fields: Partial<RunInput> = {}): RunInput {
  const started = Date.UTC(2026, 0, 1) + i * 1000;
  return {
    run: `r${String(i).padStart(6, '0')}`,
    status: 'succeeded',
    started_at: started,
    updated_at: started,
    repo: 'acme/api',
    verdict: 'verified',
    brief: `brief ${i}`,
    ...fields,
  };
}

/** Inserts n runs straight through the stores (no HTTP); returns their ids, newest last. */
export function seedRuns(deps: ControlDeps, n: number, fields: Partial<RunInput> = {}, source = 'local'): string[] {
  const ids: string[] = [];
  deps.db.exec('BEGIN');
  try {
    for (let i = 0; i < n; i++) {
      const input = makeRun(i, fields);
      deps.stores.runs.upsert(source, input);
      ids.push(input.run);
    }
    deps.db.exec('COMMIT');
  } catch (err) {
    deps.db.exec('ROLLBACK');
    throw err;
  }
  return ids;
}

// svc's own Prometheus metrics (docs/deploy.md "Metrics"): counters, gauges read at scrape time and fixed-bucket
// histograms, rendered in the text exposition format 0.0.4. Label values are bounded by the caller (a route template,
// a closed set); a value is never a run id, a brief or any text a client chose. Never holds a token or a body.
import { statSync } from 'node:fs';
import type { Reply } from './respond.ts';

export const METRICS_TYPE = 'text/plain; version=0.0.4; charset=utf-8';

const METRIC_NAME = /^svc_[a-z0-9_]+$/;
const LABEL_NAME = /^[a-z_][a-z0-9_]*$/;

/** A label value as the format writes it between quotes: backslash, double quote and line feed escaped. */
export function escapeLabelValue(value: string): string {
  return /[\\"\n]/.test(value) ? value.replace(/\\/g, '\\\\').replace(/"/g, '\\"').replace(/\n/g, '\\n') : value;
}

/** HELP text escapes only backslash and line feed (format 0.0.4). */
function escapeHelp(text: string): string {
  return text.replace(/\\/g, '\\\\').replace(/\n/g, '\\n');
}

/** String(n) (NaN is "NaN"), but the infinities as the format spells them. */
function formatValue(n: number): string {
  if (n === Infinity) return '+Inf';
  return n === -Infinity ? '-Inf' : String(n);
}

function labelText(names: readonly string[], values: readonly string[], extra = ''): string {
  if (names.length === 0 && extra === '') return '';
  const parts = names.map((name, i) => `${name}="${escapeLabelValue(values[i] ?? '')}"`);
  if (extra !== '') parts.push(extra);
  return `{${parts.join(',')}}`;
}

export type Counter = ReturnType<MetricsRegistry['counter']>;
export type Histogram = ReturnType<MetricsRegistry['histogram']>;

const KEY_SEPARATOR = '\u0000';

/** The cell of one series (its label values), made on first use. */
function cellOf<C>(cells: Map<string, C>, values: readonly string[], make: () => C): C {
  const key = values.join(KEY_SEPARATOR);
  let cell = cells.get(key);
  if (!cell) cells.set(key, cell = make());
  return cell;
}

/** One server's metrics: each server (Control Plane, trigger, gate) keeps its own, so /metrics shows its own. */
export class MetricsRegistry {
  private readonly families: Array<{ name: string; head: string; render(lines: string[]): void }> = [];

  private add(name: string, help: string, type: string, labels: readonly string[], render: (l: string[]) => void) {
    if (!METRIC_NAME.test(name) || this.families.some((f) => f.name === name)) {
      throw new TypeError(`Bad or repeated metric name "${name}"`);
    }
    for (const l of labels) if (!LABEL_NAME.test(l) || l === 'le') throw new TypeError(`Bad label name "${l}"`);
    this.families.push({ name, head: `# HELP ${name} ${escapeHelp(help)}\n# TYPE ${name} ${type}`, render });
  }

  /** A cumulative count; `at` finds one series once, so its `inc` is an addition (no label key built per call). */
  counter(name: string, help: string, labels: readonly string[] = []) {
    const cells = new Map<string, { values: readonly string[]; n: number }>();
    this.add(name, help, 'counter', labels, (lines) => {
      for (const c of cells.values()) lines.push(`${name}${labelText(labels, c.values)} ${formatValue(c.n)}`);
    });
    const cell = (values: readonly string[]) => cellOf(cells, values, () => ({ values: [...values], n: 0 }));
    return {
      inc(values: readonly string[] = [], by = 1) {
        cell(values).n += by;
      },
      at(values: readonly string[]) {
        const found = cell(values);
        return { inc: (by = 1) => void (found.n += by) };
      },
    };
  }

  /** Series read when scraped: label values (in the declared order) and the value. */
  gauge(name: string, help: string, labels: readonly string[],
    read: () => Iterable<readonly [readonly string[], number]>): void {
    this.add(name, help, 'gauge', labels, (lines) => {
      for (const [values, n] of read()) lines.push(`${name}${labelText(labels, values)} ${formatValue(n)}`);
    });
  }

  /** `buckets`: upper bounds, ascending; `+Inf` is added. `at` finds one series once (as the counter's). */
  histogram(name: string, help: string, labels: readonly string[], buckets: readonly number[]) {
    type Cell = { values: readonly string[]; counts: number[]; sum: number; count: number };
    const cells = new Map<string, Cell>();
    const bounds = buckets.map(formatValue);
    this.add(name, help, 'histogram', labels, (lines) => {
      for (const c of cells.values()) {
        let cumulative = 0;
        for (let i = 0; i < buckets.length; i++) {
          cumulative += c.counts[i]!;
          lines.push(`${name}_bucket${labelText(labels, c.values, `le="${bounds[i]}"`)} ${cumulative}`);
        }
        lines.push(`${name}_bucket${labelText(labels, c.values, 'le="+Inf"')} ${c.count}`);
        lines.push(`${name}_sum${labelText(labels, c.values)} ${formatValue(c.sum)}`);
        lines.push(`${name}_count${labelText(labels, c.values)} ${c.count}`);
      }
    });
    const cell = (values: readonly string[]): Cell => cellOf(cells, values,
      () => ({ values: [...values], counts: new Array<number>(buckets.length).fill(0), sum: 0, count: 0 }));
    const add = (c: Cell, value: number): void => {
      let i = 0;
      while (i < buckets.length && value > buckets[i]!) i++;
      if (i < buckets.length) c.counts[i]!++;
      c.sum += value;
      c.count++;
    };
    return {
      observe(values: readonly string[], value: number) {
        add(cell(values), value);
      },
      at(values: readonly string[]) {
        const found = cell(values);
        return { observe: (value: number) => add(found, value) };
      },
    };
  }

  render(): string {
    const lines: string[] = [];
    for (const f of this.families) {
      lines.push(f.head);
      f.render(lines);
    }
    return `${lines.join('\n')}\n`;
  }
}

/** GET /metrics's answer: the registry as text, never cached. */
export function metricsReply(registry: MetricsRegistry): Reply {
  return { status: 200, headers: { 'content-type': METRICS_TYPE, 'cache-control': 'no-store' },
    body: registry.render() };
}

/** The server's SQLite file and its write-ahead log, in bytes, read when scraped (absent files count 0). */
export function registerDbSize(registry: MetricsRegistry, dbPath: string): void {
  const size = (path: string): number => statSync(path, { throwIfNoEntry: false })?.size ?? 0;
  registry.gauge('svc_db_size_bytes', 'Size of the server\'s database file and its write-ahead log', ['file'],
    () => dbPath === ':memory:' ? [] : [[['db'], size(dbPath)], [['wal'], size(`${dbPath}-wal`)]]);
}

/** Seconds: HTTP requests answer in milliseconds; a slow one (an export, a stream's life) lands in the top buckets. */
const LATENCY_BUCKETS = [0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 60];

const METHODS: ReadonlySet<string> = new Set(['GET', 'HEAD', 'POST', 'PUT', 'PATCH', 'DELETE', 'OPTIONS', 'CONNECT']);

/** A request method as a bounded label: any other token a client invents is `other`. */
function methodLabel(method: string | undefined): string {
  return method !== undefined && METHODS.has(method) ? method : 'other';
}

export type RequestMetrics = ReturnType<typeof createRequestMetrics>;

/** The request series every server has, by route template (never a raw path), method and status. */
export function createRequestMetrics(registry: MetricsRegistry) {
  const requests = registry.counter('svc_http_requests_total',
    'HTTP requests answered, by route template, method and status', ['route', 'method', 'status']);
  const latency = registry.histogram('svc_http_request_duration_seconds', 'Time from a request\'s arrival to the end ' +
    'of its answer, by route template and method', ['route', 'method'], LATENCY_BUCKETS);
  // Each series found through maps of its own label values (route templates, methods and statuses are few): no label
  // key is built per request.
  type Series = { latency: { observe(v: number): void }; byStatus: Map<number, { inc(): void }> };
  const byRoute = new Map<string, Map<string, Series>>();
  return {
    observe(route: string, method: string | undefined, status: number, seconds: number): void {
      const m = methodLabel(method);
      let byMethod = byRoute.get(route);
      if (!byMethod) byRoute.set(route, byMethod = new Map());
      let series = byMethod.get(m);
      if (!series) byMethod.set(m, series = { latency: latency.at([route, m]), byStatus: new Map() });
      let count = series.byStatus.get(status);
      if (!count) series.byStatus.set(status, count = requests.at([route, m, String(status)]));
      count.inc();
      series.latency.observe(seconds);
    },
  };
}

// Model use metered at the gate: a model name comes from a response the gate read, so it is a label only when short
// and plain, and only for the first MODELS_MAX series; else `other`.
const MODEL_LABEL_MAX = 64;
const MODELS_MAX = 50;

function modelLabel(model: string): string {
  if (model.length === 0 || model.length > MODEL_LABEL_MAX || !/^[A-Za-z0-9._:/@-]+$/.test(model)) return 'other';
  return model;
}

/**
 * The gate's model-use series, and the function that counts one model call's tokens and metered cost (USD) in them for
 * `provider` (a model API name from src/gate/model-apis.ts) and `model`.
 */
export function createModelUsage(registry: MetricsRegistry) {
  const tokens = registry.counter('svc_gate_model_tokens_total',
    'Model tokens (input and output) metered at the gate, by model API and model', ['provider', 'model']);
  const cost = registry.counter('svc_gate_model_cost_usd_total', 'Model cost metered at the gate, in US dollars, by ' +
    'model API and model', ['provider', 'model']);
  const seen = new Set<string>();
  return (provider: string, model: string, tokenCount: number, usd: number): void => {
    let labels = [provider, modelLabel(model)];
    const key = labels.join(KEY_SEPARATOR);
    if (seen.has(key) || seen.size < MODELS_MAX) seen.add(key);
    else labels = [provider, 'other'];
    tokens.inc(labels, Number.isFinite(tokenCount) && tokenCount > 0 ? tokenCount : 0);
    if (Number.isFinite(usd) && usd > 0) cost.inc(labels, usd);
  };
}

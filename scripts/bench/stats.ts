// Pure number helpers for the bench: percentiles, medians, ratios and bar checks. No I/O, no timing.

export interface LatencySummary {
  count: number;
  p50: number;
  p99: number;
  max: number;
  mean: number;
}

/** Nearest-rank percentile (p in 0..100) of an ascending array; NaN when empty. */
export function percentile(sorted: ArrayLike<number>, p: number): number {
  if (sorted.length === 0) return Number.NaN;
  if (p <= 0) return sorted[0] as number;
  if (p >= 100) return sorted[sorted.length - 1] as number;
  const rank = Math.ceil((p / 100) * sorted.length);
  return sorted[Math.max(0, rank - 1)] as number;
}

/** Sorts a copy (typed arrays sort numerically) and summarises it. */
export function summarize(values: ArrayLike<number>): LatencySummary {
  const sorted = Float64Array.from(values).sort();
  let sum = 0;
  for (const v of sorted) sum += v;
  return {
    count: sorted.length,
    p50: percentile(sorted, 50),
    p99: percentile(sorted, 99),
    max: sorted.length ? (sorted[sorted.length - 1] as number) : Number.NaN,
    mean: sorted.length ? sum / sorted.length : Number.NaN,
  };
}

export function median(values: readonly number[]): number {
  const finite = values.filter((v) => Number.isFinite(v));
  return percentile(Float64Array.from(finite).sort(), 50);
}

/** value / ceiling, NaN when either is missing or the ceiling is not positive. */
export function ratio(value: number, ceiling: number): number {
  if (!Number.isFinite(value) || !Number.isFinite(ceiling) || ceiling <= 0) return Number.NaN;
  return value / ceiling;
}

/** A bar is "at least" (throughput, ratio) or "below" (latency, memory, time). */
export interface Bar {
  kind: 'min' | 'max';
  value: number;
}

export function meetsBar(value: number, bar: Bar): boolean {
  if (!Number.isFinite(value)) return false;
  return bar.kind === 'min' ? value >= bar.value : value < bar.value;
}

/** Compact numbers for the table: 3 significant digits, thousands separated. */
export function formatNumber(value: number, unit = ''): string {
  if (!Number.isFinite(value)) return 'n/a';
  const abs = Math.abs(value);
  const digits = abs >= 100 ? 0 : abs >= 10 ? 1 : abs >= 1 ? 2 : 3;
  const text = value.toLocaleString('en-US', { maximumFractionDigits: digits, minimumFractionDigits: 0 });
  return unit ? `${text} ${unit}` : text;
}

/**
 * Fixed-resolution latency histogram for streams too large to keep every sample (SSE: millions of
 * deliveries). Values above the range land in the last bucket, so p99 is never understated.
 */
export interface Histogram {
  add(valueMs: number): void;
  readonly count: number;
  percentile(p: number): number;
  max(): number;
  /** Non-empty buckets as [index, count] pairs plus the max: small enough to send over IPC. */
  export(): HistogramData;
  /** Adds another histogram of the same resolution and range (e.g. from another subscriber process). */
  merge(data: HistogramData): void;
}

export interface HistogramData {
  buckets: Array<[number, number]>;
  max: number;
}

export function createHistogram(resolutionMs = 0.1, rangeMs = 10_000): Histogram {
  const buckets = new Uint32Array(Math.ceil(rangeMs / resolutionMs) + 1);
  let count = 0;
  let max = Number.NaN;
  return {
    add(valueMs) {
      const v = Math.max(0, valueMs);
      const i = Math.min(buckets.length - 1, Math.floor(v / resolutionMs));
      buckets[i] = (buckets[i] ?? 0) + 1;
      count += 1;
      if (!(v <= max)) max = v;
    },
    get count() {
      return count;
    },
    percentile(p) {
      if (count === 0) return Number.NaN;
      const rank = Math.max(1, Math.ceil((Math.min(100, Math.max(0, p)) / 100) * count));
      let seen = 0;
      for (let i = 0; i < buckets.length; i++) {
        seen += buckets[i] ?? 0;
        // Report the bucket's upper edge: a conservative (never optimistic) latency.
        if (seen >= rank) return (i + 1) * resolutionMs;
      }
      return max;
    },
    max: () => max,
    export() {
      const pairs: Array<[number, number]> = [];
      for (let i = 0; i < buckets.length; i++) if (buckets[i]) pairs.push([i, buckets[i]!]);
      return { buckets: pairs, max };
    },
    merge(data) {
      for (const [i, n] of data.buckets) {
        const at = Math.min(buckets.length - 1, i);
        buckets[at] = (buckets[at] ?? 0) + n;
        count += n;
      }
      if (!(data.max <= max)) max = data.max;
    },
  };
}

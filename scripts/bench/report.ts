// Turns measured rows into the Markdown table (stdout and results.md) and results.json.
import { mkdirSync, writeFileSync } from 'node:fs';
import { join } from 'node:path';
import { formatNumber } from './stats.ts';

export interface Row {
  figure: string;
  value: number;
  unit: string;
  /** Latency of the measured requests, when the figure has any. */
  p50Ms?: number;
  p99Ms?: number;
  maxMs?: number;
  ceiling?: number;
  ratio?: number;
  bar: string;
  /** null = informational, no bar. */
  pass: boolean | null;
  note?: string;
}

function cell(text: string): string {
  return text.replace(/\|/g, '\\|');
}

export function renderMarkdown(rows: readonly Row[], meta: Record<string, string>): string {
  const lines = [
    '| figure | value | p50 / p99 / max | ceiling | ratio | bar | result |',
    '|---|---:|---:|---:|---:|---|---|',
  ];
  for (const r of rows) {
    const max = r.maxMs === undefined ? '' : ` / ${formatNumber(r.maxMs)}`;
    const latency = r.p99Ms === undefined
      ? '' : `${formatNumber(r.p50Ms ?? Number.NaN)} / ${formatNumber(r.p99Ms)}${max} ms`;
    const ceiling = r.ceiling === undefined ? '' : `${formatNumber(r.ceiling)} req/s`;
    const ratio = r.ratio === undefined ? '' : `${formatNumber(r.ratio)}×`;
    const result = r.pass === null ? 'info' : r.pass ? 'pass' : '**FAIL**';
    const value = formatNumber(r.value, r.unit);
    lines.push(`| ${cell(r.figure)} | ${value} | ${latency} | ${ceiling} | ${ratio} | ${cell(r.bar)} | ${result} |`);
  }
  const notes = rows.filter((r) => r.note).map((r) => `- ${r.figure}: ${r.note}`);
  const context = Object.entries(meta).map(([k, v]) => `${k}: ${v}`).join(' · ');
  return [lines.join('\n'), '', context, ...(notes.length ? ['', ...notes] : []), ''].join('\n');
}

export function writeResults(
  dir: string, rows: readonly Row[], meta: Record<string, string>,
): { markdown: string; files: string[] } {
  mkdirSync(dir, { recursive: true });
  const markdown = renderMarkdown(rows, meta);
  const md = join(dir, 'results.md');
  const json = join(dir, 'results.json');
  writeFileSync(md, markdown);
  writeFileSync(json, JSON.stringify({ meta, rows }, null, 2) + '\n');
  return { markdown, files: [md, json] };
}

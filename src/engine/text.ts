// Small text helpers for untrusted input: one-line sanitising with a byte cap, and fences that content cannot close.
import { capUtf8, oneLine as flatten } from '../webhook-sources.ts';

/** The one flattening a webhook's text gets (whitespace, controls and bidi marks to single spaces), capped at
 * `maxBytes` of UTF-8 (DESIGN: a brief). */
export function oneLine(text: string, maxBytes = 1500): string {
  const flat = flatten(text);
  return Buffer.byteLength(flat) <= maxBytes ? flat : `${capUtf8(flat, maxBytes - 3)}...`;
}

/** A backtick fence longer than any backtick run inside the content, so the data cannot end the block early. */
export function fence(content: string, info = ''): string {
  const longest = Math.max(0, ...Array.from(content.matchAll(/`+/g), (m) => m[0].length));
  const ticks = '`'.repeat(Math.max(3, longest + 1));
  return `${ticks}${info}\n${content.replace(/\n?$/, '\n')}${ticks}`;
}

/** A task spec in markdown: `# title`, its lead lines, then each `## heading` with its lines; one ending line break. */
export function markdownSpec(title: string, lead: string[], sections: Record<string, string[]>): string {
  const parts = [`# ${title}`, ''];
  if (lead.length) parts.push(...lead, '');
  for (const [heading, lines] of Object.entries(sections)) parts.push(`## ${heading}`, '', ...lines, '');
  return parts.join('\n');
}

export function str(value: unknown): string | null {
  if (typeof value === 'string' && value.trim() !== '') return value;
  if (typeof value === 'number' && Number.isFinite(value)) return String(value);
  return null;
}

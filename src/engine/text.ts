// Small text helpers for untrusted input: fences that content cannot close, markdown specs, a field as text.

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

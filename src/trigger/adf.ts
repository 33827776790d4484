// Flattens a rich-document (ADF) value to plain text, and builds the minimal ADF body a trackerb comment needs.
import { isJsonObject } from '../untrusted.ts';

type Node = { type?: unknown; text?: unknown; content?: unknown; attrs?: unknown };

const BLOCKS = new Set([
  'paragraph', 'heading', 'blockquote', 'listItem', 'codeBlock', 'panel', 'tableRow', 'rule', 'mediaSingle', 'expand',
]);
const MAX_DEPTH = 64;

function isNode(value: unknown): value is Node {
  return isJsonObject(value);
}

function attr(node: Node, name: string): string | undefined {
  const attrs = node.attrs;
  if (!isNode(attrs)) return undefined;
  const value = (attrs as Record<string, unknown>)[name];
  return typeof value === 'string' ? value : undefined;
}

function walk(node: unknown, out: string[], depth: number): void {
  if (depth > MAX_DEPTH || !isNode(node)) return;
  const type = typeof node.type === 'string' ? node.type : '';
  if (type === 'text' && typeof node.text === 'string') out.push(node.text);
  else if (type === 'hardBreak') out.push('\n');
  else if (type === 'mention') out.push(attr(node, 'text') ?? '');
  else if (type === 'emoji') out.push(attr(node, 'text') ?? attr(node, 'shortName') ?? '');
  else if (type === 'inlineCard' || type === 'blockCard') out.push(` ${attr(node, 'url') ?? ''} `);
  else if (type === 'tableCell' || type === 'tableHeader') out.push(' | ');
  if (Array.isArray(node.content)) for (const child of node.content) walk(child, out, depth + 1);
  if (BLOCKS.has(type)) out.push('\n');
}

/** ADF doc → text with block boundaries as newlines; a plain string passes through; anything else → ''. */
export function flattenAdf(value: unknown): string {
  if (typeof value === 'string') return value;
  if (!isNode(value)) return '';
  const out: string[] = [];
  walk(value, out, 0);
  return out.join('').replace(/[ \t]+\n/g, '\n').replace(/\n{3,}/g, '\n\n').trim();
}

/** One paragraph per line of text: the smallest valid ADF document for a REST v3 comment body. */
export function adfDocument(text: string): { type: 'doc'; version: 1; content: unknown[] } {
  const paragraphs = text.split('\n').map((line) => ({
    type: 'paragraph',
    content: line === '' ? [] : [{ type: 'text', text: line }],
  }));
  return { type: 'doc', version: 1, content: paragraphs };
}

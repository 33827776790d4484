// Renders a completion summary (summary.ts parts) for each vendor that takes one, so text that came out of a run is
// shown as data and never becomes a link, a format or a mention there:
// - chata (Slack-like mrkdwn): `&`, `<`, `>` escaped everywhere (the vendor's own rule: `<!here>`, `<@U…>` and
//   `<url|text>` need a raw `<`), and agent text in an inline code span (no auto-link, no bold), backticks swapped.
// - trackera (Linear-like CommonMark): svc's words backslash-escaped, agent text in a code span whose fence is longer
//   than any backtick run inside it (CommonMark: a code span's content is literal, autolinks included).
// - trackerb (Jira-like ADF): agent text is a text node with only the `code` mark; svc's links carry a `link` mark.
import type { Piece, SummaryParts } from './summary.ts';

const SEPARATOR = ' · ';

function slackEscape(text: string): string {
  return text.replace(/&/g, '&amp;').replace(/</g, '&lt;').replace(/>/g, '&gt;');
}

function slackPiece(piece: Piece): string {
  if ('own' in piece) return slackEscape(piece.own);
  if ('link' in piece) return `<${slackEscape(piece.link)}>`;
  if (piece.data === '') return '';
  // mrkdwn has no escape for a backtick inside code: a look-alike keeps the span closed where we close it.
  return `\`${slackEscape(piece.data.replace(/`/g, 'ˋ'))}\``;
}

export function slackSummary(parts: SummaryParts): string {
  return parts.map((part) => part.map(slackPiece).join('')).join(SEPARATOR);
}

/** CommonMark lets any ASCII punctuation be backslash-escaped; svc's own words never need markup. */
function markdownEscape(text: string): string {
  return text.replace(/[!-/:-@[-`{-~]/g, (c) => `\\${c}`);
}

/** A CommonMark code span holding `text` literally: fence longer than its longest backtick run, padded if needed. */
export function codeSpan(text: string): string {
  if (text === '') return '';
  const longest = Math.max(0, ...(text.match(/`+/g) ?? []).map((run) => run.length));
  const fence = '`'.repeat(longest + 1);
  const pad = text.startsWith('`') || text.endsWith('`') || (text.startsWith(' ') && text.endsWith(' ')) ? ' ' : '';
  return `${fence}${pad}${text}${pad}${fence}`;
}

function markdownPiece(piece: Piece): string {
  if ('own' in piece) return markdownEscape(piece.own);
  if ('link' in piece) return `<${piece.link}>`;
  return codeSpan(piece.data);
}

export function markdownSummary(parts: SummaryParts): string {
  return parts.map((part) => part.map(markdownPiece).join('')).join(markdownEscape(SEPARATOR));
}

type AdfText = { type: 'text'; text: string; marks?: Array<{ type: string; attrs?: Record<string, string> }> };

/** One paragraph; ADF text nodes must not be empty, and plain neighbours are merged. */
export function adfSummary(parts: SummaryParts): { type: 'doc'; version: 1; content: unknown[] } {
  const nodes: AdfText[] = [];
  const push = (node: AdfText): void => {
    if (node.text === '') return;
    const last = nodes[nodes.length - 1];
    if (!node.marks && last && !last.marks) last.text += node.text;
    else nodes.push(node);
  };
  parts.forEach((part, i) => {
    if (i > 0) push({ type: 'text', text: SEPARATOR });
    for (const piece of part) {
      if ('own' in piece) push({ type: 'text', text: piece.own });
      else if ('link' in piece) {
        push({ type: 'text', text: piece.link, marks: [{ type: 'link', attrs: { href: piece.link } }] });
      }
      else push({ type: 'text', text: piece.data, marks: [{ type: 'code' }] });
    }
  });
  return { type: 'doc', version: 1, content: [{ type: 'paragraph', content: nodes }] };
}

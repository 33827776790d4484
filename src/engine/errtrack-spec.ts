// Error-tracker export → Markdown task spec (DESIGN §6): Error, Stack trace (in-app first), Breadcrumbs, Context,
// Acceptance criteria.
import { objOrNull as obj, type Obj } from '../untrusted.ts';
import { oneLine, str } from './text.ts';
import { BadInputError } from '../errors.ts';

export interface ErrtrackExport {
  issue: Obj | null;
  event: Obj | null;
}

type Frame = ReturnType<typeof toFrame>;
export type ErrtrackSummary = ReturnType<typeof summarize>;

function arr(value: unknown): unknown[] {
  return Array.isArray(value) ? value : [];
}

function looksLikeEvent(o: Obj): boolean {
  return 'entries' in o || 'exception' in o || 'eventID' in o || 'event_id' in o;
}

/** Accepts an issue export, an event, `{issue, event}`, or an alert/issue webhook body holding either. */
export function normalizeExport(input: unknown): ErrtrackExport {
  const o = obj(input);
  if (!o) throw new BadInputError('The error-tracker export must be a JSON object');
  if (obj(o.issue) || obj(o.event)) return { issue: obj(o.issue), event: obj(o.event) };
  const data = obj(o.data);
  if (data && (obj(data.event) || obj(data.issue))) return { issue: obj(data.issue), event: obj(data.event) };
  if (looksLikeEvent(o)) return { issue: null, event: o };
  if ('title' in o || 'shortId' in o || 'culprit' in o) return { issue: o, event: null };
  throw new BadInputError(
    'Not an error-tracker export: expected an issue, an event, or an object with "issue" and "event"',
  );
}

/** The objects of the event's `type` section: its entry of that type (an issue export's form), else its own field. */
function sectionValues(event: Obj | null, type: 'exception' | 'breadcrumbs'): Obj[] {
  const entry = arr(event?.entries).map(obj).find((e) => e?.type === type);
  const values = entry ? obj(entry.data)?.values : obj(event?.[type])?.values;
  return arr(values).map(obj).filter((v): v is Obj => v !== null);
}

function toFrame(raw: Obj) {
  const file = str(raw.filename) ?? str(raw.absPath) ?? str(raw.abs_path) ?? str(raw.module) ?? '<unknown>';
  const lineValue = raw.lineNo ?? raw.lineno;
  const line = typeof lineValue === 'number' ? lineValue : null;
  const fn = str(raw.function) ?? str(raw.rawFunction) ?? '<anonymous>';
  return { file: oneLine(file, 300), line, fn: oneLine(fn, 200), inApp: raw.inApp === true || raw.in_app === true };
}

/** Frames newest call first, in-app frames before library frames (stable within each group). */
function framesOf(values: Obj[]) {
  const frames: Frame[] = [];
  for (const value of [...values].reverse()) {
    const raw = arr(obj(value.stacktrace)?.frames).map(obj).filter((f): f is Obj => f !== null);
    for (const f of raw.reverse()) frames.push(toFrame(f));
  }
  return [...frames.filter((f) => f.inApp), ...frames.filter((f) => !f.inApp)];
}

function crumbLine(c: Obj): string {
  const when = str(c.timestamp) ?? '';
  const tag = [str(c.category), str(c.level)].filter(Boolean).join('/');
  const message = str(c.message) ?? (obj(c.data) ? JSON.stringify(c.data) : '');
  return oneLine(`${when} [${tag || str(c.type) || 'event'}] ${message}`, 400);
}

function tagValue(event: Obj | null, key: string): string | null {
  for (const t of arr(event?.tags)) {
    const tag = obj(t);
    if (tag && tag.key === key) return str(tag.value);
    if (Array.isArray(t) && t[0] === key) return str(t[1]);
  }
  return null;
}

function releaseOf(issue: Obj | null, event: Obj | null): string | null {
  const r = event?.release;
  return str(obj(r)?.version) ?? str(r) ?? tagValue(event, 'release') ?? str(obj(issue?.lastRelease)?.version) ?? null;
}

export function summarize(exp: ErrtrackExport) {
  const { issue, event } = exp;
  const values = sectionValues(event, 'exception');
  const top = values[values.length - 1] ?? null;
  const meta = obj(issue?.metadata) ?? obj(event?.metadata);
  const errorType = str(top?.type) ?? str(meta?.type);
  const errorValue = str(top?.value) ?? str(meta?.value);
  const title = str(issue?.title) ?? str(event?.title) ?? [errorType, errorValue].filter(Boolean).join(': ');
  return {
    title: oneLine(title || 'Unknown error', 300),
    errorType: errorType && oneLine(errorType, 200),
    errorValue: errorValue && oneLine(errorValue, 1000),
    frames: framesOf(values),
    breadcrumbs: sectionValues(event, 'breadcrumbs').slice(-30).map(crumbLine),
    release: releaseOf(issue, event),
    environment: str(event?.environment) ?? tagValue(event, 'environment'),
    culprit: str(event?.culprit) ?? str(issue?.culprit),
    link: str(issue?.permalink) ?? str(event?.web_url) ?? null,
    shortId: str(issue?.shortId),
  };
}

export function renderErrtrackSpec(s: ErrtrackSummary): string {
  const error = [s.errorType, s.errorValue].filter(Boolean).join(': ') || s.title;
  const frameLine = (f: Frame) =>
    `- ${f.file}:${f.line ?? '?'} in ${f.fn}${f.inApp ? '' : ' (library)'}`;
  const frames = s.frames.slice(0, 40).map(frameLine);
  const context = [
    `- Release: ${s.release ?? 'unknown'}`,
    `- Environment: ${s.environment ?? 'unknown'}`,
    `- Culprit: ${s.culprit ?? 'unknown'}`,
    ...(s.shortId ? [`- Issue: ${s.shortId}`] : []),
    ...(s.link ? [`- Link: ${s.link}`] : []),
  ];
  const section = (title: string, lines: string[]) => [`## ${title}`, '', ...lines, ''];
  return [
    `# Fix: ${s.title}`,
    '',
    ...section('Error', [error]),
    ...section('Stack trace', frames.length ? frames : ['(no stack trace in the export)']),
    ...section('Breadcrumbs', s.breadcrumbs.length ? s.breadcrumbs.map((b) => `- ${b}`) : ['(none recorded)']),
    ...section('Context', context),
    ...section('Acceptance criteria', [
      `- The error "${oneLine(error, 300)}" no longer occurs.`,
      '- A regression test covers it.',
      '- Existing tests pass.',
    ]),
  ].join('\n');
}

// @ts-check
// One readable line per run event kind (DESIGN §3 Events). Unknown kinds fall back to their JSON.
import { money } from './format.js';
import { duration } from './time.js';

/** @param {string} kind @param {any} data @returns {string} */
export function eventText(kind, data) {
  const d = data && typeof data === 'object' ? data : {};
  switch (kind) {
    case 'log':
      return String(d.text ?? '');
    case 'run.status':
      // The first status has no predecessor (`from: null`): "status queued", not "status ? → queued".
      return d.from == null ? `status ${d.to ?? 'unknown'}` : `status ${d.from} → ${d.to ?? 'unknown'}`;
    case 'question':
      return `asks: ${d.question ?? d.text ?? ''}`;
    case 'answer':
      return `answered: ${d.answer ?? d.text ?? ''}`;
    case 'check': {
      const result = d.exit_code === 0 ? 'passed' : `failed (exit ${d.exit_code ?? '?'})`;
      const took = d.duration_ms != null ? ` in ${duration(d.duration_ms)}` : '';
      return `check ${d.name ?? ''} ${result}${took}${containers(d)}`;
    }
    case 'receipt':
      return `Evidence Receipt written${d.verdict ? `: ${String(d.verdict).replace(/_/g, ' ')}` : ''}`;
    case 'pr':
      return `pull request ${d.url ?? d.pr_url ?? ''}`;
    case 'cost': {
      const tokens = d.tokens_in != null ? `, ${d.tokens_in} tokens in / ${d.tokens_out ?? '?'} out` : '';
      // A pod's run container's figures are its agent's word: its signer states the gate's on the run.
      return `cost ${money(typeof d.usd === 'number' ? d.usd : d.cost_usd)}${tokens}${containers(d)}`;
    }
    case 'artifact':
      return `artifact ${d.path ?? ''}`;
    case 'error':
      return `${d.message ?? d.error ?? JSON.stringify(d)}${containers(d)}`;
    default:
      return typeof data === 'string' ? data : JSON.stringify(data);
  }
}

/**
 * What follows a line a pod's run container sent of a kind svc also writes (ingest marks it `by: run-container`): its
 * agent could write it, so it reads as its report, not svc's. @param {any} d @returns {string}
 */
export function containers(d) {
  return d.by === 'run-container' ? ' (the run container\'s report)' : '';
}

/** Unwraps an event delivered either as the whole event row or as its data. @param {any} payload */
export function eventData(payload) {
  return payload && typeof payload === 'object' && 'kind' in payload && 'data' in payload ? payload.data : payload;
}

/**
 * The tag a `log` line shows: its stream when that is the agent's stdout or stderr, `svc` for svc's own line (never
 * one a pod's run container sent, whose agent can write any stream: ingest marks it `by: run-container`), else `log`,
 * so no line the agent wrote reads as svc's, a receipt or a pull request.
 * @param {any} data @returns {string}
 */
export function logTag(data) {
  const d = data && typeof data === 'object' ? data : {};
  if (d.stream === 'stdout' || d.stream === 'stderr') return d.stream;
  return isSvcLine(d) ? 'svc' : 'log';
}

/**
 * Whether a `log` event's data is svc's own line: stream `svc`, and not marked as a pod's run container's (its agent
 * can write any line there). Only such a line shows as svc's or draws a phase of the run's timeline.
 * @param {any} d @returns {boolean}
 */
export function isSvcLine(d) {
  return d.stream === 'svc' && d.by !== 'run-container';
}

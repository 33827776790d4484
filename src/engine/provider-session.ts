// How the provider is invoked again: its CLI's session continued, or summarised (docs/engine.md).
import type { RunContext } from './run-context.ts';
import type { ProviderSession } from './run-state.ts';
import { buildPrompt, continuationPrompt, earlierConversation } from './spec.ts';
import { adapterOf, modelSilent, type ResolvedProvider, type SessionSighting, type Usage } from './providers.ts';
import { oneLine } from '../webhook-sources.ts';
import { withoutSecrets } from './text.ts';

export type Invocation =
  | { way: 'fresh'; argv: string[]; prompt: string }
  | { way: 'session'; argv: string[]; prompt: string; id: string }
  | { way: 'summary'; argv: string[]; prompt: string; why: string };

/** Caps on what is kept of the agent's words for a summary. */
const SAID_CAP = 4000;
const QUESTIONS_KEPT = 20;

function sessionOf(ctx: RunContext, provider: ResolvedProvider): ProviderSession {
  const kept = ctx.state.provider_session;
  if (kept && kept.kind === provider.kind) return kept;
  return { kind: provider.kind, id: null, answers_given: 0, questions: [], last_output: null, resumed: null };
}

/** The next invocation's argv and prompt; `refused`: why the CLI just failed to resume (not tried again). */
export function nextInvocation(
  ctx: RunContext, provider: ResolvedProvider, spec: string, notes: string[], refused: string | null,
): Invocation {
  const { answers, provider_session: before } = ctx.state;
  const argv = provider.argv;
  if (!before) return { way: 'fresh', argv, prompt: buildPrompt(spec, { answers, notes }) };
  const session = sessionOf(ctx, provider);
  const resume = adapterOf(provider.kind).resume;
  if (resume && session.id !== null && refused === null) {
    const task = session.spec_sha256 === ctx.state.spec_sha256 ? null : spec;
    const prompt = continuationPrompt(answers, session.answers_given + 1, notes, task);
    return { way: 'session', argv: [argv[0]!, ...resume(session.id)], id: session.id, prompt };
  }
  const why = refused ?? (resume
    ? 'no session id was captured from its earlier invocation'
    : `${provider.name} has no session svc can resume`);
  const summary = earlierConversation(session.questions, session.last_output);
  return { way: 'summary', argv, why, prompt: buildPrompt(spec, { answers, notes: [summary, ...notes] }) };
}

/** Records how an invocation started: the answers it was given, and how the agent was invoked again. */
export function recordInvocation(ctx: RunContext, provider: ResolvedProvider, inv: Invocation): void {
  const session = sessionOf(ctx, provider);
  const resumed = inv.way === 'fresh' ? session.resumed
    : inv.way === 'summary' || session.resumed === 'summary' ? 'summary' : 'session';
  const given = { answers_given: ctx.state.answers.length, spec_sha256: ctx.state.spec_sha256 };
  ctx.update({ provider_session: { ...session, ...given, resumed } });
}

/** A follow-up's start in `previous`'s CLI session (its task the next turn, its answers all new); null: none. */
export function inheritSession(previous: ProviderSession | null | undefined): ProviderSession | null {
  return previous ? { ...previous, answers_given: 0, resumed: null } : null;
}

/** Changes the run's session record, which recordInvocation wrote before the provider first ran. */
function change(ctx: RunContext, fields: (session: ProviderSession) => Partial<ProviderSession>): void {
  const session = ctx.state.provider_session;
  if (session) ctx.update({ provider_session: { ...session, ...fields(session) } });
}

/** Keeps what an invocation reported: a new id replaces the old one; its last words are kept for a summary. */
export function recordSightings(ctx: RunContext, seen: SessionSighting): void {
  change(ctx, (session) => ({
    id: seen.id ?? session.id,
    // state.json, which holds it, goes to the signer's copy and the Control Plane: no secret the CLI quoted.
    last_output: seen.said === null ? session.last_output : withoutSecrets(seen.said).slice(-SAID_CAP),
  }));
}

/** A question the provider asked (not the budget's), kept for a summary. */
export function recordQuestion(ctx: RunContext, question: string): void {
  change(ctx, ({ questions }) => ({ questions: [...questions, oneLine(question, 2000)].slice(-QUESTIONS_KEPT) }));
}

/** Whether a resume was refused (its session id is then forgotten): the CLI failed before its model did anything. An
 * id in its output proves nothing: claude echoes the id it was asked for in its error when no such session exists. */
export function resumeRefused(ctx: RunContext, inv: Invocation, code: number | null, usage: Usage): boolean {
  const refused = inv.way === 'session' && code !== 0 && modelSilent(usage);
  if (refused) change(ctx, () => ({ id: null }));
  return refused;
}

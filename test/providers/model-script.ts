// What a scripted model does, whatever wire protocol carries it: one step per model turn, chosen by how many tool
// results the conversation already holds, and the usage figures each turn reports (summed so a test can compare).

export type Step =
  | { tool: 'read'; path: string }
  | { tool: 'edit'; path: string; old: string; new: string }
  | { tool: 'shell'; command: string }
  | { text: string };

/** Picks the steps for one conversation from the text the CLI sent (its prompt, which may carry an answer). */
export type Script = (conversationText: string) => Step[];

export interface TurnUsage {
  input: number;
  output: number;
}

/** Each model turn reports these figures; turn n uses 100 + 10n in and 20 + n out, so sums are easy to predict. */
export function usageOfTurn(n: number): TurnUsage {
  return { input: 100 + 10 * n, output: 20 + n };
}

export interface RecordedRequest {
  method: string;
  path: string;
  headers: Record<string, string | string[] | undefined>;
  body: unknown;
  text: string;
}

/** The totals a scripted server has reported so far, across every request it answered with usage. */
export interface UsageTotals {
  input: number;
  output: number;
}

/** Fix the failing test, then run it: the script both CLIs follow for a verified run. */
export function fixScript(opts: { file: string; old: string; new: string; test: string; summary: string }): Script {
  return () => [
    { tool: 'read', path: opts.file },
    { tool: 'edit', path: opts.file, old: opts.old, new: opts.new },
    { tool: 'shell', command: opts.test },
    { text: opts.summary },
  ];
}

/** What the scripted model says once it has asked: a resumed session's earlier turns show it. */
export const ASKED = 'Asked a question.';

/**
 * Asks through $SVC_QUESTION_FILE first; once the answer is in the prompt, reads the file, writes the answer into it
 * and runs the test. A resumed session (svc's continuation prompt) still holds the asking turn and its tool result,
 * which the steps count, so they start with it.
 */
export function askScript(opts: { question: string; file: string; old: string; test: string }): Script {
  return (text) => {
    const ask: Step = { tool: 'shell', command: `printf '%s\\n' '${opts.question}' > "$SVC_QUESTION_FILE"` };
    // The prompt as sent, or as a CLI's read tool shows an attached file (opencode numbers each line "N: ").
    const m = /Answer 1 from the operator[^\n]*\n(?:\d+: )?```text\n(?:\d+: )?([^\n]*)\n/.exec(text);
    if (!m) return [ask, { text: ASKED }];
    // Read before editing, as an agent does (claude's Edit refuses a file it has not read in this session).
    const steps: Step[] = [
      { tool: 'read', path: opts.file },
      { tool: 'edit', path: opts.file, old: opts.old, new: m[1]! },
      { tool: 'shell', command: opts.test },
      { text: 'Applied the answer.' },
    ];
    return text.includes(CONTINUED) ? [ask, ...steps] : steps;
  };
}

/** The first words of the prompt svc gives a CLI session it resumes (engine/provider-session.ts continuationPrompt). */
export const CONTINUED = 'svc is continuing this session.';

/** Starts a long tool call that records its shell's pid, so a test can stop the run and check nothing is left. */
/**
 * A shell command that runs until stopped. `marker` names it in the command lines of its processes: inside svc's
 * sandbox the pids it could report are its own PID namespace's, not the host's, and it cannot write outside its
 * worktree, so the test finds it by the marker (`; true` keeps sh from exec'ing sleep and dropping the marker).
 */
export function longScript(marker: string): Script {
  const command = `sh -c 'sleep 300; true' ${marker} & sh -c 'sleep 300; true' ${marker} & wait`;
  return () => [{ tool: 'shell', command }, { text: 'never' }];
}

/** A chat request's `messages` (Anthropic Messages and OpenAI chat completions share the shape), read defensively. */
export interface Message {
  role?: string;
  content?: unknown;
}

export function messagesOf(body: unknown): Message[] {
  const m = (body as { messages?: unknown })?.messages;
  return Array.isArray(m) ? (m as Message[]) : [];
}

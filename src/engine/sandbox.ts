// The worker's side of the agent sandbox (DESIGN §7a): which mode this run uses, where its protocol files live, and
// the bwrap plan for one provider or check. What the plan allows is decided in src/spawn/agent-plan.ts.
import { join } from 'node:path';
import { homedir } from 'node:os';
import type { RunContext } from './run-context.ts';
import type { Policy } from './policy.ts';
import { loadEngineConfig } from './config.ts';
import { plainSubdir } from './safe-fs.ts';
import { svcHomeOf } from './paths.ts';
import { agentSandboxPlan } from '../spawn/agent-plan.ts';
import { resolveSandbox, unsandboxedWarning, type SandboxMode } from '../spawn/sandbox-mode.ts';
import type { SandboxPlan } from '../spawn/bwrap-argv.ts';

/** The run's protocol files: the folder the agent reads (task, answer) and the one it writes its question into. */
export interface ProtocolFiles {
  taskFile: string;
  answerFile: string;
  questionFile: string;
  ioDir: string;
  askDir: string;
}

export function protocolFiles(ctx: RunContext): ProtocolFiles {
  const askDir = plainSubdir(ctx.dir, join('io', 'ask'));
  const ioDir = join(ctx.dir, 'io');
  return {
    taskFile: join(ioDir, 'prompt.md'), answerFile: join(ioDir, 'answer.txt'), questionFile: join(askDir, 'question.txt'),
    ioDir, askDir,
  };
}

/** This run's sandbox mode; throws SandboxUnavailableError when it needs bwrap and bwrap cannot run. */
export function runSandboxMode(ctx: RunContext, policy: Policy): SandboxMode {
  const mode = resolveSandbox(policy.sandbox, ctx.env);
  const warning = unsandboxedWarning(mode);
  if (warning) {
    ctx.event('log', { stream: 'svc', text: warning });
    ctx.say(warning);
  }
  return mode;
}

/** The sandbox for `program` (a provider of family `provider`, or a check when `provider` is null). */
export function agentSandbox(
  ctx: RunContext, mode: SandboxMode, program: string, provider: { name: string; kind: string } | null,
): { bwrap: string; plan: SandboxPlan } | null {
  if (mode.kind === 'none') return null;
  const files = protocolFiles(ctx);
  const configured = provider?.kind === 'command' ? loadEngineConfig(ctx.state.repo_path).providers[provider.name] : undefined;
  const declared = configured?.writable ?? [];
  const plan = agentSandboxPlan({
    workdir: ctx.state.workdir,
    repo: ctx.state.repo_path,
    ioDir: files.ioDir,
    askDir: files.askDir,
    svcHome: svcHomeOf(ctx.env),
    home: ctx.env.HOME || homedir(),
    // A check gets no provider's login folders.
    provider: provider?.kind ?? 'check',
    declared,
    program,
    env: ctx.env,
  });
  return { bwrap: mode.bwrap, plan };
}

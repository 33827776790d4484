// The argv of every `svc start` the Control Plane starts (start, resume and retry), and of `svc start`'s own `svc
// worker`; each trigger source's argv is beside its handler (trigger/sources/<name>.ts, spec "Per-route behaviour").
// Never a deploy argument, never a shell; text from outside always follows "--" or `--brief`, so it is never read as
// an option.

/** `POST /v1/start`: `input` is a brief (with `brief: true`) or anything `svc start` classifies. */
export function controlStartArgs(
  s: { repo: string; run: string; pr: boolean; provider: string | null; brief: boolean; input: string },
): string[] {
  const args = ['start', '--detach', '--repo', s.repo, '--run-id', s.run];
  if (s.pr) args.push('--pr');
  if (s.provider) args.push('--provider', s.provider);
  if (s.brief) args.push('--brief');
  // "--" ends the options, so a brief that starts with "-" is never read as one.
  args.push('--', s.input);
  return args;
}

export function resumeArgs(run: string, repo: string): string[] {
  return ['start', '--detach', '--resume', run, '--repo', repo];
}

export function retryArgs(from: string, run: string, repo: string): string[] {
  return ['start', '--detach', '--retry', from, '--run-id', run, '--repo', repo];
}

/** The run's detached worker: `node <cli> worker MODE --run-id RUN --repo REPO` (proc-group.ts checks it). */
export function workerArgv(cli: string, mode: string, run: string, repo: string): string[] {
  return [process.execPath, cli, 'worker', mode, '--run-id', run, '--repo', repo];
}

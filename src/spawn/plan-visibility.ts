// Whether a host path is there inside a sandbox a plan describes: what a command provider's argv may name (a script
// outside the view would fail inside with "No such file", which only the provider's own log would say).
import { isSystemPath, isEtcShown } from './system-view.ts';
import { within, type SandboxPlan } from './bwrap-argv.ts';

export function shownBy(plan: SandboxPlan, path: string): boolean {
  if (plan.hidden.some((h) => within(path, h))) return false;
  if (isSystemPath(path) || isEtcShown(path)) return true;
  const bound = [...plan.readable, ...plan.writable, ...plan.protocolReadable, ...plan.protocolWritable, plan.cwd];
  return bound.some((dir) => within(path, dir));
}

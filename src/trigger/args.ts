// The exact argv after `svc` for each origin (spec "Per-route behaviour"): never a deploy argument, never a shell.

export function errtrackArgs(brief: string): string[] {
  return ['start', brief, '--pr', '--detach'];
}
export function chataArgs(text: string): string[] {
  return ['start', text, '--detach'];
}
export function trackeraArgs(identifier: string): string[] {
  return ['start', `trackera:${identifier}`, '--detach'];
}
/** trackerb, chatb and the source-host route: `--brief` so text is never reclassified, `--pr` always. */
export function briefPrArgs(brief: string): string[] {
  return ['start', '--brief', brief, '--pr', '--detach'];
}
export function jobsArgs(brief: string, pr: boolean): string[] {
  return ['start', '--brief', brief, ...(pr ? ['--pr'] : []), '--detach'];
}

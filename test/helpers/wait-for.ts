// Polling with a deadline, for tests that wait on another process or the filesystem (STYLE habit 6: no fixed sleeps).

/**
 * Polls `fn` every 20 ms until it returns a truthy value, which it resolves with; throws naming `what` after
 * `timeoutMs`. The default is generous because whole runs share 2 cores with other suites; it only costs time on failure.
 */
export async function waitFor<T>(fn: () => T | Promise<T>, what: string, timeoutMs = 60_000): Promise<NonNullable<T>> {
  const deadline = Date.now() + timeoutMs;
  for (;;) {
    const value = await fn();
    if (value) return value as NonNullable<T>;
    if (Date.now() > deadline) throw new Error(`Timed out waiting for ${what}`);
    await new Promise((r) => setTimeout(r, 20));
  }
}

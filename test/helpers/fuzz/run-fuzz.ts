// Drives a fuzz suite: generates requests in rounds, sends each round concurrently, checks every answer against the
// contract, and after a round in which every mutating request was refused checks that the server's stored state
// (a fingerprint of its DB and files) did not move. Failures carry the seed and the request that broke it.
import { createRng } from './rng.ts';
import { contractProblem, createSender, describeRequest, type FuzzRequest } from './send.ts';
import type { Rng } from './rng.ts';

export interface FuzzRun {
  baseUrl: string;
  seed: number;
  total: number;
  /** Requests in flight per round (and sockets in the keep-alive pool). */
  concurrency: number;
  generate: (rng: Rng) => FuzzRequest;
  /** A cheap summary of everything a request could store; equal before and after a round of refusals. */
  fingerprint: () => string;
  /**
   * Waits for what an accepted request set going in the background (a launched `svc start` that fails a moment later
   * and records it) to finish, so its late writes are not blamed on a later round of refusals.
   */
  settle?: () => Promise<void>;
}

export interface FuzzReport {
  sent: number;
  statuses: Record<string, number>;
  /** Statuses per route (`METHOD /pattern`), to see that the generator reaches every handler. */
  byRoute: Record<string, Record<string, number>>;
  problems: string[];
}

const MAX_PROBLEMS = 8;

export async function runFuzz(o: FuzzRun): Promise<FuzzReport> {
  const rng = createRng(o.seed);
  const sender = createSender(o.baseUrl, o.concurrency);
  const report: FuzzReport = { sent: 0, statuses: {}, byRoute: {}, problems: [] };
  const fail = (r: FuzzRequest, why: string): void => {
    if (report.problems.length < MAX_PROBLEMS) report.problems.push(`seed ${o.seed}: ${why}\n  request ${describeRequest(r)}`);
  };
  try {
    let before = o.fingerprint();
    while (report.sent < o.total && report.problems.length < MAX_PROBLEMS) {
      const round = Array.from({ length: Math.min(o.concurrency * 4, o.total - report.sent) }, () => o.generate(rng));
      const answers = await Promise.all(round.map((r) => sender.send(r).then((a) => a, (err: Error) => err)));
      let anyAccepted = false;
      answers.forEach((a, i) => {
        const r = round[i]!;
        if (a instanceof Error) return fail(r, `transport error ${a.message}`);
        const key = String(a.status);
        report.statuses[key] = (report.statuses[key] ?? 0) + 1;
        const route = (report.byRoute[r.route] ??= {});
        route[key] = (route[key] ?? 0) + 1;
        if (r.mutating && a.status >= 200 && a.status < 300) anyAccepted = true;
        const problem = contractProblem(r, a);
        if (problem) fail(r, `${problem}${a.text ? `; body ${a.text.slice(0, 300)}` : ''}`);
      });
      report.sent += round.length;
      if (anyAccepted && o.settle) await o.settle();
      const after = o.fingerprint();
      if (!anyAccepted && after !== before) {
        const mutating = round.filter((r) => r.mutating);
        fail(mutating[0] ?? round[0]!, `stored state changed in a round where every mutating request was refused: ${before} → ${after} (${mutating.length} mutating requests in the round, first shown)`);
      }
      before = after;
    }
  } finally {
    sender.close();
  }
  return report;
}

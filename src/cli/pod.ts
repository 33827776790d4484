// `svc pod seal|sign`: the two steps of a Kubernetes job pod around the run container (src/trigger/kubernetes-pod.ts).
// Both take every path and the run id from the argv the pod spec fixed, never from a file the agent wrote.
import { writeFileSync } from 'node:fs';
import { parseFlags, subcommand, type CliIo } from './io.ts';
import { errorMessage, FailedError, UsageError } from '../errors.ts';
import { handedRunKey, isValidSegment } from '../engine/ids.ts';
import { readSealedRunKey, storeRun, writeSeal } from '../pod/seal.ts';
import { signRun } from '../pod/sign.ts';
import { safeJson } from '../safe-json.ts';
import { SIGNER_OUTCOME_MARK, SIGNER_OUTCOME_MAX_BYTES } from '../trigger/kubernetes-pod.ts';
import { capUtf8 } from '../one-line.ts';

export const HELP = `Usage: svc pod seal --repo DIR --sealed DIR --handoff FILE [--run-id RUN]
       svc pod sign --run-id RUN --repo DIR --sealed DIR [--outcome FILE] [--pr]

Steps of a Kubernetes job pod (the trigger server's Kubernetes executor writes them into the pod spec):
  seal   before the run: record the repository's HEAD and origin URL in the sealed folder, make the run's key
         there, and write the key handed from it for the run container's svc start to FILE (SVC_SECRETS_HANDOFF);
         with --run-id, store that run on the Control Plane bound to the handed key (SVC_CONTROL_URL; not
         stored after a few tries, the seal fails)
  sign   after the run container ended: check the run's commits against the sealed base, sign its Evidence
         Receipt with the key in $HOME/.svc/keys, open the pull request (--pr) and ship the run (SVC_CONTROL_URL);
         write the outcome (or the error that ended the signer) to FILE, the container's termination message
`;

/**
 * The job's outcome as the trigger reads it (the signer's termination message), at most SIGNER_OUTCOME_MAX_BYTES:
 * Kubernetes would cut a longer one into JSON that does not parse. Only `error` is of any length, so a longer one is
 * cut, ending in "…"; an outcome too long even so is refused (the signer fails, and its job with it).
 */
export function outcomeMessage(outcome: Record<string, unknown> & { error: string | null }): string {
  let error = outcome.error;
  for (;;) {
    const text = safeJson({ ...outcome, error });
    const over = Buffer.byteLength(text, 'utf8') - SIGNER_OUTCOME_MAX_BYTES;
    if (over <= 0) return text;
    const bytes = error === null ? 0 : Buffer.byteLength(error, 'utf8');
    // Its escapes make the JSON longer than the text: cut in proportion, and look again (each turn is shorter).
    const written = error === null ? 0 : Buffer.byteLength(safeJson(error), 'utf8') - 2;
    const keep = Math.min(bytes - 4, Math.floor((bytes * (written - over - 3)) / Math.max(written, 1)));
    if (keep < 1) {
      throw new FailedError(`The signer's outcome is ${over} bytes over the ${SIGNER_OUTCOME_MAX_BYTES} its ` +
        'termination message keeps');
    }
    error = `${capUtf8(error!, keep)}…`;
  }
}

export default async function pod(io: CliIo): Promise<number> {
  const picked = subcommand(io, HELP, 'pod', ['seal', 'sign']);
  if (typeof picked === 'number') return picked;
  const { sub: step, rest } = picked;
  const { values } = parseFlags(rest, {
    repo: { type: 'string' }, sealed: { type: 'string' }, 'run-id': { type: 'string' }, pr: { type: 'boolean' },
    handoff: { type: 'string' }, outcome: { type: 'string' },
  }, 0);
  if (!values.repo || !values.sealed) throw new UsageError(`${step} needs --repo and --sealed`);
  if (step === 'seal') {
    if (!values.handoff) throw new UsageError('seal needs --handoff');
    const named = values['run-id'];
    if (named !== undefined && !isValidSegment(named)) throw new UsageError('--run-id is not a run id');
    const seal = writeSeal(values.repo, values.sealed, values.handoff);
    // Refused, left unbound, or not answered by the Control Plane named, fails the seal (the pod does not start its
    // run); with none named, not answered is said and goes on.
    const handed = handedRunKey(readSealedRunKey(values.sealed));
    // A run the seal step stores is new: no stop or answer is waiting for it.
    const unstored = named === undefined ? 'no --run-id' : (await storeRun(io.env, named, seal, { handed })).unstored;
    if (named !== undefined && unstored) io.stderr(`svc pod seal: the run is not stored yet (${unstored})\n`);
    io.stdout(`${safeJson({ sealed: seal.base_sha, origin: seal.origin_url !== null, stored: unstored === null })}\n`);
    return 0;
  }
  const run = values['run-id'];
  if (!isValidSegment(run)) throw new UsageError('sign needs --run-id');
  const source = io.env.SVC_SOURCE;
  if (!isValidSegment(source)) throw new UsageError('sign needs SVC_SOURCE');
  const file = values.outcome;
  let outcome: string;
  try {
    const final = await signRun({
      run, source, workspace: values.repo, sealedDir: values.sealed, pr: values.pr === true, env: io.env,
      say: io.stderr,
    });
    // The trigger's outcome of the job (kubernetes-executor.ts): its cost the signer's, metered where the gate
    // metered. Written last, and exit 0 whatever the run's status: the run is judged.
    const { status, verdict, pr_url, error, cost_usd } = final;
    outcome = outcomeMessage({ source, run, status, verdict, pr_url, error, cost_usd });
  } catch (err) {
    // A signer that exits otherwise judged nothing: the trigger takes only this error from it.
    if (file) writeFileSync(file, outcomeMessage({ error: errorMessage(err) }));
    throw err;
  }
  if (file) writeFileSync(file, outcome);
  // For people reading the pod's log, and for an older trigger (a rollback), which reads it from there; this trigger
  // reads it from the log only for a Job an older trigger made (no --outcome).
  io.stdout(`${SIGNER_OUTCOME_MARK}${outcome}\n`);
  return 0;
}

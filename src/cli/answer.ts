// `svc answer <source>/<run> <text>`: writes the answer file a blocked run is waiting for.
import type { CliIo } from './io.ts';
import { parseFlags, wantsHelp } from './io.ts';
import { UsageError } from './usage-error.ts';
import { writeAnswer, MAX_ANSWER_BYTES } from '../engine/answers.ts';
import { isValidSegment } from '../engine/ids.ts';

const HELP = `Usage: svc answer <source>/<run> <text>

Answers a blocked run: writes $SVC_CONTROL_ANSWER_DIR/<source>/<run>.json
(default ~/.svc/control/answers), which the run picks up and continues with.
`;

export default async function answer(io: CliIo): Promise<number> {
  if (wantsHelp(io.argv)) {
    io.stdout(HELP);
    return 0;
  }
  const { positionals } = parseFlags(io.argv, {});
  const [ref, ...words] = positionals;
  const [source, run, extra] = (ref ?? '').split('/');
  if (!isValidSegment(source) || !isValidSegment(run) || extra !== undefined) throw new UsageError('The first argument must be <source>/<run>');
  const text = words.join(' ').trim();
  if (!text) throw new UsageError('Give the answer text after <source>/<run>');
  if (Buffer.byteLength(text) > MAX_ANSWER_BYTES) throw new UsageError(`The answer is longer than ${MAX_ANSWER_BYTES} bytes`);
  const path = writeAnswer(io.env, source, run, text);
  io.stdout(`Answer written to ${path}\n`);
  return 0;
}

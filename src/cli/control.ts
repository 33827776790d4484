// `svc control serve|status`: run the Control Plane, or ask a running one whether it is up and how many runs it holds.
import type { CliIo } from './io.ts';
import { parseFlags, subcommand } from './io.ts';
import { UsageError, errorMessage } from '../errors.ts';

const HELP = `Usage:
  svc control serve [--host HOST] [--port PORT] [--db PATH]
  svc control status [--json]

serve   Start the Control Plane (default 127.0.0.1:${47821}, DB ~/.svc/control/control.db).
        --port 0 binds a free port; the URL printed on stdout is the real one.
status  Report whether the Control Plane is reachable and how many runs it holds (exit 1 when unreachable).

Environment: SVC_CONTROL_HOST, SVC_CONTROL_PORT, SVC_CONTROL_DB, SVC_CONTROL_TOKEN,
SVC_CONTROL_ALLOW_INSECURE_BIND, SVC_CONTROL_ANSWER_DIR, SVC_CONTROL_URL (status)
`;

export default async function control(io: CliIo): Promise<number> {
  const parsed = subcommand(io, HELP);
  if (typeof parsed === 'number') return parsed;
  const { sub, rest } = parsed;
  if (sub === 'serve') {
    const { values, positionals } = parseFlags(rest, {
      host: { type: 'string' },
      port: { type: 'string' },
      db: { type: 'string' },
    });
    if (positionals.length) throw new UsageError(`Unexpected argument "${positionals[0]}"`);
    const { resolveControlSettings } = await import('../control/settings.ts');
    const { serveControlForever, STATIC_DIR } = await import('../control/main.ts');
    let settings;
    try {
      settings = resolveControlSettings(io.env, values, STATIC_DIR);
    } catch (err) {
      throw new UsageError(errorMessage(err));
    }
    const { serveOnFreePort } = await import('./busy-port.ts');
    return serveOnFreePort('control', settings, io.env, () => serveControlForever(settings, io.env, io.stdout));
  }
  if (sub === 'status') {
    const { values, positionals } = parseFlags(rest, { json: { type: 'boolean' } });
    if (positionals.length) throw new UsageError(`Unexpected argument "${positionals[0]}"`);
    const { controlStatus } = await import('./control-status.ts');
    return controlStatus(io, Boolean(values.json));
  }
  throw new UsageError(`Unknown subcommand "control ${sub}" (expected serve or status)`);
}

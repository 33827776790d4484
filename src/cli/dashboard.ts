// `svc dashboard [start|open] [--no-open]`: find a running Control Plane (DESIGN §4 discovery) or start one in the
// background, then open the UI in the browser. It never puts the token in the URL: the UI asks for it.
// `svc dashboard stop` stops the one it started (dashboard-owner.ts), never another.
import { sendPendingRuns } from './pending-runs.ts';
import type { CliIo } from './io.ts';
import { parseFlags, printsHelp } from './io.ts';
import { UsageError, UnavailableError, ConflictError } from '../errors.ts';
import { discoverControlUrl } from '../client/discover.ts';
import { isHealthy, startControlInBackground, openBrowser } from './dashboard-launch.ts';
import { stopDashboardServer } from './dashboard-owner.ts';

const HELP = `Usage:
  svc dashboard [start|open] [--no-open]
  svc dashboard stop

Opens the Control Plane UI. A running Control Plane is reused (SVC_CONTROL_URL, then ~/.svc/control/server.json,
then http://127.0.0.1:$SVC_CONTROL_PORT or 47821); otherwise one is started in the background with
"svc control serve" (log: ~/.svc/control/server.log). "start" and "open" do the same.

  --no-open   print the URL instead of opening a browser

"stop" stops the Control Plane that "svc dashboard" started in the background (SIGTERM; it finishes its requests and
closes its database), and only that one: a Control Plane started another way (svc control serve in a terminal,
systemd) is left running (exit 1, saying so). Exit 0 when it stopped or none is running.

The browser is $BROWSER when set (run with the URL as its only argument), else xdg-open / open.
`;

export default async function dashboard(io: CliIo): Promise<number> {
  if (printsHelp(io, HELP)) return 0;
  const { values, positionals } = parseFlags(io.argv, { 'no-open': { type: 'boolean' } });
  const [sub, ...extra] = positionals;
  if (sub !== undefined && sub !== 'start' && sub !== 'open' && sub !== 'stop') {
    throw new UsageError(`Unknown subcommand "dashboard ${sub}" (expected start, open or stop)`);
  }
  if (extra.length > 0) throw new UsageError(`Unexpected argument "${extra[0]}"`);
  if (sub === 'stop') return stop(io);

  const found = discoverControlUrl(io.env);
  let url = found.url;
  if (await isHealthy(url)) {
    io.stderr(`Using the Control Plane at ${url} (found via ${found.via})\n`);
  } else if (found.via === 'SVC_CONTROL_URL') {
    // The person pointed at a specific server: starting a different, local one would be a surprise.
    throw new UnavailableError(
      `Nothing answers at SVC_CONTROL_URL (${url}); start that server or unset SVC_CONTROL_URL to run one here`,
    );
  } else {
    io.stderr('No Control Plane is running; starting one in the background…\n');
    const started = await startControlInBackground(io.env);
    url = started.url;
    io.stderr(`Started the Control Plane at ${url} (pid ${started.pid}, log ${started.log})\n`);
  }
  if (io.env.SVC_CONTROL_TOKEN) io.stderr('This Control Plane has a token: the UI asks for it once per browser tab.\n');
  // Runs of this project made while no Control Plane ran appear in the UI it opens.
  await sendPendingRuns({ ...io, env: { ...io.env, SVC_CONTROL_URL: url } }, process.cwd());

  if (values['no-open']) {
    io.stdout(`${url}\n`);
    return 0;
  }
  // Exit 0 either way: the server runs. stdout stays empty when a browser has the page, and holds the URL when the
  // person (or a script) must open it: that is the one thing to act on.
  const opened = await openBrowser(`${url}/`, io.env);
  if (opened.opened) {
    io.stderr(`Opened ${url}/ in the browser (${opened.cmd})\n`);
  } else {
    io.stderr(`Could not open a browser: ${opened.reason}. Set BROWSER to choose one, or open this URL yourself:\n`);
    io.stdout(`${url}\n`);
  }
  return 0;
}

async function stop(io: CliIo): Promise<number> {
  const outcome = await stopDashboardServer(io.env);
  if (outcome.stopped) {
    io.stderr(`Stopped the Control Plane at ${outcome.url} (pid ${outcome.pid})\n`);
    return 0;
  }
  if (outcome.why === 'not-ours') {
    throw new ConflictError(`The Control Plane at ${outcome.url} (pid ${outcome.pid}) was not started by ` +
      'svc dashboard: stop it where it was started (Ctrl-C in its terminal, systemctl stop svc-control)');
  }
  io.stderr('No Control Plane started by svc dashboard is running\n');
  return 0;
}

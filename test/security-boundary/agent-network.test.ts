// No route out but the gate (DESIGN §7a), black-box: real `svc start` runs whose `command` agent tries the
// host's loopback services (the Control Plane's kind), a destination the policy does not allow, the same without the
// proxy variables, and DNS; and uses the model API through the gate with the placeholder key it was given. Every
// destination here is a loopback address on this machine; nothing is sent anywhere else.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server, type IncomingHttpHeaders } from 'node:http';
import { readFileSync, writeFileSync } from 'node:fs';
import { execFileSync } from 'node:child_process';
import { join } from 'node:path';
import { createServer as createNetServer, type AddressInfo, type Server as NetServer } from 'node:net';
import { makeRepo, readJson, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { letNobodyReach } from '../helpers/nobody-reach.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';


const REAL_KEY = 'sk-ant-real-key-9f3c1d';

/** Each attempt's outcome goes into net.txt as `name:<http status or failure>`. */
const PROBES = `#!/bin/sh
cat > /dev/null
host=$(grep -o 'HOSTSVC=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
allowed=$(grep -o 'ALLOWED=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
try() {
  name=$1; shift
  code=$(curl -s -o /dev/null -w '%{http_code}' --max-time 5 "$@" 2>/dev/null); echo "$name:$code"
}
{
  try host-direct --noproxy '*' "http://$host/health"
  try host-via-gate "http://$host/health"
  try host-name-via-gate --noproxy none.invalid "http://localhost:\${host#*:}/health"
  try allowed-via-gate "http://$allowed/ok"
  (unset HTTP_PROXY HTTPS_PROXY ALL_PROXY http_proxy https_proxy all_proxy; try allowed-no-proxy "http://$allowed/ok")
  try model "$ANTHROPIC_BASE_URL/v1/messages" -H "x-api-key: $ANTHROPIC_API_KEY" -d '{}'
  getent hosts svc-test.invalid >/dev/null 2>&1 && echo "dns:resolved" || echo "dns:failed"
  abstract=$(grep -o 'ABSTRACT=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
  /usr/bin/python3 -c "import socket,sys; s=socket.socket(socket.AF_UNIX); s.connect('\\0'+sys.argv[1])" "$abstract" \
    2>/dev/null && echo "abstract:connected" || echo "abstract:refused"
  echo "listening:$(cat /proc/net/tcp /proc/net/tcp6 2>/dev/null | awk 'NR>1 && $4=="0A"' | wc -l)"
  echo "key:$ANTHROPIC_API_KEY"
} > net.txt
exit 0
`;

/** Opens connection after connection to a destination nobody allowed (the gate refuses each before connecting). */
const FLOOD = `#!/bin/sh
cat > /dev/null
i=0
while [ $i -lt 600 ]; do curl -s -o /dev/null --max-time 2 http://127.0.0.3:9/; i=$((i+1)); done
exit 0
`;

interface Seen {
  path: string;
  headers: IncomingHttpHeaders;
}

function listen(host: string, seen: Seen[]): Promise<Server> {
  const server = createServer((req, res) => {
    seen.push({ path: req.url ?? '', headers: req.headers });
    req.resume();
    res.writeHead(200, { 'content-type': 'application/json' }).end('{"ok":true}');
  });
  return new Promise((resolve) => server.listen(0, host, () => resolve(server)));
}

const hostPort = (s: Server) => `${(s.address() as AddressInfo).address}:${(s.address() as AddressInfo).port}`;

const isRoot = process.getuid?.() === 0;
const NOBODY = 65534;

/** One pass: as whoever runs the tests, or (as root only) as nobody, whose svc then owns the gate and its socket. */
function suite(asNobody: boolean): void {
  const ABSTRACT_NAME = `svc-test-abstract-${process.pid}-${asNobody ? 'nobody' : 'self'}`;
  let repo: TestRepo;
  let hostService: Server;
  let allowed: Server;
  let model: Server;
  const hostSeen: Seen[] = [];
  const allowedSeen: Seen[] = [];
  const modelSeen: Seen[] = [];

  let abstract: NetServer;
  let abstractSeen = 0;

  before(async () => {
    // The checkout may sit in a folder only root may pass (a `mktemp -d` clone): let nobody reach its CLI.
    if (asNobody) letNobodyReach(CLI);
    // An abstract Unix socket on the host (no file: only the network namespace scopes it).
    abstract = createNetServer(() => abstractSeen++);
    await new Promise<void>((resolve) => abstract.listen(`\0${ABSTRACT_NAME}`, resolve));
    hostService = await listen('127.0.0.1', hostSeen);
    allowed = await listen('127.0.0.2', allowedSeen);
    model = await listen('127.0.0.1', modelSeen);
    repo = makeRepo({ providers: { probes: PROBES, flood: FLOOD } });
    writeRepoPolicy();
    // Only the operator opens an address the gate refuses: the allowed destination is the operator's grant.
    const operatorFile = join(repo.home, '.svc', 'operator.json');
    const operator = readJson(operatorFile);
    writeFileSync(operatorFile, JSON.stringify({ ...operator, network: { allow: [hostPort(allowed)] } }));
    if (asNobody) execFileSync('chown', ['-R', `${NOBODY}:${NOBODY}`, repo.root]);
  });
  after(() => {
    abstract.close();
    hostService.close();
    allowed.close();
    model.close();
    repo.cleanup();
  });

  /** The repository asks for the host's loopback service (by address, and by a name that resolves to it) and for
   * the allowed destination: none of it counts, as a repository never opens a refused address (DESIGN §7a). */
  function writeRepoPolicy(): void {
    const port = hostPort(hostService).split(':')[1];
    const allow = [hostPort(hostService), `localhost:${port}`, hostPort(allowed)];
    writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ network: { allow } }));
  }

  /** `svc …` in the project, as nobody in that pass. */
  function svc(argv: string[], env: NodeJS.ProcessEnv) {
    return asNobody
      ? runChild('setpriv', [`--reuid=${NOBODY}`, `--regid=${NOBODY}`, '--clear-groups', '--', process.execPath, CLI,
        ...argv], { cwd: repo.repo, env })
      : runChild(process.execPath, [CLI, ...argv], { cwd: repo.repo, env });
  }

    it('reaches only what the gate allows, holds the model key, logs every attempt', async () => {
      hostSeen.length = 0;
      allowedSeen.length = 0;
      modelSeen.length = 0;
      const env: NodeJS.ProcessEnv = {
        ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0', ANTHROPIC_API_KEY: REAL_KEY,
        ANTHROPIC_BASE_URL: `http://${hostPort(model)}`,
      };
      delete env.SVC_SANDBOX;
      const brief = `probe HOSTSVC=${hostPort(hostService)} ALLOWED=${hostPort(allowed)} ABSTRACT=${ABSTRACT_NAME}`;
      const res = await svc(['start', '--brief', brief, '--provider', 'probes', '--worktree'], env);
      const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
      const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
      const net = readFileSync(join(state.workdir, 'net.txt'), 'utf8');
      const result = (name: string) => new RegExp(`^${name}:(.*)$`, 'm').exec(net)?.[1];

      assert.equal(result('host-direct'), '000', 'the host\'s loopback is not in the sandbox\'s network');
      assert.equal(result('host-via-gate'), '403', 'the gate refuses a loopback address the repository names');
      assert.equal(result('host-name-via-gate'), '403', 'and a name the repository lists that resolves to it');
      assert.equal(hostSeen.length, 0, 'the host service saw nothing');
      assert.equal(result('allowed-via-gate'), '200');
      assert.equal(allowedSeen.length, 1, 'the allowed destination saw one request, through the gate');
      assert.equal(result('allowed-no-proxy'), '000', 'without the proxy variables there is no route at all');
      assert.equal(result('dns'), 'failed');
      assert.equal(result('abstract'), 'refused', 'a host abstract Unix socket (D-Bus, X11 use them) is another namespace\'s');
      assert.equal(abstractSeen, 0);
      assert.equal(result('listening'), '1', 'only the gate\'s port listens in the sandbox');

      assert.equal(result('model'), '200');
      assert.notEqual(result('key'), REAL_KEY);
      assert.match(result('key') ?? '', /placeholder/);
      assert.equal(modelSeen.length, 1);
      assert.equal(modelSeen[0]!.headers['x-api-key'], REAL_KEY, 'the gate added the real key for the model host');
      assert.equal(modelSeen[0]!.path, '/v1/messages');

      const log = readFileSync(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'egress.jsonl'), 'utf8')
        .trim().split('\n').map((l) => JSON.parse(l) as { host: string; decision: string; kind: string });
      const [hostAddr] = hostPort(hostService).split(':');
      assert.ok(log.some((r) => r.host === hostAddr && r.decision === 'denied'), JSON.stringify(log));
      assert.ok(log.some((r) => r.host === '127.0.0.2' && r.decision === 'allowed'));
      assert.ok(log.some((r) => r.kind === 'model' && r.decision === 'allowed'));
      const receipt = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json'), 'utf8'));
      assert.equal(receipt.network.confined, true);
      const port = hostPort(hostService).split(':')[1];
      assert.deepEqual(receipt.network.allow, [`localhost:${port}`, hostPort(allowed)], 'what the gate allowed');
      assert.ok(receipt.network.denied >= 1);
      const events = readFileSync(join(repo.repo, '.svc', 'runs', run, 'events.jsonl'), 'utf8');
      assert.match(events, /"egress"/);
      for (const entry of [hostPort(hostService), hostPort(allowed)]) {
        assert.ok(events.includes(`Refused .svc/policy.json network.allow \\"${entry}\\" (loopback 127.0.0.0/8): ` +
          'a repository cannot open an address the gate refuses'), events);
      }
    });

    it('keeps a flood of connections bounded in events and memory, with exact totals in the receipt', async () => {
      const env: NodeJS.ProcessEnv = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0' };
      delete env.SVC_SANDBOX;
      const res = await svc(['start', '--brief', 'flood', '--provider', 'flood'], env);
      const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
      const dir = join(repo.repo, '.svc', 'runs', run);
      const events = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n').map((l) => JSON.parse(l));
      assert.equal(events.filter((e) => e.kind === 'egress').length, 500, 'at most 500 egress events');
      assert.ok(events.some((e) => e.kind === 'log' && /further ones only in egress\.jsonl/.test(e.data?.text ?? '')));
      const receipt = JSON.parse(readFileSync(join(dir, 'artifacts', 'receipt.json'), 'utf8'));
      assert.equal(receipt.network.connections, 600);
      assert.equal(receipt.network.denied, 600);
      assert.equal(readFileSync(join(dir, 'artifacts', 'egress.jsonl'), 'utf8').trim().split('\n').length, 600);
    });

    it('a retry keeps no operator grant withdrawn since; a grant that opens nothing is named in the log', async () => {
      const env: NodeJS.ProcessEnv = {
        ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0',
        ANTHROPIC_API_KEY: REAL_KEY, ANTHROPIC_BASE_URL: `http://${hostPort(model)}`,
      };
      delete env.SVC_SANDBOX;
      const operatorFile = join(repo.home, '.svc', 'operator.json');
      const granted = readFileSync(operatorFile, 'utf8');
      const operator = JSON.parse(granted);
      const setAllow = (allow: string[]) => {
        writeFileSync(operatorFile, JSON.stringify({ ...operator, network: { allow } }));
      };
      try {
        // A loopback address without its port: the gate refuses it all the same, and the run's log says so.
        setAllow([hostPort(allowed), '127.0.0.3']);
        const brief = `probe HOSTSVC=${hostPort(hostService)} ALLOWED=${hostPort(allowed)} ABSTRACT=${ABSTRACT_NAME}`;
        const first = await svc(['start', '--brief', brief, '--provider', 'probes', '--worktree'], env);
        const { run } = JSON.parse(first.stdout.trim().split('\n')[0]!) as { run: string };
        assert.match(readFileSync(join(repo.repo, '.svc', 'runs', run, 'events.jsonl'), 'utf8'),
          /The operator's network.allow \\"127\.0\.0\.3\\" .* opens nothing/);

        setAllow([]);
        allowedSeen.length = 0;
        const retry = await svc(['start', '--retry', run], env);
        const { run: again } = JSON.parse(retry.stdout.trim().split('\n')[0]!) as { run: string };
        const dir = join(repo.repo, '.svc', 'runs', again);
        const net = readFileSync(join(readJson(join(dir, 'state.json')).workdir, 'net.txt'), 'utf8');
        assert.match(net, /^allowed-via-gate:403$/m, 'the withdrawn grant opens nothing');
        assert.equal(allowedSeen.length, 0, 'the once-allowed destination saw nothing');
        const receipt = JSON.parse(readFileSync(join(dir, 'artifacts', 'receipt.json'), 'utf8'));
        assert.ok(!receipt.network.allow.includes(hostPort(allowed)), 'nor does the receipt say it was allowed');
        assert.match(readFileSync(join(dir, 'events.jsonl'), 'utf8'),
          /operator network\.allow 127\.0\.0\.2:\d+, 127\.0\.0\.3 left out: no longer in the operator's configuration/);
      } finally {
        writeFileSync(operatorFile, granted);
      }
    });

    it('says in the receipt that nothing was confined when the run had no sandbox', async () => {
      const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0', SVC_SANDBOX: 'none' };
      const brief = `unconfined HOSTSVC=${hostPort(hostService)} ABSTRACT=${ABSTRACT_NAME}`;
      const res = await svc(['start', '--brief', brief, '--provider', 'probes', '--worktree'], env);
      const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
      const receipt = JSON.parse(readFileSync(join(repo.repo, '.svc', 'runs', run, 'artifacts', 'receipt.json'), 'utf8'));
      assert.equal(receipt.network.confined, false);
      // The same probes, unconfined, do reach the host: the sandboxed results above are the sandbox's doing.
      const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
      const net = readFileSync(join(state.workdir, 'net.txt'), 'utf8');
      assert.match(net, /^host-direct:200$/m);
      assert.match(net, /^abstract:connected$/m);
    });

    it('refuses a policy whose network pattern is malformed, before the run starts', async () => {
      writeFileSync(join(repo.repo, '.svc', 'policy.json'), JSON.stringify({ network: { allow: ['http://x/'] } }));
      if (asNobody) execFileSync('chown', [`${NOBODY}:${NOBODY}`, join(repo.repo, '.svc', 'policy.json')]);
      try {
        const env = { ...process.env, ...GIT_ENV, HOME: repo.home, SVC_CONTROL_URL: 'http://127.0.0.1:9', SVC_SHIP: '0' };
        const res = await svc(['start', '--brief', 'x', '--provider', 'probes'], env);
        assert.equal(res.code, 1, res.stderr);
        assert.match(res.stderr, /policy\.json network: Network pattern "http:\/\/x\/"/);
      } finally {
        writeRepoPolicy();
      }
    });
}

describe('the agent\'s network', { skip: bwrapWorks ? false : 'bwrap cannot run on this host' }, () => {
  describe(`as ${isRoot ? 'root' : 'this user'}`, () => suite(false));
  describe('as an unprivileged user (nobody, through setpriv)', { skip: isRoot ? false : 'needs root to drop to nobody' },
    () => suite(true));
});

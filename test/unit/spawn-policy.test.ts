import { describe, it } from 'node:test';
import assert from 'node:assert/strict';
import { execFileSync, spawn, spawnSync } from 'node:child_process';
import { createServer, type Server as NetServer, type Socket } from 'node:net';
import {
  chmodSync, existsSync, mkdtempSync, mkdirSync, readdirSync, readFileSync, realpathSync, rmSync, symlinkSync,
  writeFileSync,
} from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { DEFAULT_LIMITS } from '../../src/spawn/limits.ts';
import { bwrapArgv, closeSandboxFds, openSandboxFds, shownBy } from '../../src/spawn/bwrap-argv.ts';
import { GATE_CHANNEL_FD, sandboxGate, type SandboxGate } from '../../src/spawn/sandbox-command.ts';
import { childEnv, runCollect, runSync, startChild } from '../../src/spawn/start.ts';
import { agentSandboxPlan, declaredFolders, gitSandboxPlan } from '../../src/spawn/agent-plan.ts';
import { BadSettingError } from '../../src/errors.ts';
import { ignoredPolicyNote } from '../../src/spawn/sandbox-mode.ts';
import { agentSandbox, type RunSandbox } from '../../src/engine/sandbox.ts';
import { openRunContext } from '../../src/engine/run-context.ts';
import { writeState } from '../../src/engine/run-state.ts';
import { parsePolicy } from '../../src/engine/policy.ts';
import type { ResolvedProvider } from '../../src/engine/providers.ts';
import { orNull, readlinkOrNull, readOrNull, sandboxMembers } from '../../src/spawn/tree.ts';
import { statFields } from '../../src/proc-stat.ts';
import { processesMentioning, stateFor } from '../engine/fixtures.ts';
import { waitFor } from '../helpers/wait-for.ts';
import { planRun } from '../../src/engine/run-plan.ts';

describe('childEnv', () => {
  const base = { PATH: '/bin', HOME: '/h', GITHUB_TOKEN: 'g', SVC_API_TOKEN_FILE: '/t', SVC_ORIGIN: 'cli', SVC_SOURCE: 's' };
  it('gives an agent no svc credential and no SVC_* variable but SVC_SOURCE', () => {
    assert.deepEqual(childEnv('agent', base, { SVC_TASK_FILE: '/x' }), {
      PATH: '/bin', HOME: '/h', SVC_SOURCE: 's', SVC_TASK_FILE: '/x',
    });
  });
  it('gives an agent an allowlist: the user\'s other variables stay out, the providers\' own and the locale pass', () => {
    // Not a name the /bin/sh that starts the agent may drop (dash does): what the agent gets is what this says.
    const shell = { ...base, AWS_SECRET_ACCESS_KEY: 'a', NPM_TOKEN: 'n', DATABASE_URL: 'd', LC_ALL: 'C', TZ: 'UTC',
      CLAUDE_CODE_USE_BEDROCK: '1', ANTHROPIC_API_KEY: 'k', SSL_CERT_FILE: '/c', TMPDIR: '/var/t',
      'CLAUDE_CODE_x.y': '1', 'LC_a-b': '1' };
    assert.deepEqual(childEnv('agent', shell), { PATH: '/bin', HOME: '/h', SVC_SOURCE: 's', LC_ALL: 'C', TZ: 'UTC',
      CLAUDE_CODE_USE_BEDROCK: '1', ANTHROPIC_API_KEY: 'k', SSL_CERT_FILE: '/c' });
  });
  it('passes no credential by a CLI\'s prefix: the run adds those by name, or the gate its placeholders', () => {
    const cli = { CODEX_API_KEY: 'k', AIDER_API_KEY: 'a', CLAUDE_CODE_OAUTH_TOKEN: 't', OPENCODE_CONFIG_CONTENT: '{}',
      GEMINI_API_KEY: 'g', AIDER_DARK_MODE: '1', CODEX_HOME: '/c' };
    assert.deepEqual(childEnv('agent', cli), { GEMINI_API_KEY: 'g', AIDER_DARK_MODE: '1', CODEX_HOME: '/c' });
  });
  it('gives a launcher and a fetcher only their allowlisted names, and a probe PATH and HOME', () => {
    const wide = { ...base, LC_ALL: 'C', HTTPS_PROXY: 'http://p', OPENAI_API_KEY: 'o', SVC_CONTROL_URL: 'http://c',
      GITHUB_API_URL: 'https://ghe.example/api/v3' };
    assert.deepEqual(childEnv('launcher', wide), { PATH: '/bin', HOME: '/h', SVC_ORIGIN: 'cli', SVC_SOURCE: 's', LC_ALL: 'C',
      SVC_CONTROL_URL: 'http://c', GITHUB_API_URL: 'https://ghe.example/api/v3' });
    assert.deepEqual(childEnv('fetch', wide), { PATH: '/bin', HOME: '/h', HTTPS_PROXY: 'http://p' });
    assert.deepEqual(childEnv('probe', wide, { LANG: 'C' }), { PATH: '/bin', HOME: '/h', LANG: 'C' });
  });
  it("passes a server's SVC_COMPILE_CACHE to its launchers, and NODE_COMPILE_CACHE to no child at all", () => {
    const server = { PATH: '/bin', SVC_COMPILE_CACHE: '0', NODE_COMPILE_CACHE: '/c' };
    for (const kind of ['launcher', 'control-launcher'] as const) {
      assert.deepEqual(childEnv(kind, server), { PATH: '/bin', SVC_COMPILE_CACHE: '0' }, kind);
    }
    for (const kind of ['svc-worker', 'tool', 'agent', 'fetch', 'probe'] as const) {
      assert.equal(childEnv(kind, server).NODE_COMPILE_CACHE, undefined, kind);
    }
  });
});

describe('startChild', () => {
  it('hands secrets only to a child svc: a fetcher, a probe, a tool or an agent is refused before it starts', () => {
    for (const kind of ['fetch', 'probe', 'tool', 'agent'] as const) {
      assert.throws(() => startChild(['/bin/true'], { kind, base: {}, secrets: { GITHUB_TOKEN: 'g' } }),
        { name: 'RangeError', message: `secrets go only to a child svc, never to a child of kind ${kind}` });
    }
  });
});

// A child svc ends at its time limit or an abort takes what it started with it, and the call returns then.
describe('runCollect and runSync ended early', () => {
  const tool = { kind: 'tool', base: process.env } as const;
  /** This test's own sleep: its argument whole (between NULs) is found in /proc, never another copy's. */
  const sleeper = (n: number) => `${290 + n}.${process.pid}`;
  const running = (tag: string) => processesMentioning(`\0${tag}\0`);

  it('ends what the child started, reparented or not, and returns although a process that left holds its output',
    async () => {
      // `marked` outlives its subshell (reparented, no parent to walk from); `away` clears the environment too.
      const [marked, away, waited] = [sleeper(1), sleeper(2), sleeper(3)];
      const script = `(/bin/sleep ${marked} &); (env -i /usr/bin/setsid /bin/sleep ${away} &); /bin/sleep ${waited}`;
      const abort = new AbortController();
      const done = runCollect(['/bin/sh', '-c', script], { ...tool, signal: abort.signal });
      try {
        // Each a sleep by now, and the first two reparented: their subshells (which show the script) are gone.
        const reparented = (tag: string) => running(tag).some((pid) => readOrNull(`/proc/${pid}/cmdline`)
          ?.startsWith('/bin/sleep\0') && !readOrNull(`/proc/${statFields(pid)?.[1]}/cmdline`)?.includes(waited));
        await waitFor(() => reparented(marked) && reparented(away) && running(waited).length === 1, 'the sleeps');
        abort.abort();
        // Before, the call waited for `marked` (a killed tree missed it) or left it running (git alone was killed).
        const result = await done;
        assert.equal(result.status, null);
        assert.deepEqual([running(marked), running(waited)], [[], []]);
        assert.equal(running(away).length, 1, 'the process that left holds the output pipes yet');
      } finally {
        for (const pid of [marked, away, waited].flatMap(running)) process.kill(pid, 'SIGKILL');
      }
    });

  it('lets git clean up before its tree is killed: no index.lock is left to fail every later git there', async () => {
    const repo = mkdtempSync(join(tmpdir(), 'svc-run-collect-'));
    const hook = sleeper(4);
    const git = (...args: string[]) => execFileSync('git', ['-C', repo, ...args], { stdio: 'ignore' });
    try {
      git('init', '-q');
      writeFileSync(join(repo, 'f'), 'x');
      git('add', 'f');
      writeFileSync(join(repo, 'f'), 'y');
      // The hook runs while `git commit -a` holds .git/index.lock (a commit of the index as it is has let it go).
      writeFileSync(join(repo, '.git/hooks/pre-commit'), `#!/bin/sh
exec /bin/sleep ${hook} </dev/null >/dev/null 2>&1
`);
      chmodSync(join(repo, '.git/hooks/pre-commit'), 0o755);
      const abort = new AbortController();
      const argv = ['git', '-C', repo, '-c', 'user.name=a', '-c', 'user.email=a@b', 'commit', '-aqm', 'm'];
      const done = runCollect(argv, { ...tool, signal: abort.signal });
      await waitFor(() => running(hook).length === 1, 'the pre-commit hook to run');
      abort.abort();
      assert.equal((await done).status, null);
      assert.equal(existsSync(join(repo, '.git/index.lock')), false, 'git was killed before it could clean up');
      assert.deepEqual(running(hook), [], 'the hook git started runs on');
    } finally {
      for (const pid of running(hook)) process.kill(pid, 'SIGKILL');
      rmSync(repo, { recursive: true, force: true });
    }
  });

  it('runSync at its time limit ends what git started: no remote helper stays connected to an origin', async () => {
    const sockets: Socket[] = [];
    const origin = createServer((socket) => sockets.push(socket.on('error', () => {})));
    await new Promise<void>((resolve) => origin.listen(0, '127.0.0.1', resolve));
    const url = `http://127.0.0.1:${(origin.address() as { port: number }).port}/${sleeper(5)}.git`;
    try {
      // The origin never answers: git always meets its limit, whatever the machine's load.
      assert.throws(() => runSync(['git', 'ls-remote', url], { ...tool, timeout: 1000 }), { code: 'ETIMEDOUT' });
      await waitFor(() => sockets.length > 0, 'git\'s helper to have connected before the limit');
      assert.deepEqual(processesMentioning(url), [], 'git\'s remote helper still runs');
    } finally {
      for (const pid of processesMentioning(url)) process.kill(pid, 'SIGKILL');
      for (const socket of sockets) socket.destroy();
      origin.close();
    }
  });
});

describe('ignoredPolicyNote', () => {
  it('says in a server-started run\'s log that its policy\'s "sandbox": "none" was not obeyed, and only there', () => {
    assert.match(ignoredPolicyNote('none', { SVC_ORIGIN: 'webhook' }) ?? '', /sandboxed all the same \(only SVC_SERVER_SANDBOX/);
    assert.equal(ignoredPolicyNote('none', { SVC_ORIGIN: 'cli' }), null);
    assert.equal(ignoredPolicyNote('none', {}), null);
    assert.equal(ignoredPolicyNote(null, { SVC_ORIGIN: 'control' }), null);
  });
});

describe('declaredFolders', () => {
  const folders = (declared: string[], PATH = '') => {
    const notes: string[] = [];
    const bound = declaredFolders({ home: '/h', declared, workdir: '/w/repo/.svc/worktrees/r1', repo: '/w/repo',
      env: { PATH }, note: (text) => notes.push(text) });
    return { bound, notes };
  };

  it('puts relative declared paths under HOME, keeps absolute ones, and drops what may never be writable', () => {
    assert.deepEqual(folders(['.x', '/abs']).bound, ['/h/.x', '/abs']);
    assert.deepEqual(folders(['.ssh', '/h', '/usr/lib', '.bashrc']).bound, []);
    assert.deepEqual(folders(['/tools/bin', '/tools/cache'], '/usr/bin:/tools/bin').bound, ['/tools/cache'],
      'a folder on svc\'s PATH is never writable');
  });

  it('binds nothing inside the repository: the working tree is writable already, the rest is not the run\'s', () => {
    const { bound, notes } = folders(['/w/repo/.svc/worktrees/r1/cache', '/w/repo/cache',
      '/w/repo/.svc/worktrees/r0/cache']);
    assert.deepEqual(bound, []);
    assert.equal(notes.length, 2, 'the working tree\'s own folder needs no note');
    assert.match(notes[0]!, /"\/w\/repo\/cache" is in the repository, outside the run's working tree: left out/);
  });
});

describe('agentSandboxPlan: folders a hidden path holds', () => {
  it('says in the run\'s log, once per run, a folder on PATH or a declared one left out for lying in a hidden path', async () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-spawn-'));
    try {
      const home = join(root, 'home');
      const repo = join(root, 'repo');
      const answers = join(root, 'answers');
      for (const dir of [join(home, '.aws', 'bin'), repo, join(answers, 'local')]) mkdirSync(dir, { recursive: true });
      const env = { HOME: home, PATH: `/usr/bin:/bin:${home}/.aws/bin`, SVC_CONTROL_ANSWER_DIR: answers };
      const dir = join(repo, '.svc', 'runs', 'r1');
      mkdirSync(dir, { recursive: true });
      writeState(dir, stateFor(repo, 'r1'));
      const ctx = openRunContext(dir, env, { ship: false });
      const sandbox: RunSandbox = { mode: { kind: 'bwrap', bwrap: 'bwrap' }, gate: null, env: {} };
      const provider = { kind: 'command', writable: [join(answers, 'local')] } as unknown as ResolvedProvider;
      // The provider's invocation, then a check: the same folders left out each time.
      agentSandbox(ctx, sandbox, '/bin/sh', provider, parsePolicy({}).limits);
      agentSandbox(ctx, sandbox, '/bin/sh', null, parsePolicy({}).limits);
      await ctx.close();
      const said = readFileSync(join(dir, 'events.jsonl'), 'utf8').trim().split('\n')
        .map((line) => JSON.parse(line).data.text as string | undefined).filter((text) => text?.includes('hides'));
      assert.deepEqual(said, [
        `folder on PATH "${home}/.aws/bin" is in "${home}/.aws", which the sandbox hides: left out`,
        `writable folder "${answers}/local" is in "${answers}", which the sandbox hides: left out`,
      ]);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

const bwrapWorks = spawnSync('bwrap', ['--ro-bind', '/', '/', '--unshare-pid', '--proc', '/proc', 'true']).status === 0;

describe('bwrapArgv under a real bwrap', { skip: bwrapWorks || process.env.CI ? false : 'bwrap cannot run here' }, () => {
  it('hides ~/.svc and other processes, keeps the worktree writable, and kills setsid children at exit', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-spawn-'));
    try {
      const home = join(root, 'home');
      const svcDir = join(home, '.svc');
      const worktree = join(root, 'wt');
      mkdirSync(join(svcDir, 'keys'), { recursive: true });
      mkdirSync(worktree);
      writeFileSync(join(svcDir, 'keys', 'k.pem'), 'SECRET-KEY');
      const task = join(svcDir, 'runs', 'r1', 'task.md');
      mkdirSync(join(svcDir, 'runs', 'r1'), { recursive: true });
      writeFileSync(task, 'the task\n');
      const beat = join(worktree, 'beat');
      const script = [
        `cat ${svcDir}/keys/k.pem 2>/dev/null && echo LEAK`,
        `cat ${task}`,
        'echo written > out.txt',
        'ls /proc | grep -E "^[0-9]+$" | wc -l',
        `setsid sh -c 'while true; do echo beat >> ${beat}; sleep 0.05; done' &`,
        // Ends once the heartbeat has beaten (a fixed sleep raced its first beat on a loaded machine); 30 s at most.
        `for i in $(seq 3000); do [ -s ${beat} ] && break; sleep 0.01; done`,
      ].join('\n');
      const plan = {
        readable: [], writable: [worktree], protect: [], hidden: [svcDir], protocolReadable: [task],
        protocolWritable: [], home: null, cwd: worktree, limits: DEFAULT_LIMITS, network: 'none' as const,
      };
      const argv = bwrapArgv('bwrap', plan, ['sh', '-c', script]);
      const fds = openSandboxFds();
      const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe', ...fds] });
      closeSandboxFds(fds);
      assert.equal(run.status, 0, run.stderr);
      const lines = run.stdout.trim().split('\n');
      assert.equal(lines.includes('LEAK'), false);
      assert.equal(lines[0], 'the task');
      assert.ok(Number(lines[1]) < 8, `only the sandbox's own processes are visible, saw ${lines[1]}`);
      assert.equal(readFileSync(join(worktree, 'out.txt'), 'utf8'), 'written\n');
      assert.ok(readFileSync(beat, 'utf8').length > 0, 'the setsid heartbeat ran');
      assert.deepEqual(processesMentioning(beat), [], 'the setsid heartbeat died with the sandbox');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('binds a readable folder inside a writable tree by the tree\'s bind alone, protected where the plan says', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-spawn-'));
    try {
      const worktree = join(root, 'wt');
      const tools = join(worktree, 'tools');
      const git = join(worktree, '.git');
      mkdirSync(tools, { recursive: true });
      mkdirSync(git);
      writeFileSync(join(tools, 'tool'), 'a tool\n');
      const plan = {
        readable: [tools, git], writable: [worktree], protect: [git], hidden: [], protocolReadable: [],
        protocolWritable: [], home: null, cwd: worktree, limits: DEFAULT_LIMITS, network: 'none' as const,
      };
      const script = 'cat tools/tool; echo w > tools/new && echo tools-writable; ' +
        'echo w > .git/new 2>/dev/null || echo git-ro';
      const argv = bwrapArgv('bwrap', plan, ['sh', '-c', script]);
      // Each mount costs bwrap a pass over its mount table: the two the worktree's bind covers are not made.
      const binds = (path: string) => argv.filter((arg, i) => arg === path && argv[i - 1] === path).length;
      assert.equal(binds(tools), 0);
      assert.equal(binds(git), 1, 'only protect\'s bind of .git, after the worktree\'s');
      const fds = openSandboxFds();
      const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe', ...fds] });
      closeSandboxFds(fds);
      assert.equal(run.status, 0, run.stderr);
      assert.deepEqual(run.stdout.trim().split('\n'), ['a tool', 'tools-writable', 'git-ro']);
      assert.equal(existsSync(join(git, 'new')), false);
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('limits every process in the sandbox but bwrap\'s init, behind the gate or none, and masks the init',
    async () => {
      const root = mkdtempSync(join(tmpdir(), 'svc-spawn-'));
      // The gate's port each sandbox hands out (sandbox-command.ts): closed at once, as the test serves nothing.
      const served: NetServer[] = [];
      try {
        const worktree = join(root, 'wt');
        mkdirSync(worktree);
        // The agent tries to open its init's memory (the way to rewrite the one process its limits and filter do not
        // bind), leaves a child behind, says what its /tmp holds, and waits for the test to have looked.
        const script = [
          'echo ran > ran',
          'echo "agent $$"',
          '(exec 3<>/proc/1/mem) 2>/dev/null && echo "init-mem opened" || echo "init-mem refused"',
          'sleep 1000 &',
          'find /tmp -mindepth 1 | sed "s/^/tmp /"',
          'echo ready',
          'read -r _',
        ].join('\n');
        // Small enough that node (the gate's port program) bound by it could not start.
        const limits = { ...DEFAULT_LIMITS, processes: 512, memoryBytes: 64 * 1024 * 1024 };
        const planOf = (network: SandboxGate | 'none', limit: typeof limits) => ({
          readable: [], writable: [worktree], protect: [], hidden: [], protocolReadable: [], protocolWritable: [],
          home: null, cwd: worktree, limits: limit, network,
        });
        const run = (network: SandboxGate | 'none', limit: typeof limits) => {
          rmSync(join(worktree, 'ran'), { force: true });
          const argv = bwrapArgv('bwrap', planOf(network, limit), ['sh', '-c', script]);
          const fds = openSandboxFds();
          const passed = fds.map((fd, i) => (3 + i === GATE_CHANNEL_FD && network !== 'none' ? 'ipc' as const : fd));
          const child = spawn(argv[0]!, argv.slice(1), { stdio: ['pipe', 'pipe', 'pipe', ...passed] });
          closeSandboxFds(fds);
          child.on('message', (_m, handle) => served.push(handle as NetServer));
          let [stdout, stderr] = ['', ''];
          child.stdout!.on('data', (b: Buffer) => { stdout += b; });
          child.stderr!.on('data', (b: Buffer) => { stderr += b; });
          const status = new Promise<number | null>((done) => child.on('close', done));
          return { child, status, out: () => stdout, err: () => stderr };
        };
        /** The host's view of each process in the sandbox: its pid inside, program, limits and descriptors. */
        const inside = (outer: number) => sandboxMembers(outer).map((pid) => {
          const limit = (name: string) => {
            const m = new RegExp(`^Max ${name}\\s+(\\S+)\\s+(\\S+)`, 'm').exec(readOrNull(`/proc/${pid}/limits`) ?? '');
            return m && m[1] === m[2] ? m[1] : `${m?.[1]}/${m?.[2]}`;
          };
          const fds = orNull(() => readdirSync(`/proc/${pid}/fd`)) ?? [];
          return {
            pid: /^NSpid:.*\s(\d+)$/m.exec(readOrNull(`/proc/${pid}/status`) ?? '')?.[1],
            exe: readlinkOrNull(`/proc/${pid}/exe`) ?? '',
            every: [limit('processes'), limit('file size'), limit('open files'), limit('core file size')],
            data: limit('data size'),
            fd: fds.map((fd) => readlinkOrNull(`/proc/${pid}/fd/${fd}`) ?? ''),
            socketsPastStdio: fds.filter((fd) => Number(fd) > 2
              && readlinkOrNull(`/proc/${pid}/fd/${fd}`)?.startsWith('socket:')),
          };
        });
        const openFiles = Math.min(8192, Number(/^Max open files\s+\S+\s+(\d+)/m
          .exec(readFileSync('/proc/self/limits', 'utf8'))?.[1]));
        const every = [String(limits.processes), String(limits.fileBytes), String(openFiles), '0'];
        const ways = [sandboxGate(() => undefined), sandboxGate(() => undefined, false), 'none' as const];
        for (const network of ways) {
          const kind = network === 'none' ? 'no gate' : network.activator ? 'activated gate' : 'gate';
          const handed = served.length;
          const started = run(network, limits);
          try {
            await waitFor(() => started.out().includes('ready\n') || started.child.exitCode !== null, `${kind}: ready`);
            assert.match(started.out(), /^ready$/m, `${kind}: ${started.err()}`);
            const agent = /^agent (\d+)$/m.exec(started.out())?.[1];
            assert.match(started.out(), /^init-mem refused$/m, `${kind}: the agent opened its init's memory`);
            const processes = inside(started.child.pid!);
            const one = (what: string, found: typeof processes) => {
              assert.equal(found.length, 1, `${kind}: one ${what} in ${JSON.stringify(processes)}`);
              return found[0]!;
            };
            const self = one('agent', processes.filter((p) => p.pid === agent));
            one('child of the agent', processes.filter((p) => p.exe.endsWith('/sleep')));
            const limited = processes.filter((p) => p.pid !== '1');
            assert.equal(limited.length, processes.length - 1, `${kind}: bwrap's init is in the sandbox`);
            for (const p of limited) assert.deepEqual(p.every, every, `${kind}: ${p.exe} carries every limit`);
            assert.equal(self.data, String(limits.memoryBytes), `${kind}: the agent's data limit`);
            // Nothing but the worktree's bind (a temp dir may be under /tmp).
            const tmp = [...started.out().matchAll(/^tmp (.*)$/gm)].map((m) => m[1]!)
              .filter((path) => !`${worktree}/`.startsWith(`${path}/`) && !path.startsWith(`${worktree}/`));
            assert.deepEqual(tmp, [], `${kind}: the agent's /tmp is empty`);
            // Past stdio the agent holds only what this test inherited (a harness's pipe): not the filter's descriptor
            // bwrap read, the channel, nor the activator's log pipe.
            const ours = new Set(readdirSync('/proc/self/fd').map((fd) => readlinkOrNull(`/proc/self/fd/${fd}`)));
            const added = self.fd.slice(3).filter((target) => !ours.has(target));
            assert.deepEqual(added, [], `${kind}: the agent's descriptors: ${self.fd.join(' ')}`);
            assert.deepEqual(self.socketsPastStdio, [], `${kind}: the agent holds a socket: ${self.fd.join(' ')}`);
            const activated = network !== 'none' && network.activator !== null;
            if (activated) {
              // systemd's activator waits beside the agent for the first connection, and a shell drains its log; the
              // program runs only at that connection, which this agent never makes.
              one('activator', processes.filter((p) => p.exe === network.activator));
              one('log drain', processes.filter((p) => p.pid !== agent && p.exe.endsWith('sh')));
              assert.equal(processes.length, 5, `${kind}: init, the activator, its drain, the agent and its child`);
              assert.equal(served.length, handed, `${kind}: nothing was handed out before a connection`);
            } else {
              // The gate's program handed its port out and ended before the agent started: nothing of it runs beside.
              assert.equal(processes.length, 3, `${kind}: init, the agent and its child`);
            }
            if (network !== 'none' && !activated) {
              const port = served.at(-1)?.address();
              assert.equal(typeof port === 'object' && port?.port, 3128, `${kind}: the sandbox's port was handed out`);
            }
          } finally {
            started.child.stdin!.end('\n');
            await started.status;
          }
          assert.equal(await started.status, 0, `${kind}: ${started.err()}`);
          // A limit prlimit refuses: the start fails before the agent's command, behind a gate with its own status.
          for (const refused of [{ ...limits, fileBytes: Number.NaN }, { ...limits, memoryBytes: Number.NaN }]) {
            const failed = run(network, refused);
            failed.child.stdin!.end();
            const status = await failed.status;
            assert.notEqual(status, 0, `${kind}: ${failed.err()}`);
            if (network !== 'none' && Number.isNaN(refused.memoryBytes)) assert.equal(status, 125, kind);
            assert.equal(failed.out(), '', kind);
            assert.equal(existsSync(join(worktree, 'ran')), false, `${kind}: the agent's command never ran`);
          }
        }
      } finally {
        for (const listener of served) listener.close();
        rmSync(root, { recursive: true, force: true });
      }
    });

  it('shows nothing of a HOME credential folder that is, or holds, a folder on PATH', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-spawn-'));
    try {
      const home = join(root, 'home');
      const repo = join(root, 'repo');
      const io = join(root, 'io');
      mkdirSync(join(home, '.aws', 'bin'), { recursive: true });
      mkdirSync(repo);
      mkdirSync(io);
      writeFileSync(join(home, '.aws', 'credentials'), 'SECRET-KEY');
      writeFileSync(join(home, '.aws', 'bin', 'token'), 'SECRET-TOKEN');
      for (const onPath of [join(home, '.aws'), join(home, '.aws', 'bin')]) {
        const plan = agentSandboxPlan({
          workdir: repo, repo, ioDir: io, askDir: io, answerDir: io, svcHome: join(home, '.svc'), home,
          provider: 'command', declared: [], program: '/bin/sh', env: { PATH: `/usr/bin:/bin:${onPath}` }, gate: null,
        });
        const script = `cat ${home}/.aws/credentials 2>/dev/null; cat ${home}/.aws/bin/token 2>/dev/null; echo done`;
        const argv = bwrapArgv('bwrap', plan, ['sh', '-c', script]);
        const fds = openSandboxFds();
        const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe', ...fds] });
        closeSandboxFds(fds);
        assert.equal(run.status, 0, run.stderr);
        assert.equal(run.stdout.trim(), 'done', `PATH holds ${onPath}`);
      }
      // Nor through a HOME reached by a link: PATH folders are bound by their real path, the masks must be too.
      const linkedHome = join(root, 'home-link');
      symlinkSync(home, linkedHome);
      const linkedPlan = agentSandboxPlan({
        workdir: repo, repo, ioDir: io, askDir: io, answerDir: io, svcHome: join(linkedHome, '.svc'),
        home: linkedHome, provider: 'command', declared: [], program: '/bin/sh',
        env: { PATH: `/usr/bin:/bin:${linkedHome}/.aws/bin` }, gate: null,
      });
      const read = `cat ${home}/.aws/bin/token 2>/dev/null; cat ${linkedHome}/.aws/bin/token 2>/dev/null; echo done`;
      const linkedArgv = bwrapArgv('bwrap', linkedPlan, ['sh', '-c', read]);
      const linkedFds = openSandboxFds();
      const linkedRun = spawnSync(linkedArgv[0]!, linkedArgv.slice(1),
        { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe', ...linkedFds] });
      closeSandboxFds(linkedFds);
      assert.equal(linkedRun.status, 0, linkedRun.stderr);
      assert.equal(linkedRun.stdout.trim(), 'done', 'PATH holds ~/.aws/bin through a linked HOME');
      // Nor a folder declared writable inside a hidden one (the Control Plane's answers): it is not bound at all.
      const answers = join(root, 'answers');
      mkdirSync(join(answers, 'local'), { recursive: true });
      const plan = agentSandboxPlan({
        workdir: repo, repo, ioDir: io, askDir: io, answerDir: io, svcHome: join(home, '.svc'), home,
        provider: 'command', declared: [join(answers, 'local')], program: '/bin/sh', gate: null,
        env: { PATH: '/usr/bin:/bin', SVC_CONTROL_ANSWER_DIR: answers },
      });
      const argv = bwrapArgv('bwrap', plan, ['sh', '-c', `echo forged > ${answers}/local/r.json; echo done`]);
      const fds = openSandboxFds();
      const run = spawnSync(argv[0]!, argv.slice(1), { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe', ...fds] });
      closeSandboxFds(fds);
      assert.equal(run.status, 0, run.stderr);
      assert.deepEqual(readdirSync(join(answers, 'local')), [], 'nothing written into the answers folder');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

describe('bwrapArgv: a HOME or a secret in a folder the system view shows', () => {
  const plan = (home: string, hidden: string[] = []) => ({
    readable: [], writable: [], protect: [], hidden, protocolReadable: [], protocolWritable: [], home,
    cwd: '/', limits: DEFAULT_LIMITS, network: 'none' as const,
  });
  const has = (argv: string[], ...seq: string[]) => argv.some((_, i) => seq.every((a, j) => argv[i + j] === a));

  it('covers a HOME under /usr with its private tmpfs, and refuses a HOME that is or holds a system folder', () => {
    assert.ok(has(bwrapArgv('bwrap', plan('/usr/local/games/home'), ['true']), '--tmpfs', '/usr/local/games/home'));
    for (const home of ['/usr', '/', '/etc', '/usr/', '//', '/usr/local/..']) {
      assert.throws(() => bwrapArgv('bwrap', plan(home), ['true']), BadSettingError, home);
    }
  });

  it('says a file under a HOME in /usr is not shown: the private tmpfs covers it', () => {
    const at = (home: string) => ({ ...plan(home), cwd: '/tmp/work' });
    assert.equal(shownBy(at('/usr/local/games/home'), '/usr/local/games/home/.ssh/id_ed25519'), false);
    assert.equal(shownBy(at('/usr/local/games/home/'), '/usr/local/games/home/.ssh/id_ed25519'), false);
    assert.equal(shownBy(at('/usr/local/games/home'), '/usr/local/games/other'), true);
  });

  const merged = realpathSync('/bin') !== '/bin' ? false : 'no merged /usr here (/bin is no link)';
  it('masks only a link-free spelling in the view, covers no HOME the view shows by a link', { skip: merged }, () => {
    // /bin/env through the /bin link: bwrap would mount on the link's target (out of the view it fails every sandbox).
    const argv = bwrapArgv('bwrap', plan('/usr/local/games/home', ['/bin/env', '/usr/bin/env']), ['true']);
    assert.ok(!argv.includes('/bin/env'), argv.join(' '));
    assert.ok(has(argv, '--ro-bind', '/dev/null', '/usr/bin/env'));
    const linked = bwrapArgv('bwrap', plan('/bin/env'), ['true']);
    assert.ok(!has(linked, '--tmpfs', '/bin/env'), linked.join(' '));
  });

  it('masks a configured secret file in a system folder, in the agent\'s sandbox and in git\'s', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-spawn-'));
    try {
      const home = join(root, 'home');
      const repo = join(root, 'repo');
      mkdirSync(join(repo, '.git'), { recursive: true });
      mkdirSync(join(home, '.ssh'), { recursive: true });
      // Any file of a system folder stands in for a token file kept there (/usr/local/etc/svc/token).
      const env = { PATH: '/usr/bin:/bin', HOME: home, SVC_CONTROL_TOKEN_FILE: '/usr/bin/env' };
      const agent = agentSandboxPlan({
        workdir: repo, repo, ioDir: repo, askDir: repo, answerDir: repo, svcHome: join(home, '.svc'), home,
        provider: 'check', declared: [], program: '/bin/sh', env, gate: null,
      });
      const git = gitSandboxPlan({ workdir: repo, repo, home, svcHome: join(home, '.svc'), env, scratch: [] });
      for (const p of [agent, git]) {
        assert.ok(has(bwrapArgv('bwrap', p, ['true']), '--ro-bind', '/dev/null', '/usr/bin/env'));
        assert.ok(p.hidden.includes(join(home, '.ssh')));
      }
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });

  it('protects a linked git config at the file its link leads to, through a linked folder on the way', () => {
    const root = realpathSync(mkdtempSync(join(tmpdir(), 'svc-spawn-')));
    try {
      const [home, repo] = [join(root, 'home'), join(root, 'repo')];
      mkdirSync(join(repo, '.git'), { recursive: true });
      mkdirSync(join(repo, 'deep', 'a'), { recursive: true });
      // .git/config → alias/config, alias → deep/a, whose config's `..` is deep (the kernel's), not the repository.
      writeFileSync(join(repo, 'deep', 'config-real'), '[core]\n');
      writeFileSync(join(repo, 'config-real'), '[core]\n');
      symlinkSync('deep/a', join(repo, 'alias'));
      symlinkSync('../config-real', join(repo, 'deep', 'a', 'config'));
      symlinkSync('../alias/config', join(repo, '.git', 'config'));
      const env = { PATH: '/usr/bin:/bin', HOME: home };
      const git = gitSandboxPlan({ workdir: repo, repo, home, svcHome: join(home, '.svc'), env, scratch: [] });
      assert.ok(git.protect.includes(join(repo, 'deep', 'config-real')), git.protect.join(' '));
      assert.ok(!git.protect.includes(join(repo, 'config-real')), git.protect.join(' '));
      assert.ok(has(bwrapArgv('bwrap', git, ['true']), '--ro-bind', join(repo, 'deep', 'config-real'),
        join(repo, 'deep', 'config-real')));
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

const noBwrap = bwrapWorks ? false : 'bwrap cannot run here';
describe('planRun: a HOME that is or holds a system folder', { skip: noBwrap }, () => {
  it('is refused when the run is planned, before any run or sandbox is made', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-plan-'));
    try {
      const repo = join(root, 'repo');
      mkdirSync(join(repo, '.svc'), { recursive: true });
      spawnSync('git', ['init', '-q', repo]);
      const config = { provider: 'p', providers: { p: { command: ['true'] } } };
      writeFileSync(join(repo, '.svc', 'config.json'), JSON.stringify(config));
      const env = { PATH: process.env.PATH, SVC_CONFIG_DIR: join(root, 'config') };
      const plan = (home: string) =>
        planRun({ repo, workdir: repo, provider: null, pr: false, env: { ...env, HOME: home }, routed: false });
      // Refused before the sandbox probe, which keeps its result under HOME: no /.svc or /usr/.svc is made.
      const made = ['/.svc', '/usr/.svc'].filter((p) => !existsSync(p));
      for (const home of ['/usr/', '//']) assert.throws(() => plan(home), BadSettingError, home);
      assert.deepEqual(made.filter((p) => existsSync(p)), []);
      assert.equal(plan(join(root, 'home')).sandbox.kind, 'bwrap');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

// A private mount namespace with an empty tmpfs over /usr/local/games: HOME and a token file can live under /usr
// there while the host stays unchanged.
const GAMES = '/usr/local/games';
const unshareWorks = bwrapWorks && spawnSync('unshare',
  ['-m', '--propagation', 'private', 'sh', '-c', `mount -t tmpfs tmpfs ${GAMES}`]).status === 0;

const unshareSkip = unshareWorks ? false : 'unshare -m is not permitted here';

describe('a HOME under /usr under a real bwrap', { skip: unshareSkip }, () => {
  it('shows neither ~/.svc, ~/.ssh nor a token file under /usr to a check or to svc\'s git', () => {
    const root = mkdtempSync(join(tmpdir(), 'svc-spawn-'));
    try {
      const src = (file: string) => JSON.stringify(new URL(`../../src/spawn/${file}`, import.meta.url).href);
      const inner = join(root, 'inner.ts');
      writeFileSync(inner, `
import { spawnSync } from 'node:child_process';
import { mkdirSync, writeFileSync } from 'node:fs';
import { bwrapArgv, closeSandboxFds, openSandboxFds } from ${src('bwrap-argv.ts')};
import { agentSandboxPlan, gitSandboxPlan } from ${src('agent-plan.ts')};
const home = '${GAMES}/home';
const repo = '${root}/repo';
for (const dir of [home + '/.svc/keys', home + '/.ssh', repo]) mkdirSync(dir, { recursive: true });
writeFileSync(home + '/.svc/keys/k.pem', 'SECRET-KEY');
writeFileSync(home + '/.ssh/id_ed25519', 'SSH-KEY');
writeFileSync('${GAMES}/token', 'TOKEN-FILE');
spawnSync('git', ['init', '-q', repo]);
const env = { PATH: '/usr/bin:/bin', HOME: home, SVC_CONTROL_TOKEN_FILE: '${GAMES}/token' };
const svcHome = home + '/.svc';
const plans = [
  agentSandboxPlan({ workdir: repo, repo, ioDir: repo, askDir: repo, answerDir: repo, svcHome, home,
    provider: 'check', declared: [], program: '/bin/sh', env, gate: null }),
  gitSandboxPlan({ workdir: repo, repo, home, svcHome, env, scratch: [] }),
];
const script = 'cat ' + home + '/.svc/keys/k.pem ' + home + '/.ssh/id_ed25519 ${GAMES}/token 2>/dev/null; echo done';
for (const plan of plans) {
  const argv = bwrapArgv('bwrap', plan, ['sh', '-c', script]);
  const fds = openSandboxFds();
  const run = spawnSync(argv[0], argv.slice(1), { encoding: 'utf8', stdio: ['pipe', 'pipe', 'pipe', ...fds] });
  closeSandboxFds(fds);
  process.stdout.write(run.stdout + run.stderr);
}
`);
      const run = spawnSync('unshare', ['-m', '--propagation', 'private', 'sh', '-c',
        `mount -t tmpfs tmpfs ${GAMES} && exec "$0" "$1"`, process.execPath, inner], { encoding: 'utf8' });
      assert.equal(run.status, 0, run.stderr);
      assert.equal(run.stdout, 'done\ndone\n');
    } finally {
      rmSync(root, { recursive: true, force: true });
    }
  });
});

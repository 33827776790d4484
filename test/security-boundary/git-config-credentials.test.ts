// The agent sees the repository's git directory read-only (its worktree needs the objects and refs), but not the
// credentials a checkout's config or the host's system config may hold (DESIGN §7a "It sees only what it needs"): a
// token in a remote's URL, or the Authorization header actions/checkout persists as http.<url>.extraheader.
// Black-box: a real `svc start` in bwrap.
import { describe, it, before, after } from 'node:test';
import assert from 'node:assert/strict';
import {
  appendFileSync, chmodSync, existsSync, readdirSync, readFileSync, renameSync, symlinkSync, writeFileSync,
} from 'node:fs';
import { join } from 'node:path';
import { execFileSync, spawnSync } from 'node:child_process';
import { makeRepo, readJson, svcEnv, CLI, GIT_ENV, type TestRepo } from '../engine/fixtures.ts';
import { runChild } from '../helpers/run-child.ts';
import { bwrapWorks } from '../helpers/sandbox.ts';

// Reads the config git reads for the worktree, directly and through git, into found.txt, which svc commits.
const READS_CONFIG = `#!/bin/sh
cat > /dev/null
common=$(git rev-parse --path-format=absolute --git-common-dir)
{
  cat "$common/config" "$common/config.real" "$common/config.worktree" "$common/modules/vendor/lib/config"
  cat "$common"/worktrees/*/modules/vendor/lib/config /etc/gitconfig
  git config --list
  git status --short >/dev/null && echo "git:works"
} > found.txt 2>&1
`;

/** A `svc start` of the `reads` provider in `repo` (`wrap` runs it: a private mount namespace), and what it read. */
async function readConfig(
  repo: TestRepo, wrap: string[] = [], extra: NodeJS.ProcessEnv = {},
): Promise<{ found: string; run: string }> {
  const env = svcEnv(repo, extra);
  delete env.SVC_SANDBOX;
  delete env.SVC_ORIGIN;
  const [command, ...args] = [...wrap, process.execPath, CLI, 'start', '--brief', 'read the config', '--provider',
    'reads', '--worktree'];
  const res = await runChild(command!, args, { cwd: repo.repo, env });
  assert.equal(res.code, 0, res.stderr);
  const { run } = JSON.parse(res.stdout.trim().split('\n')[0]!) as { run: string };
  const state = readJson(join(repo.repo, '.svc', 'runs', run, 'state.json'));
  const found = readFileSync(join(state.workdir, 'found.txt'), 'utf8');
  assert.match(found, /git:works/);
  return { found, run };
}

const SYSTEM_CONFIGS = ['/etc/gitconfig', '/usr/local/etc/gitconfig'];

const notSeen = (found: string, secrets: string[]): void => {
  for (const secret of secrets) assert.equal(found.includes(secret), false, `${secret} reached the agent:\n${found}`);
};

describe('security: the git config an agent sees', { skip: !bwrapWorks && 'bwrap cannot run here' }, () => {
  let repo: TestRepo;
  const git = (...args: string[]) => execFileSync('git', args, { cwd: repo.repo, env: { ...process.env, ...GIT_ENV } });

  before(() => {
    repo = makeRepo({ providers: { reads: READS_CONFIG } });
    git('config', 'http.https://github.com/.extraheader', 'AUTHORIZATION: basic SECRET-HEADER-1');
    git('remote', 'add', 'mirror', 'https://x-access-token:SECRET-URL-2@github.com/acme/api.git');
    git('config', 'remote.mirror.pushurl', 'https://bot:SECRET-URL-3@example.com/acme/api.git');
    git('config', 'url.https://ci:SECRET-BASE-4@example.com/.insteadOf', 'https://example.com/');
    git('config', 'credential.https://example.com.helper', 'store --file=/tmp/SECRET-PATH-5');
    // Keys no block list knew, and a password holding `@`.
    git('config', 'sendemail.smtpPass', 'SECRET-SMTP-7');
    git('config', 'github.token', 'SECRET-GITHUB-8');
    git('config', 'hub.oauthtoken', 'SECRET-HUB-9');
    // A key git needs outside a subsection only.
    git('config', 'user.x.name', 'SECRET-SUBSECTION-25');
    git('remote', 'add', 'at', 'https://bot:p@ss-SECRET-AT-10@example.com/acme/api.git');
    // Tokens in a URL's query (GitLab's private_token, an access_token), and settings git needs or must not get.
    git('remote', 'add', 'query', 'https://example.com/acme/api.git?private_token=SECRET-QUERY-15');
    git('config', 'lfs.url', 'https://lfs.example.com/acme?access_token=SECRET-QUERY-16#x');
    // Parameters after `;` or `&`, a user info percent-encoded, a URL encoded whole.
    git('remote', 'add', 'semi', 'https://example.com/acme/api.git;token=SECRET-PARAM-30');
    git('remote', 'add', 'amp', 'https://example.com/acme/api.git&access_token=SECRET-PARAM-31');
    git('remote', 'add', 'enc', 'https://bot%3ASECRET-ENC-32%40example.com/acme/api.git');
    git('remote', 'add', 'whole', 'https%3A%2F%2Fbot%3ASECRET-ENC-33%40example.com%2Facme');
    for (const [key, value] of [['core.hooksPath', '.husky/_'], ['pull.rebase', 'true'], ['merge.conflictStyle',
      'diff3'], ['http.sslCAInfo', '/etc/ssl/certs/ca.pem'], ['http.proxy', 'http://proxy.example:3128'],
    ['merge.ours.driver', 'true']]) git('config', key!, value!);
    // Host files outside the view, named by an include and (through a link the repository commits) an includeIf.
    writeFileSync(join(repo.root, 'pypirc'), '[pypi]\n\tpassword = SECRET-INCLUDED-11\n');
    writeFileSync(join(repo.root, 'other'), '[remote "x"]\n\turl = https://example.com/SECRET-LINKED-12.git\n');
    git('config', 'include.path', join(repo.root, 'pypirc'));
    git('config', 'includeIf.gitdir:/.path', '../linked.inc');
    symlinkSync(join(repo.root, 'other'), join(repo.repo, 'linked.inc'));
    git('add', 'linked.inc');
    // A submodule, whose own config actions/checkout gives the header too (submodules: true).
    const lib = join(repo.root, 'lib');
    execFileSync('git', ['init', '-q', '-b', 'main', lib]);
    execFileSync('git', ['-C', lib, 'commit', '-q', '--allow-empty', '-m', 'lib'],
      { env: { ...process.env, ...GIT_ENV } });
    git('-c', 'protocol.file.allow=always', 'submodule', '-q', 'add', lib, 'vendor/lib');
    git('commit', '-qm', 'lib');
    execFileSync('git', ['-C', join(repo.repo, 'vendor', 'lib'), 'config', 'http.https://github.com/.extraheader',
      'AUTHORIZATION: basic SECRET-SUBMODULE-6']);
    // A linked worktree's submodule, whose git directory git keeps under worktrees/<tree>/modules/.
    const other = join(repo.root, 'other-tree');
    git('worktree', 'add', '-q', other);
    execFileSync('git', ['-C', other, '-c', 'protocol.file.allow=always', 'submodule', '-q', 'update', '--init'],
      { env: { ...process.env, ...GIT_ENV } });
    execFileSync('git', ['-C', join(other, 'vendor', 'lib'), 'config', 'http.https://github.com/.extraheader',
      'AUTHORIZATION: basic SECRET-TREE-MODULE-14']);
    // The worktree's own config file, and the repository's config as a link to a file beside it.
    git('config', 'extensions.worktreeConfig', 'true');
    git('config', '--worktree', 'github.token', 'SECRET-WORKTREE-13');
    renameSync(join(repo.repo, '.git', 'config'), join(repo.repo, '.git', 'config.real'));
    symlinkSync('config.real', join(repo.repo, '.git', 'config'));
  });
  after(() => repo.cleanup());

  it('shows no credential of the checkout\'s git config to the agent, and git still works there', async () => {
    const { found } = await readConfig(repo);
    // Its plain lines as they are (svc's copy), or as git lists them (git's).
    assert.match(found, /^\tworktree = "?(\.\.\/)+vendor\/lib"?$/m, `the submodule's config is shown:\n${found}`);
    // What git needs of the config is still there: the remotes by name, the origin's URL.
    assert.match(found, /^remote\.mirror\.url=https:\/\/github\.com\/acme\/api\.git$/m);
    assert.match(found, /^remote\.mirror\.fetch=\+refs\/heads\/\*:refs\/remotes\/mirror\/\*$/m);
    assert.match(found, /^url\.https:\/\/example\.com\/\.insteadof=https:\/\/example\.com\/$/m);
    assert.match(found, /^remote\.origin\.url=\/.*\/acme\/api\.git$/m);
    assert.match(found, /^remote\.at\.url=https:\/\/example\.com\/acme\/api\.git$/m);
    assert.match(found, /^remote\.query\.url=https:\/\/example\.com\/acme\/api\.git$/m);
    assert.match(found, /^lfs\.url=https:\/\/lfs\.example\.com\/acme$/m);
    for (const name of ['semi', 'amp', 'enc']) {
      assert.match(found, new RegExp(`^remote\\.${name}\\.url=https://example\\.com/acme/api\\.git$`, 'm'));
    }
    for (const kept of ['core.hookspath=.husky/_', 'pull.rebase=true', 'merge.conflictstyle=diff3',
      'http.sslcainfo=/etc/ssl/certs/ca.pem']) assert.match(found, new RegExp(`^${kept.replace(/\./g, '\\.')}$`, 'm'));
    // The gate is the agent's only route out; a merge driver is a program the host's config names.
    assert.doesNotMatch(found, /http\.proxy|merge\.ours/);
    notSeen(found, ['SECRET-HEADER-1', 'SECRET-URL-2', 'SECRET-URL-3', 'SECRET-BASE-4', 'SECRET-PATH-5',
      'SECRET-SUBMODULE-6', 'SECRET-SMTP-7', 'SECRET-GITHUB-8', 'SECRET-HUB-9', 'SECRET-AT-10', 'SECRET-INCLUDED-11',
      'SECRET-LINKED-12', 'SECRET-WORKTREE-13', 'SECRET-TREE-MODULE-14', 'SECRET-QUERY-15', 'SECRET-QUERY-16',
      'SECRET-SUBSECTION-25', 'SECRET-PARAM-30', 'SECRET-PARAM-31', 'SECRET-ENC-32', 'SECRET-ENC-33']);
    // The checkout's own config is unchanged on the host.
    assert.match(readFileSync(join(repo.repo, '.git', 'config'), 'utf8'), /SECRET-HEADER-1/);
  });

  // A private mount namespace: the host's /etc/gitconfig and /usr/local/games stay as they are.
  const unshare = ['unshare', '-m', '--propagation', 'private', 'sh', '-c'];
  const hostSystem = SYSTEM_CONFIGS.filter((file) => existsSync(file));
  const pinnable = !hostSystem.length || spawnSync(unshare[0]!, [...unshare.slice(1), 'true']).status === 0;
  /** A prefix that runs the reader with the host's system configs bind-mounted empty, in its own mount namespace. */
  const showingSystemEmpty = (root: string): string[] => {
    const empty = join(root, 'empty');
    writeFileSync(empty, '');
    return hostSystem.length
      ? [...unshare, `${hostSystem.map((f) => `mount --bind "$0" ${f} && `).join('')}exec "$@"`, empty] : [];
  };
  it('shows a config of only what git needs as it is: no copy, no git run for it',
    { skip: !pinnable && 'needs unshare -m to show the host\'s system config empty' }, async () => {
      const plain = makeRepo({ providers: { reads: READS_CONFIG } });
      try {
        // The host's system configs shown empty (this one's may name a credential helper): no copy for any file.
        const pin = showingSystemEmpty(plain.root);
        const { found, run } = await readConfig(plain, pin);
        assert.ok(found.startsWith(readFileSync(join(plain.repo, '.git', 'config'), 'utf8')), found);
        const io = readdirSync(join(plain.repo, '.svc', 'runs', run, 'io')).filter((name) => name.startsWith('git-'));
        assert.deepEqual(io, []);
      } finally {
        plain.cleanup();
      }
    });

  it('copies a config of kept keys whose comments or empty headers name a credential, leaving those out',
    { skip: !pinnable && 'needs unshare -m to show the host\'s system config empty' }, async () => {
      const plain = makeRepo({ providers: { reads: READS_CONFIG } });
      try {
        const pin = showingSystemEmpty(plain.root);
        // A commented-out remote URL, and headers `git config --unset` leaves with nothing under them.
        appendFileSync(join(plain.repo, '.git', 'config'),
          '# url = https://x-access-token:SECRET-COMMENT-26@github.com/\n' +
          '[url "https://u:SECRET-HEADER-27@github.com/"]\n[http "https://h/?private_token=SECRET-QUERY-28"]\n');
        const { found } = await readConfig(plain, pin);
        assert.match(found, /^remote\.origin\.url=\/.*\/acme\/api\.git$/m);
        notSeen(found, ['SECRET-COMMENT-26', 'SECRET-HEADER-27', 'SECRET-QUERY-28']);
      } finally {
        plain.cleanup();
      }
    });

  const games = '/usr/local/games';
  const mountable = existsSync('/etc/gitconfig') && spawnSync(unshare[0]!, [...unshare.slice(1),
    `mount -t tmpfs tmpfs ${games}`]).status === 0;
  it('shows a build host\'s system config and a config linked under /usr without their credentials too',
    { skip: !mountable && 'needs unshare -m and a /etc/gitconfig to mount over' }, async () => {
      const linked = makeRepo({ providers: { reads: READS_CONFIG } });
      try {
        const [system, config] = [join(linked.root, 'system'), join(linked.root, 'config')];
        writeFileSync(system, '[http]\n\textraheader = AUTHORIZATION: basic SECRET-SYSTEM-17\n[user]\n\tname = Host\n');
        renameSync(join(linked.repo, '.git', 'config'), config);
        appendFileSync(config, '[hub]\n\toauthtoken = SECRET-USR-18\n');
        symlinkSync(`${games}/config`, join(linked.repo, '.git', 'config'));
        const { found } = await readConfig(linked, [...unshare, `mount -t tmpfs tmpfs ${games} && cp "$0" ${games} ` +
          '&& mount --bind "$1" /etc/gitconfig && shift && exec "$@"', config, system]);
        assert.match(found, /^user\.name=Host$/m);
        assert.match(found, /^remote\.origin\.url=\/.*\/acme\/api\.git$/m);
        notSeen(found, ['SECRET-SYSTEM-17', 'SECRET-USR-18']);
      } finally {
        linked.cleanup();
      }
    });

  it('copies the kept lines of a plain config in svc, by the keys git names, with no git run for it',
    { skip: !mountable && 'needs unshare -m and a /etc/gitconfig to mount over' }, async () => {
      const plain = makeRepo({ providers: { reads: READS_CONFIG } });
      try {
        // A cloud image's system config names a credential helper; a checkout's config a token, in plain lines, and
        // Git LFS's filter (a key with a subsection), beside a key git needs only outside one.
        const system = join(plain.root, 'system');
        writeFileSync(system,
          '[credential "https://source.example"]\n\thelper = SECRET-HELPER-20\n[user]\n\tname = Host\n');
        const config = join(plain.repo, '.git', 'config');
        appendFileSync(config, '[github]\n\ttoken = SECRET-PLAIN-21\n[filter "lfs"]\n\tclean = git-lfs clean -- %f\n' +
          '\tprocess = git-lfs filter-process\n\trequired = true\n[http "https://github.com/"]\n' +
          '\textraheader = AUTHORIZATION: basic SECRET-HEADER-22\n[user "x"]\n\tname = SECRET-SUBSECTION-23\n');
        // A config of plain lines but for git's whitespace (a form feed), which git refuses: shown empty.
        const worktree = join(plain.repo, '.git', 'config.worktree');
        writeFileSync(worktree, '[user]\n\fname = FORM-FEED-24\n');
        // A git on PATH that notes each run (where it can write: not inside the sandbox), then runs the real one.
        const real = execFileSync('sh', ['-c', 'command -v git'], { encoding: 'utf8' }).trim();
        const log = join(plain.root, 'git.log');
        writeFileSync(join(plain.bin, 'git'),
          `#!/bin/sh\n{ echo "$*" >> '${log}'; } 2>/dev/null\nexec '${real}' "$@"\n`);
        chmodSync(join(plain.bin, 'git'), 0o755);
        const { found, run } = await readConfig(plain, [...unshare, 'mount --bind "$0" /etc/gitconfig && exec "$@"',
          system], { PATH: `${plain.bin}:${process.env.PATH}` });
        assert.match(found, /^user\.name=Host$/m);
        assert.match(found, /^remote\.origin\.url=\/.*\/acme\/api\.git$/m);
        for (const lfs of ['clean=git-lfs clean -- %f', 'process=git-lfs filter-process', 'required=true']) {
          assert.ok(found.includes(`\nfilter.lfs.${lfs}\n`), `filter.lfs.${lfs} is kept:\n${found}`);
        }
        notSeen(found, ['SECRET-HELPER-20', 'SECRET-PLAIN-21', 'SECRET-HEADER-22', 'SECRET-SUBSECTION-23',
          'FORM-FEED-24']);
        // git lists only the config it refuses.
        const listed = [...readFileSync(log, 'utf8').matchAll(/ config --file (\S+) --no-includes -z --list$/gm)];
        assert.deepEqual(listed.map((match) => match[1]), [worktree]);
        const io = readdirSync(join(plain.repo, '.svc', 'runs', run, 'io')).filter((name) => name.startsWith('git-'));
        assert.deepEqual(io.sort(), ['git-config-0', 'git-config-1', 'git-config-2']);
      } finally {
        plain.cleanup();
      }
    });

  it('copies a repository config linked to the system config once',
    { skip: !mountable && 'needs unshare -m and a /etc/gitconfig to mount over' }, async () => {
      const linked = makeRepo({ providers: { reads: READS_CONFIG } });
      try {
        const system = join(linked.root, 'system');
        writeFileSync(system, readFileSync(join(linked.repo, '.git', 'config'), 'utf8') +
          '[http]\n\textraheader = AUTHORIZATION: basic SECRET-SYSTEM-19\n');
        renameSync(join(linked.repo, '.git', 'config'), join(linked.root, 'config'));
        symlinkSync('/etc/gitconfig', join(linked.repo, '.git', 'config'));
        const { found, run } = await readConfig(linked, [...unshare, 'mount --bind "$0" /etc/gitconfig && exec "$@"',
          system]);
        notSeen(found, ['SECRET-SYSTEM-19']);
        const io = readdirSync(join(linked.repo, '.svc', 'runs', run, 'io')).filter((name) => name.startsWith('git-'));
        assert.deepEqual(io, ['git-config-0']);
      } finally {
        linked.cleanup();
      }
    });
});
